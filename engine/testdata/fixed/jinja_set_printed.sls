{% set id = data['id'] %}
r:
  local.test.ping:
    - tgt: {{ id }}
   - x
