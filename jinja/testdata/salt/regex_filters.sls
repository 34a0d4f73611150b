{% set m = data['message']|regex_match('^(\w+): (.*)$') %}
{% if m %}
log_{{ m[0]|lower }}:
  local.log.warning:
    - tgt: {{ data['id'] }}
    - arg:
      - "{{ m[1] }}"
{% endif %}
{% if data['message']|regex_search('disk') is not none %}
disk_alert:
  local.disk.usage:
    - tgt: {{ data['id'] }}
{% endif %}
