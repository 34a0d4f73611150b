delete_key_{{ data['name'] }}:
  wheel.key.delete:
    - args:
      - match: {{ data['name'] }}

notify_destroyed:
  runner.http.query:
    - url: 'https://hooks.example.com/cloud'
    - method: POST
    - data: '{"text": "{{ data['name'] }} destroyed"}'
