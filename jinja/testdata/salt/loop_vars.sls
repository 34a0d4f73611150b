{% for host in data['hosts'] %}
step_{{ loop.index }}_of_{{ loop.length }}:
  local.cmd.run:
    - tgt: {{ host }}
    - arg:
      - echo {{ loop.revindex }} {{ loop.revindex0 }} {{ 'first' if loop.first else ('last' if loop.last else 'middle') }}
{% else %}
nothing_to_do:
  runner.test.arg:
    - arg:
      - no hosts
{% endfor %}
