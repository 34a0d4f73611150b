#!gotmpl|yaml
highstate_on_start:
  local.state.apply:
    - tgt: {{ .data.id }}
