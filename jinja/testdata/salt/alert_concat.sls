{% set msg = 'minion ' ~ data['id'] ~ ' returned ' ~ data['retcode'] %}
{% set subject = '[salt] ' + data['id'] + ' ' + data['fun'] %}
alert_mail:
  local.smtp.send_msg:
    - tgt: mailer
    - arg:
      - ops@example.com
      - "{{ msg }}"
    - kwarg:
        subject: "{{ subject }}"
        profile: my-smtp-account
