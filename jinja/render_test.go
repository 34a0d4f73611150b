package jinja

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/reactord/reactord/reactions"
)

// TestConvertRender converts Jinja reaction files and renders the result
// with reactord's engine, comparing the reactions (ID and body as JSON)
// with what Salt renders from the original, worked out by hand from
// Jinja's and Salt's semantics.
func TestConvertRender(t *testing.T) {
	const keyAccept = `{% if data['act'] == 'pend' and data['id'].startswith('web') %}
minion_add:
  wheel.key.accept:
    - match: {{ data['id'] }}
{% endif %}
`
	const setLeak = `{% set target = data.get('target', data['id']) %}
{% if data['data'] is defined and 'env' in data['data'] %}
  {% set fun = 'state.apply' %}
{% else %}
  {% set fun = 'test.ping' %}
{% endif %}
run_{{ target }}:
  local.{{ fun }}:
    - tgt: {{ target }}
`
	const forItems = `{% for name, state in data['jobs'].items() %}
{{ name }}_{{ loop.index }}:
  local.state.apply:
    - tgt: {{ data.id }}
    - arg:
      - {{ state }}
{% endfor %}
`
	const strict = `x:
  local.test.ping:
    - tgt: {{ data['missing'] }}
`
	for _, tc := range []struct {
		name, src string
		data      map[string]any
		want      string // reactions as JSON lines "ID body" (the body lists the function last), or "error: substring"
	}{
		{"accept web", keyAccept, map[string]any{"act": "pend", "id": "web1"},
			`"minion_add" {"wheel":[{"match":"web1"},"key.accept"]}`},
		{"accept db", keyAccept, map[string]any{"act": "pend", "id": "db1"}, ``},
		{"set leaks from if", setLeak, map[string]any{"id": "m1", "data": map[string]any{"env": "prod"}},
			`"run_m1" {"local":[{"tgt":"m1"},"state.apply"]}`},
		{"set leaks from else", setLeak, map[string]any{"id": "m1", "target": "m2"},
			`"run_m2" {"local":[{"tgt":"m2"},"test.ping"]}`},
		{"for items", forItems, map[string]any{"id": "m1", "jobs": map[string]any{"a": "nginx", "b": "php"}},
			`"a_1" {"local":[{"tgt":"m1"},{"arg":["nginx"]},"state.apply"]}` + "\n" + `"b_2" {"local":[{"tgt":"m1"},{"arg":["php"]},"state.apply"]}`},
		{"missing key is an error", strict, map[string]any{"id": "m1"}, "error: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Convert("x.sls", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			f, err := reactions.ParseFile("x.sls", out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			rs, err := f.Render("salt/test", tc.data)
			var got string
			if err != nil {
				got = "error: " + err.Error()
				if !strings.HasPrefix(tc.want, "error: ") || !strings.Contains(got, strings.TrimPrefix(tc.want, "error: ")) {
					t.Errorf("got %s, want %s\n%s", got, tc.want, out)
				}
				return
			}
			var lines []string
			for _, r := range rs {
				id, _ := json.Marshal(r.ID)
				b := r.Body.Clone()
				b.Delete("__sls__")
				body, _ := json.Marshal(b)
				lines = append(lines, string(id)+" "+string(body))
			}
			got = strings.Join(lines, "\n")
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s\nconverted:\n%s", got, tc.want, out)
			}
		})
	}
}
