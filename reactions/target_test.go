package reactions

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckLiteralTarget renders reaction files with event data and checks
// which targets printed from data literal_target refuses.
func TestCheckLiteralTarget(t *testing.T) {

	for _, tc := range []struct {
		name string
		src  string
		data map[string]any
		// want is "" when the reaction is allowed, else a part of the
		// refusal's reason.
		want string
	}{
		{"id", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web1"}, ""},
		{"fqdn", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web-01.example.com"}, ""},
		{"forged star", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "*"}, "glob syntax"},
		{"forged star quoted", "r:\n  local.test.ping:\n    - tgt: '{{ .data.id }}'\n", map[string]any{"id": "*"}, "glob syntax"},
		{"forged compound", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web1 or G@os:Debian"}, "whitespace"},
		{"forged range", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web[1-9]"}, "glob syntax"},
		{"forged list", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "L@a,b"}, "compound syntax"},
		{"comma in string", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n    - tgt_type: list\n", map[string]any{"id": "a,b"}, "list target"},
		{"question mark", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web?"}, "glob syntax"},
		{"range cluster", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "%prod"}, "range syntax"},
		{"operator word", "r:\n  local.test.ping:\n    - tgt: 'G@os:Debian {{ .data.op }} web1'\n    - tgt_type: compound\n", map[string]any{"op": "or"}, "compound operator"},
		{"newline", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "web1\nweb2"}, "whitespace"},
		{"partial", "r:\n  local.test.ping:\n    - tgt: web{{ .data.n }}\n", map[string]any{"n": "*"}, "glob syntax"},
		{"quote func", "r:\n  local.test.ping:\n    - tgt: {{ quote .data.id }}\n", map[string]any{"id": "web*"}, "glob syntax"},
		{"pcre dot", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n    - tgt_type: pcre\n", map[string]any{"id": "web1.example.com"}, "regular expression"},
		{"glob dot", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n    - tgt_type: glob\n", map[string]any{"id": "web1.example.com"}, ""},
		{"ipcidr prefix", "r:\n  local.test.ping:\n    - tgt: {{ .data.ip }}\n    - tgt_type: ipcidr\n", map[string]any{"ip": "0.0.0.0/0"}, "network prefix"},
		{"ipcidr address", "r:\n  local.test.ping:\n    - tgt: {{ .data.ip }}\n    - tgt_type: ipcidr\n", map[string]any{"ip": "10.0.0.7"}, ""},
		{"toJson list", "r:\n  local.test.ping:\n    - tgt: {{ toJson .data.ids }}\n    - tgt_type: list\n", map[string]any{"ids": []any{"web1", "web2"}}, ""},
		{"toJson list forged", "r:\n  local.test.ping:\n    - tgt: {{ toJson .data.ids }}\n    - tgt_type: list\n", map[string]any{"ids": []any{"web1", "*"}}, "glob syntax"},
		{"yaml list items", "r:\n  local.test.ping:\n    - tgt:\n      - {{ .data.a }}\n      - {{ .data.b }}\n    - tgt_type: list\n", map[string]any{"a": "web1", "b": "web[2-3]"}, "glob syntax"},
		{"static star", "r:\n  local.test.ping:\n    - tgt: '*'\n", nil, ""},
		{"static compound around data", "r:\n  local.test.ping:\n    - tgt: 'G@os:{{ .data.os }} and web*'\n    - tgt_type: compound\n", map[string]any{"os": "Debian"}, ""},
		{"static target, data elsewhere", "r:\n  local.cmd.run:\n    - tgt: 'web*'\n    - arg:\n      - echo {{ .data.msg }}\n", map[string]any{"msg": "* or @"}, ""},
		{"later static tgt wins", "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n    - tgt: web1\n", map[string]any{"id": "*"}, ""},
		{"later printed tgt wins", "r:\n  local.test.ping:\n    - tgt: web1\n    - tgt: {{ .data.id }}\n", map[string]any{"id": "*"}, "glob syntax"},
		{"runner", "r:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.x\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {

			f, err := ParseFile("/srv/reactor/x.sls", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			data := tc.data
			if data == nil {
				data = map[string]any{}
			}
			rs, err := f.Render("x/1", data)
			if err != nil || len(rs) != 1 {
				t.Fatalf("render: %d reactions, %v", len(rs), err)
			}
			err = rs[0].CheckLiteralTarget()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *TargetError
			if !errors.As(err, &te) {
				t.Fatalf("allowed, want a refusal (%s)", tc.want)
			}
			msg := err.Error()
			for _, part := range []string{tc.want, "/srv/reactor/x.sls:", `reaction "r" refused (literal_target)`, "tgt_type: list", "when:"} {
				if !strings.Contains(msg, part) {
					t.Errorf("message lacks %q: %s", part, msg)
				}
			}
			if te.ID != "r" || te.File != "/srv/reactor/x.sls" || te.Line < 3 || te.Value == "" {
				t.Errorf("error fields: %+v", te)
			}
		})
	}
}
