{% set ref = data['post'].get('ref', '') %}
{% if data['headers'].get('X-Gitlab-Token') == 'sekrit' and ref == 'refs/heads/main' %}
deploy_main:
  runner.state.orchestrate:
    - args:
      - mods: orch.deploy
      - pillar:
          ref: {{ ref }}
          commits: {{ data['post']['commits']|length }}
          author: {{ data['post']['user_name']|yaml_dquote }}
{% elif ref.startswith('refs/tags/') %}
tag_build:
  runner.state.orchestrate:
    - args:
      - mods: orch.release
      - pillar:
          version: {{ ref.split('/')[-1] }}
{% endif %}
