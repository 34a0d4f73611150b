sync_{{ data['id'] }}:
  local.saltutil.sync_all: [{tgt: '{{ data['id'] }}'}, {kwarg: {refresh: True, saltenv: {{ data.get('env', 'base') }}}}]
apply_{{ data['id'] }}:
  local.state.apply:
    - tgt: {{ data['id'] }}
    - arg: [{{ data['mods'] }}, 'test={{ data.get('test', False) }}']
    - kwarg: {pillar: {minion: {{ data['id'] }}, n: {{ data['n'] }}}}
