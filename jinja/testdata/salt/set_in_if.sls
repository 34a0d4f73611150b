{% if data['env'] == 'prod' %}
  {% set target = 'G@env:prod and ' ~ data['role'] %}
  {% set batch = '10%' %}
{% elif data['env'] == 'stage' %}
  {% set target = 'G@env:stage' %}
  {% set batch = 2 %}
{% else %}
  {% set target = data['id'] %}
  {% set batch = None %}
{% endif %}
apply_{{ data['env'] }}:
  local.state.apply:
    - tgt: '{{ target }}'
    - tgt_type: compound
{% if batch %}
    - batch: {{ batch }}
{% endif %}
