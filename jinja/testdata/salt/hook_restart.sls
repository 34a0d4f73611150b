{% set body = data.get('post', {}) %}

{% if body.token == "s3cr3t-token" %}
restart_service:
  cmd.service.restart:
    - tgt: '{{ body.target }}'
    {% if "tgt_type" in body %}
    - tgt_type: {{ body.tgt_type }}
    {% endif %}
    - arg:
      - {{ body.service }}
    - ret: syslog
{% endif %}
