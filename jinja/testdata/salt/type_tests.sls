{% set r = data['ret'] %}
{% if r is mapping %}
  {% set kind = 'dict' %}
{% elif r is string %}
  {% set kind = 'str' %}
{% elif r is sameas true or r is sameas false %}
  {% set kind = 'bool' %}
{% elif r is integer %}
  {% set kind = 'int-even' if r is even else 'int-odd' %}
{% elif r is float %}
  {% set kind = 'float' %}
{% elif r is none %}
  {% set kind = 'none' %}
{% elif r is sequence %}
  {% set kind = 'list' %}
{% endif %}
classify_{{ data['id'] }}:
  local.grains.setval:
    - tgt: {{ data['id'] }}
    - arg:
      - ret_kind
      - {{ kind }}
    - kwarg:
        number: {{ r is number }}
        iterable: {{ r is iterable }}
        big: {{ r is number and r is gt(10) }}
        by3: {{ r is integer and r is divisibleby(3) }}
        lower: {{ r is string and r is lower }}
