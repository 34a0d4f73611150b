#!gotmpl|yaml
deploy:
  local.state.sls:
    - tgt: {{ .data.id }}
    - args:
      - mods: deploy
