{% if 'ERROR' in data.get('return', '')|string or data.get('retcode', 0) != 0 %}
{%   set short = data['fun'].split('.')|last %}
record_failure_{{ short }}:
  runner.salt.cmd:
    - arg:
      - 'log.error'
      - 'minion {{ data.id }} failed {{ data.fun }} (jid {{ data.jid }})'
{% endif %}
