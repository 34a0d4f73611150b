{# a failed-job mail: the job's output indented under a header; the
   orchestration runs in the reactor's saltenv #}
{% set out = data.get('return', '')|string %}
mail_{{ data['id'] }}:
  local.smtp.send_msg:
    - tgt: mailer
    - arg:
      - ops@example.com
      - |
        job {{ data['jid'] }} on {{ data['id'] }} failed:
          {{ out|indent(10) }}
      - '{{ out|indent(width=4, first=True)|replace("\n", "|") }}'
      - '{{ out|indent("> ", blank=True)|replace("\n", "|") }}'
    - kwarg:
        saltenv: {{ saltenv }}
        sls: '{{ sls }}'
        hosts: {{ data.get('hosts', [['a', 1], ['b', 2]])|map(attribute=1)|list }}
