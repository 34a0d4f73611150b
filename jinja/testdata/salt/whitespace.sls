{%- set id = data['id'] -%}
{%- set roles = data.get('roles', []) -%}
{%- if 'db' in roles -%}
backup_{{ id }}:
  local.state.sls:
    - tgt: {{ id }}
    - arg:
      - backup
{% endif -%}
{%- if 'web' in roles %}
cache_{{ id }}:
  local.state.sls:
    - tgt: {{ id }}
    - arg:
      - varnish
{%- endif %}
