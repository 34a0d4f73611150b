{% set minion = data['id'] %}
{% set reason = data['data']['reason'] %}
{% set extra = data.extra %}
{% if data['data']['kind'] == 'reboot' %}
reboot_{{ minion }}:
  local.system.reboot:
    - tgt: {{ minion }}
    - kwarg:
        at_time: {{ extra|default(5) }}
{% elif extra is defined %}
notify_{{ minion }}:
  local.event.send:
    - tgt: {{ minion }}
    - arg:
      - notify/{{ reason }}
{% endif %}
