{% if data.get('broken') %}
r: [
{% else %}
r:
  local.test.ping:
    - tgt: {{ data.id }}
{% endif %}
