#!gotmpl|yaml
{{- if eq .data.act "pend" }}
accept:
  wheel.key.accept:
    - args:
      - match: {{ .data.id }}
{{- end }}
