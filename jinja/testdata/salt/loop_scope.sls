{% set count = 0 %}
{% set ns = namespace(failed=0, names=[]) %}
{% for id, res in data['return'].items() %}
  {% set count = count + 1 %}
  {% if not res['result'] %}
    {% set ns.failed = ns.failed + 1 %}
    {% do ns.names.append(id) %}
  {% endif %}
{% endfor %}
summary_{{ data['id'] }}:
  local.event.send:
    - tgt: {{ data['id'] }}
    - arg:
      - summary
    - kwarg:
        outer_count: {{ count }}
        failed: {{ ns.failed }}
        names: '{{ ns.names|join(",") }}'
