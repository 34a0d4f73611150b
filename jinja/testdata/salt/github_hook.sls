{% set event = data['headers'].get('X-Github-Event', 'unknown') %}
{% set payload = data['post'] %}
{% if event == 'push' and payload['ref'] in ['refs/heads/main', 'refs/heads/master'] %}
update_code:
  runner.state.orchestrate:
    - args:
      - mods: orch.update_code
      - pillar:
          repo: {{ payload['repository']['full_name'] }}
          sha: '{{ payload['after'] }}'
          pusher: {{ payload['pusher']['name']|default('nobody') }}
          files: {{ payload['head_commit']['modified']|length if payload['head_commit'] else 0 }}
{% elif event == 'ping' %}
hook_ping:
  runner.test.arg:
    - args:
      - pong {{ payload.get('zen', '') }}
{% endif %}
