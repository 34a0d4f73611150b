#!gotmpl|yaml
highstate:
  local.state.apply:
    - tgt: {{ .data.id }}
