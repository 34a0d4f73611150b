{#- Put /etc/important_file back when the inotify beacon reports a change.
    Salt (2016.11 and later) sends the beacon's data flat, so the minion id
    is data['id']; releases before nest it (data['data']['id']), and such
    an event fails to render here, as in Salt. #}
revert-file:
  local.state.apply:
    - tgt: {{ data['id'] }}
    - args:
      - mods: maintain_important_file
      - saltenv: base
