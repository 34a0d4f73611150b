{% set parts = tag.split('/') %}
{% if tag.startswith('salt/minion/') and tag.endswith('/start') %}
sync_{{ parts[2] }}:
  local.saltutil.sync_all:
    - tgt: {{ parts[2] }}
    - kwarg:
        refresh: True
{% elif tag is match('salt/key') %}
key_event_{{ data['id'] }}:
  runner.manage.status: []
{% endif %}
