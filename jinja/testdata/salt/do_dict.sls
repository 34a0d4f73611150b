{% set opts = {'queue': True} %}
{% if data.get('test') %}{% do opts.update({'test': True}) %}{% endif %}
{% set targets = [] %}
{% for m in data['minions'] %}{% if m not in targets %}{% do targets.append(m) %}{% endif %}{% endfor %}
apply_batch:
  local.state.apply:
    - tgt: {{ targets|join(',') }}
    - tgt_type: list
    - kwarg: {{ opts|json }}
