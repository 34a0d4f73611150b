package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// jinjaFiles is a configuration with one rule per kind of reaction file:
// Salt's default renderer with and without a shebang, a Go template, plain
// YAML, a Jinja file that cannot be converted and a Go template without a
// shebang.
var jinjaFiles = map[string]string{
	"reactor.conf": `reactor:
  - 'plain/*':
    - {{DIR}}/plain.sls
  - 'bang/*':
    - {{DIR}}/bang.sls
  - 'spaced/*':
    - {{DIR}}/spaced.sls
  - 'gotmpl/*':
    - {{DIR}}/gotmpl.sls
  - 'yaml/*':
    - {{DIR}}/static.sls
  - 'pillar/*':
    - {{DIR}}/pillar.sls
  - 'gonobang/*':
    - {{DIR}}/gonobang.sls
  - 'missing/*':
    - {{DIR}}/missing.sls
`,
	"plain.sls": `{% if data['act'] == 'pend' and data['id'].startswith('web') %}
accept_{{ data['id'] }}:
  wheel.key.accept:
    - match: {{ data['id'] }}
{% endif %}
`,
	"bang.sls":     "#!jinja|yaml\n{% set fun = data.get('fun', 'test.ping') %}\nrun:\n  local.{{ fun }}:\n    - tgt: {{ data.id }}\n    - arg:\n      - {{ data.arg }}\n",
	"spaced.sls":   "#!jinja | yaml\nrun:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.x\n      - pillar: {{ data|json }}\n",
	"gotmpl.sls":   "#!gotmpl|yaml\nrun:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n",
	"static.sls":   "#!yaml\nrun:\n  local.test.ping:\n    - tgt: '{{ data.id }}'\n",
	"pillar.sls":   "run:\n  local.test.ping:\n    - tgt: {{ salt['pillar.get']('target') }}\n",
	"gonobang.sls": "run:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n",
	"missing.sls":  "# comment\nrun:\n  local.test.ping:\n    - tgt: {{ data['nope'] }}\n",
}

func writeJinjaConf(t *testing.T, jinja bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for name, src := range jinjaFiles {
		files[name] = strings.ReplaceAll(src, "{{DIR}}", dir)
	}
	if jinja {
		files["reactor.conf"] += "reactord:\n  jinja: true\n"
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "reactor.conf")
}

func TestJinjaLoading(t *testing.T) {
	conf := writeJinjaConf(t, true)
	rep := Check(conf, false)
	if rep.Config == nil || !rep.Config.Settings.Jinja {
		t.Fatalf("jinja: true not read: %v", rep.Problems)
	}
	var converted []string
	for _, p := range rep.Converted {
		converted = append(converted, filepath.Base(p))
	}
	if got := strings.Join(converted, " "); got != "plain.sls bang.sls spaced.sls missing.sls" {
		t.Errorf("converted = %s", got)
	}
	probs := joinErrs(rep.Problems)
	for _, want := range []string{
		"pillar.sls:3:15: cannot convert from Jinja: salt['pillar.get']",
		"gonobang.sls:3:15: cannot convert from Jinja:",
		"this file looks like a Go template: start it with #!gotmpl|yaml",
	} {
		if !strings.Contains(probs, want) {
			t.Errorf("check problems lack %q:\n%s", want, probs)
		}
	}
	if len(rep.Problems) != 2 {
		t.Errorf("want 2 problems (pillar.sls, gonobang.sls), got:\n%s", probs)
	}

	eng := MustNew(rep.Config, nil)
	for _, tc := range []struct {
		tag, data string
		want      string // the chunks' state.fun tgt/match, or "error: ..."
	}{
		{"plain/x", `{"act": "pend", "id": "web1"}`, `wheel key.accept match="web1"`},
		{"plain/x", `{"act": "pend", "id": "db1"}`, ""},
		{"bang/x", `{"id": "m1", "fun": "state.apply", "arg": "nginx"}`, `local state.apply tgt="m1" arg=["nginx"]`},
		{"bang/x", `{"id": "m1", "arg": 1.5}`, `local test.ping tgt="m1" arg=[1.5]`},
		{"spaced/x", `{"a": 1.0, "b": [1, "x"]}`, `runner state.orchestrate args=[{"mods":"orch.x"},{"pillar":{"a":1.0,"b":[1,"x"]}}]`},
		{"gotmpl/x", `{"id": "m2"}`, `local test.ping tgt="m2"`},
		{"yaml/x", `{"id": "m2"}`, `local test.ping tgt="{{ data.id }}"`},
		{"pillar/x", `{}`, "cannot convert from Jinja"},
		// The missing key is on line 4 of the Jinja file, and the error says so.
		{"missing/x", `{"id": "m1"}`, "missing.sls:4:19: data['nope'] is undefined: 'dict object' has no attribute 'nope' (Salt's StrictUndefined fails the file too); for a key an event may lack, use data.get('nope', default) or test 'nope' in data"},
	} {
		data, err := event.DecodeData([]byte(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		res, err := eng.Process(context.Background(), event.Event{Tag: tc.tag, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		got := summarize(res.Chunks)
		if errs := res.Errors(); len(errs) > 0 {
			got = "error: " + joinErrs(errs)
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: got %q, want %q", tc.tag, tc.data, got, tc.want)
		}
	}
}

func TestJinjaWithoutFlagSaysSo(t *testing.T) {
	conf := writeJinjaConf(t, false)
	rep := Check(conf, false)
	if len(rep.Converted) != 0 {
		t.Errorf("converted without jinja: %v", rep.Converted)
	}
	probs := joinErrs(rep.Problems)
	for _, f := range []string{"plain.sls:1:1", "bang.sls:2:1", "spaced.sls:6:17", "pillar.sls:3:12", "missing.sls:4:12"} {
		line := ""
		for _, l := range strings.Split(probs, "\n") {
			if strings.Contains(l, f+": this looks like a Salt Jinja reaction file") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("no Jinja line for %s in:\n%s", f, probs)
			continue
		}
		if !strings.Contains(line, "--jinja") || !strings.Contains(line, "reactord convert -w") {
			t.Errorf("line does not name --jinja and convert: %s", line)
		}
	}
	if len(rep.Problems) != 5 {
		t.Errorf("want one problem per Jinja file (5), got:\n%s", probs)
	}
	// Go templates, with or without a shebang, and plain YAML still load.
	eng := MustNew(rep.Config, nil)
	for _, tag := range []string{"gotmpl/x", "gonobang/x", "yaml/x"} {
		res, err := eng.Process(context.Background(), event.Event{Tag: tag, Data: map[string]any{"id": "m3"}})
		if err != nil || len(res.Errors()) > 0 || len(res.Chunks) != 1 {
			t.Errorf("%s: %v %v %d chunks", tag, err, res.Errors(), len(res.Chunks))
		}
	}
}

// TestJinjaMarks checks which sources refuseJinja takes for Jinja.
func TestJinjaMarks(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string // position and description, "" for not Jinja
	}{
		{"a: {{ .data.id }}\n", ""},
		{"a: {{- .data.id }}\n{{ if .data.x }}b: 1{{ end }}\n", ""},
		{"a: printf '{%s}'\n", ""},
		{"a: 1\n{%- if x %}\n{% endif %}\n", "2:1 a {% if %} tag"},
		{"{# note #}\na: 1\n", "1:1 a {# comment #}"},
		{"a: {{ data['id'] }}\n", "1:4 {{ data... }} reads the event the Jinja way (a Go template writes .data, .tag)"},
		{"a: {{tag}}\n", "1:4 {{ tag... }} reads the event the Jinja way (a Go template writes .data, .tag)"},
		{"a: {{ grains['id'] }}\n", "1:4 {{ grains... }} reads the event the Jinja way (a Go template writes .data, .tag)"},
	} {
		line, col, what, ok := jinjaMark([]byte(tc.src))
		got := ""
		if ok {
			got = fmt.Sprintf("%d:%d %s", line, col, what)
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
	// An explicit Go template shebang is never taken for Jinja.
	if _, _, err := refuseJinja("x.sls", []byte("#!gotmpl|yaml\na: '{% raw %}'\n")); err != nil {
		t.Errorf("#!gotmpl|yaml refused: %v", err)
	}
}

func joinErrs(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// summarize prints chunks as "state fun key=value" lines, targets and
// arguments only.
func summarize(chunks []*event.Chunk) string {
	var lines []string
	for _, c := range chunks {
		l := c.Str("state") + " " + c.Str("fun")
		for _, k := range []string{"tgt", "match", "arg", "args"} {
			if v, ok := c.Get(k); ok {
				raw, _ := event.AppendJSON(nil, v)
				l += " " + k + "=" + string(raw)
			}
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}
