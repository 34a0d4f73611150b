{% if data['fun'] in ['state.apply', 'state.highstate', 'state.sls'] and not data['success'] %}
notify_failure:
  local.cmd.run:
    - tgt: monitor
    - arg:
      - "logger -t salt 'job {{ data['jid'] }} on {{ data['id'] }} failed: retcode {{ data['retcode'] }}'"
{% elif data['fun'] == 'test.ping' and data['return'] != True %}
ping_failed:
  local.cmd.run:
    - tgt: monitor
    - arg:
      - "logger -t salt 'ping {{ data['id'] }} returned {{ data['return'] }}'"
{% endif %}
