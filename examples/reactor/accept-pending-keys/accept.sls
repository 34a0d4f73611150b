#!gotmpl|yaml
{{- if and (hasKey .data "act") (eq .data.act "pend") (hasPrefix "web" .data.id) }}
accept_key:
  wheel.key.accept:
    - args:
      - match: {{ .data.id }}
{{- end }}
