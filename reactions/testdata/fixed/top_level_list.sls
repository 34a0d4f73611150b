#!gotmpl|yaml
{{- $id := .data.id }}
- {{ $id }}
