{#- roll a state out to the minion's peers once it is up -#}
{%- set role = data.get('role', 'base') %}
{%- set dc = data['id'].split('-')[0] %}
{%- set hosts = data.get('peers', '').split(',') if data.get('peers') else [] %}
refresh_{{ role }}_{{ dc }}:
  local.state.sls:
    - tgt: 'G@role:{{ role }} and G@dc:{{ dc }} and not {{ data['id'] }}'
    - tgt_type: compound
    - arg:
      - {{ role }}.peers
    - kwarg:
        pillar:
          new_peer: {{ data['id'] }}
          peer_count: {{ hosts|length }}
{%- for h in hosts %}
ping_{{ h|trim }}:
  local.test.ping:
    - tgt: {{ h|trim }}
{%- endfor %}
