{% set path = data['path'] %}
{% if data['change'] in ['IN_MODIFY', 'IN_DELETE'] and not path.endswith('.swp') %}
revert_{{ path|replace('/', '_') }}:
  local.state.sls:
    - tgt: {{ data['id'] }}
    - arg:
      - nginx.config
    - kwarg:
        queue: True
{% endif %}
