{% set names = [] %}
{% for k, v in data['services'].items() %}{% do names.append(k ~ '=' ~ v) %}{% endfor %}
restart_services:
  local.service.restart:
    - tgt: {{ data['id'] }}
    - arg:
      - "{{ names|join(' ') }}"
    - kwarg:
        first: {{ data['services'].keys()|list|first }}
