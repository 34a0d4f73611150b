package reactions

import "testing"

// TestNewcomerTemplateErrors: the template mistakes a new operator makes
// are reported where they are, with the fix in the message (issue 10 #15).
func TestNewcomerTemplateErrors(t *testing.T) {
	data := map[string]any{"id": "web1", "info": map[string]any{"os": "Debian"}}
	cases := []struct {
		name, src string
		want      string
	}{
		{"if without end",
			"{{- if eq .data.id \"web1\" }}\nrestart:\n  local.service.restart:\n    - tgt: {{ .data.id }}\n",
			"f.sls:1:1: this {{ if }} has no {{ end }} (the template ends at 5:1); add {{ end }} where the block stops"},
		{"range without end inside an if without end",
			"{{- if .data.id }}\nx:\n  local.test.arg:\n    - arg:\n{{- range .data.list }}\n      - {{ . }}\n",
			"f.sls:5:1: this {{ range }} has no {{ end }} (the template ends at 7:1); add {{ end }} where the block stops; the {{ if }} at 1:1 has none either"},
		{"closed blocks, strings and comments are skipped",
			"{{/* {{ if x }} */}}{{ with .data }}{{ \"}}{{ end\" }}{{ end }}\n  {{- if .data.id -}}\n{{ else if .data.x }}{{ `{{ end }}` }}\n",
			"f.sls:2:3: this {{ if }} has no {{ end }} (the template ends at 4:1); add {{ end }} where the block stops"},
		{"missing key",
			"x:\n  local.test.ping:\n    - tgt: {{ .data.minion }}\n",
			`f.sls:3:19: executing "f.sls" at <.data.minion>: map has no entry for key "minion"; for a key an event may lack, use {{ dig "minion" "" .data }} (a default instead of the error) or test it with {{ if hasKey .data "minion" }}`},
		{"missing nested key",
			"x:\n  local.test.ping:\n    - tgt: {{ .data.info.host }}\n",
			`f.sls:3:19: executing "f.sls" at <.data.info.host>: map has no entry for key "host"; for a key an event may lack, use {{ dig "host" "" .data.info }} (a default instead of the error) or test it with {{ if hasKey .data.info "host" }}`},
		{"missing parent key",
			"x:\n  local.test.ping:\n    - tgt: {{ .data.grains.host }}\n",
			`f.sls:3:19: executing "f.sls" at <.data.grains.host>: map has no entry for key "grains"; for a key an event may lack, use {{ dig "grains" "host" "" .data }} (a default instead of the error) or test it with {{ if hasKey .data "grains" }}`},
		{"missing key under with",
			"{{ with .data.info }}x:\n  local.test.ping:\n    - tgt: {{ .host }}\n{{ end }}",
			`f.sls:3:14: executing "f.sls" at <.host>: map has no entry for key "host"; for a key an event may lack, use {{ dig "host" "" . }} (a default instead of the error) or test it with {{ if hasKey . "host" }}`},
		{"YAML error in the rendered text names the template line",
			"{{- /* a comment\nspanning lines */}}\n{{- if eq .data.id \"nobody\" }}\nskipped:\n  local.test.ping:\n    - tgt: x\n{{- end }}\n" +
				"{{- range list \"a\" \"b\" }}\nrestart_{{ . }}:\n  local.service.restart:\n    - tgt: {{ $.data.id }}\n{{- end }}\n   - arg: [nginx]\n",
			"f.sls:8:4: did not find expected key (in the rendered text, from line 13 of the template)"},
		// The column counts the placeholder a printed value stands as.
		{"YAML error in a printed line names the action's line",
			"x:\n  local.test.arg:\n{{- range list 1 2 }}\n    - {{ . }}: a: b\n{{- end }}\n",
			"f.sls:3:26: mapping values are not allowed in this context (in the rendered text, from line 4 of the template)"},
		{"unclosed quote in the rendered text",
			"x:\n  local.test.arg:\n    - 'a\n    - {{ .data.id }}\n    - 'b'\n",
			"f.sls:3:7: unclosed quote: the string this ' starts runs on to line 5 (did not find expected '-' indicator); close it on line 3 (in the rendered text, from line 3 of the template)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFile("f.sls", []byte(c.src))
			if err == nil {
				_, err = f.Render("salt/x", data)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
