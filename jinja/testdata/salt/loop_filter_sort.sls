{# disk usage beacon: clean every mount over the limit, sorted; the loop
   filter skips the event's own keys #}
{% for mount in data|sort if mount not in ('id', '_stamp') %}
clean_{{ loop.index }}_of_{{ loop.length }}:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - arg:
      - 'find {{ mount }}/tmp -mtime +7 -delete'
{% else %}
nothing_{{ data['id'] }}:
  local.test.ping:
    - tgt: {{ data['id'] }}
{% endfor %}
{% for name in data.get('names', [])|sort(reverse=True) %}
byname_{{ name }}:
  runner.test.arg:
    - args:
      - {{ name }}
{% endfor %}
{% for job in data.get('jobs', [])|sort(attribute='prio') if job['on'] %}
job_{{ job['name'] }}:
  local.state.apply:
    - tgt: {{ data['id'] }}
    - order: {{ loop.index }}
    - arg:
      - {{ job['name'] }}
{% endfor %}
