package reactions

import (
	"strings"
	"testing"
)

// TestPyFuncsInTemplates renders through the whole pipeline: printed
// helper results are values, never structure, and encoders insert one node.
func TestPyFuncsInTemplates(t *testing.T) {
	src := `{{- if pyIn "web" .data.id }}
{{ .data.id }}:
  local.state.apply:
    - tgt: {{ pyStr .data.id }}
    - arg:
      - {{ .data.fun_args }}
      - {{ pyStr .data.fun_args }}
      - {{ yamlDquote .data.msg }}
      - {{ yamlSquote .data.msg }}
      - x {{ yamlDquote "a" }}
      - {{ pyStr .data.flag }}
      - {{ pyConcat .data.id .data.n }}
      - {{ yamlEncode .data.n }}
      - {{ yamlEncode .data.f }}
      - {{ pyAdd .data.n 1 }}
      - {{ pyEq .data.n 3.0 }}
    - kwarg:
        pillar: {{ jsonEncode .data.fun_args }}
        other: {{ tojsonEncode .data.fun_args }}
        f: {{ jsonEncode .data.f }}
{{- end }}
`
	f, err := ParseFile("py.sls", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"id":       "web1",
		"fun_args": []any{map[string]any{"mods": "orch.deploy"}},
		"msg":      "x: y\n- tgt: '*'",
		"flag":     true,
		"n":        int64(3),
		"f":        1.0,
	}
	rs, err := f.Render("t", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d reactions", len(rs))
	}
	got, _ := rs[0].Body.MarshalJSON()
	want := `{"local":[{"tgt":"web1"},{"arg":["[{'mods': 'orch.deploy'}]","[{'mods': 'orch.deploy'}]","x: y\n- tgt: '*'","x: y\n- tgt: '*'","x \"a\"",true,"web13",3,1.0,4,true]},{"kwarg":{"pillar":[{"mods":"orch.deploy"}],"other":[{"mods":"orch.deploy"}],"f":1.0}},"state.apply"],"__sls__":"py.sls"}`
	if string(got) != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	// An error names the position and Python's message.
	f, err = ParseFile("bad.sls", []byte("a: {{ pyLt .data.id 1 }}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Render("t", data)
	if err == nil || !strings.Contains(err.Error(), "bad.sls:1:") || !strings.Contains(err.Error(), "'<' not supported between instances of 'str' and 'int'") {
		t.Errorf("error: %v", err)
	}
}
