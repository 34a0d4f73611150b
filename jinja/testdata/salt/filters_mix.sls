{% set name = data['name'] %}
{% set opt = data.get('opt')|default('fallback', true) %}
mix_{{ name|lower }}:
  local.test.arg:
    - tgt: web1
    - arg:
      - {{ name|upper }}
      - {{ name|string }}
      - {{ data['items']|join(', ') }}
      - {{ data['items']|length }}
      - {{ data['items']|last }}
      - {{ opt }}
      - {{ data['missing']|default(None) }}
      - "{{ tag.split('/')[-1] }}"
      - {{ data['items']|unique|list }}
    - kwarg:
        size: {{ data['meta']|length }}
        name_len: {{ name|string|length }}
        is_none: {{ data.get('x') is none }}
        not_defined: {{ data.x is not defined }}
