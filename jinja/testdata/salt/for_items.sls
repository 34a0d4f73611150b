{% for name, version in data['packages'].items() %}
pin_{{ name }}:
  local.pkg.install:
    - tgt: {{ data['id'] }}
    - arg:
      - {{ name }}
    - kwarg:
        version: '{{ version }}'
{% endfor %}
