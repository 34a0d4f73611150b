#!gotmpl|yaml
{{- if dig "broken" false .data }}
r: [
{{- else }}
r:
  local.test.ping:
    - tgt: {{ .data.id }}
{{- end }}
