{% set allowed = ['web1', 'web2', 'db1'] %}
{% if data['act'] == 'pend' and data['id'] in allowed %}
accept_{{ data['id'] }}:
  wheel.key.accept:
    - match: {{ data['id'] }}
{% elif data['act'] == 'pend' %}
{# unknown minion: tell someone, do not accept #}
unknown_minion:
  runner.event.send:
    - tag: custom/unknown_key
    - data:
        id: {{ data['id'] }}
        result: {{ data['result'] }}
{% endif %}
