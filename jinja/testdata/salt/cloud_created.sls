{%- if data.profile is defined and data.profile.startswith('web') %}
bootstrap_{{ data.name }}:
  local.state.apply:
    - tgt: {{ data.name }}
    - arg:
      - roles.web
{%- else %}
ping_{{ data.name }}:
  local.test.ping:
    - tgt: {{ data.name }}
{%- endif %}
