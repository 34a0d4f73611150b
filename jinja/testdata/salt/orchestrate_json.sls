orchestrate_deploy:
  runner.state.orchestrate:
    - args:
      - mods: orch.deploy
      - pillar:
          event_tag: {{ tag }}
          event_data: {{ data|json }}
