{% set up = data['minions']|selectattr('up')|map(attribute='id')|list %}
{% set oses = data['minions']|map(attribute='os')|list|unique|list %}
{% if up %}
ping_up:
  local.test.ping:
    - tgt: {{ up|join(',') }}
    - tgt_type: list
    - kwarg:
        count: {{ up|length }}
        first: {{ up|first }}
        oses: '{{ oses|join(' ') }}'
{% endif %}
{% for m in data['minions']|selectattr('os', 'equalto', 'debian') %}
upgrade_{{ m.id }}:
  local.pkg.upgrade:
    - tgt: {{ m.id }}
{% endfor %}
