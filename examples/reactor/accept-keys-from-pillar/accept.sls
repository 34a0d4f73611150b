{#- The minions whose keys are accepted as they arrive: the master's pillar
    lists them under reactor:autoaccept (none when it lists nothing). #}
{% set allowed = salt['pillar.get']('reactor:autoaccept', []) %}
{% if data.get('act') == 'pend' and data['id'] in allowed %}
accept_key:
  wheel.key.accept:
    - args:
      - match: {{ data['id'] }}
{% endif %}
