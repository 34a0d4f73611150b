#!gotmpl|yaml
r:
  local.state.apply:
    - tgt: {{ .data.id }}
   - arg: [{{ .data.sls }}]
