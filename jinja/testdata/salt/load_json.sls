{% set payload = data['body']|load_json %}
{% if payload['action'] == 'restart' %}
restart_{{ payload['service'] }}:
  local.service.restart:
    - tgt: {{ payload['host'] }}
    - arg:
      - {{ payload['service'] }}
{% endif %}
