{% if data['retcode'] == 0 %}
ok_{{ data['id'] }}:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - arg:
      - ok
{% elif data['retcode'] > 0 %}
fail_{{ data['id'] }}:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - arg:
      - 'failed with {{ data['retcode'] }}'
{% endif %}
