set_grain:
  local.grains.setval:
    - tgt: {{ data['id'] }}
    - arg:
      - {{ data['key'] }}
      - {{ data['value'] }}
