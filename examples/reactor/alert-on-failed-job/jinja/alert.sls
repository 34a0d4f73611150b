{#- When a minion returns a failed job, fire an alert event a notifier can
    pick up. saltutil.find_job returns are the master's own polling of
    long-running jobs and are ignored. #}
{% if not data.get('success', True) and data.get('fun') != 'saltutil.find_job' %}
notify_failure:
  runner.event.send:
    - args:
      - tag: myco/alert/job_failed
      - data:
          minion: {{ data['id'] }}
          jid: '{{ data['jid'] }}'
          fun: {{ data['fun'] }}
          retcode: {{ data.get('retcode', 1) }}
{% endif %}
