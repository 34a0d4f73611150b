{#- Run a highstate on every minion as it (re)connects: state.apply with no
    arguments is a highstate. #}
highstate_on_start:
  local.state.apply:
    - tgt: {{ data['id'] }}
