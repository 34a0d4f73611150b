#!gotmpl|yaml
{{- /*
  Current Salt (2016.11 and later) sends the beacon's data flat:
    {"id": "web1", "path": "/etc/important_file", "change": "IN_MODIFY", "_stamp": ...}
  so the minion id is .data.id. Releases before 2016.11 (and Salt's docs, to
  this day) nest it: .data.data.id. For masters that still receive the nested
  shape, use this instead of the first line below:
    {{ $id := dig "id" (dig "data" "id" "" .data) .data }}
  With the flat form as written, a nested event fails to render with
  "map has no entry for key id" - as Salt's StrictUndefined does.
*/ -}}
{{- $id := .data.id }}
revert-file:
  local.state.apply:
    - tgt: {{ $id }}
    - args:
      - mods: maintain_important_file
      - saltenv: base
