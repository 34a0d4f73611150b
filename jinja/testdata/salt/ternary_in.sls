{% set env = 'prod' if data['id'] in data.get('prod_hosts', []) else 'dev' %}
{% set kind = data['kind'] if data['kind'] not in ['', None] else 'unknown' %}
tag_{{ data['id'] }}:
  local.grains.setval:
    - tgt: {{ data['id'] }}
    - arg:
      - env
      - {{ env }}
    - kwarg:
        kind: {{ kind }}
        has_sub: {{ 'web' in data['id'] }}
