{# Accept keys of web minions; reject anything called bad* #}
{% if 'act' in data and data['act'] == 'pend' and data['id'].startswith('web') %}
minion_add:
  wheel.key.accept:
    - args:
      - match: {{ data['id'] }}
{% elif data['act'] == 'pend' and data['id'].startswith('bad') %}
minion_reject:
  wheel.key.reject:
    - args:
      - match: {{ data['id'] }}
{% endif %}
