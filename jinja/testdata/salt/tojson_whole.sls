{% if data['id'] is match('minion\d+\.local') %}
compose_ready:
  runner.state.orchestrate:
    - args:
        - mods:
            - orch.highstate
        - pillar:
            event: {{ data|tojson }}
            minion: {{ data['id'] }}
{% endif %}
