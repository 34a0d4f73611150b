{% set parts = tag.split('/') %}
{% set minion = parts[2] %}
{% set short = minion.split('.')[0] %}
{% set jid = data['jid'][:8] %}
{% set last = data['jid'][-6:] %}
{% set first = data['targets']|first %}
log_{{ short }}:
  local.cmd.run:
    - tgt: {{ first }}
    - arg:
      - echo {{ jid }} {{ last }} {{ parts|length }} {{ data['targets'][1:]|join(',') }}
