#!gotmpl|yaml
r:
  local.test.ping:
    - tgt: {{ .data.id }}
