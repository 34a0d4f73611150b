#!gotmpl|yaml
{{- range .data.minions }}
ping_{{ . }}:
  local.test.ping:
    - tgt: {{ . }}
{{- end }}
