{% set payload = {'minion': data['id'], 'event': tag, 'changes': data.get('changes', {})} %}
run_orch:
  runner.state.orchestrate:
    - args:
      - mods: orch.react
      - pillar: {{ payload|tojson }}
log_it:
  local.log.info:
    - tgt: {{ data['id'] }}
    - arg:
      - 'payload {{ payload|tojson }}'
