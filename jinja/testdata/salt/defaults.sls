{% set tgt = data.get('target', data['id']) %}
{% set mods = data.get('mods', 'common') %}
apply_{{ tgt }}:
  local.state.sls:
    - tgt: {{ tgt }}
    - arg:
      - {{ mods }}
    - kwarg:
        test: {{ data.get('dry_run', False) }}
        saltenv: {{ data.saltenv|default('base') }}
{% if data.pillar is defined %}
        pillar: {{ data.pillar|json }}
{% endif %}
