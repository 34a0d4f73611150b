{% set id = data['id'] %}
zz_last:
  local.test.ping:
    - tgt: {{ id }}
    - order: last
aa_first:
  local.test.ping:
    - tgt: {{ id }}
    - order: first
mm_middle:
  local.test.ping:
    - tgt: {{ id }}
{% if data.get('extra') %}
bb_extra:
  local.cmd.run:
    - tgt: {{ id }}
    - arg:
      - {{ data['extra'] }}
    - order: 5
{% endif %}
