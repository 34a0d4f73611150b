{%- for m in data['minions'] %}
  {%- if m == 'stop' %}{% break %}{% endif %}
  {%- if m.startswith('#') %}{% continue %}{% endif %}
ping_{{ loop.index }}_{{ m }}:
  local.test.ping:
    - tgt: {{ m }}
    - kwarg:
        first: {{ loop.first }}
        last: {{ loop.last }}
        index0: {{ loop.index0 }}
{%- endfor %}
