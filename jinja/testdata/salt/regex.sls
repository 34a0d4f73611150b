{% if data['id'] is match('web[0-9]+\\.prod') %}
prod_web:
  local.state.apply:
    - tgt: {{ data['id'] }}
{% endif %}
{% set m = data['id']|regex_search('^([a-z]+)([0-9]*)') %}
{% if m %}
role_{{ m[0] }}:
  local.grains.setval:
    - tgt: {{ data['id'] }}
    - arg:
      - role
      - {{ m[0] }}
    - kwarg:
        num: '{{ m[1] }}'
{% endif %}
