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

func writeJinjaConf(t *testing.T, section string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for name, src := range jinjaFiles {
		files[name] = strings.ReplaceAll(src, "{{DIR}}", dir)
	}
	if section != "" {
		files["reactor.conf"] += "reactord:\n  " + section + "\n"
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "reactor.conf")
}

// renderers lists each loaded file's base name and renderer, with its
// Salt calls.
func renderers(rep CheckReport) string {
	var out []string
	for _, f := range rep.Loaded {
		s := filepath.Base(f.Path) + "=" + f.Renderer
		if f.SaltCalls > 0 {
			s += fmt.Sprintf(" +%d salt", f.SaltCalls)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// TestRendererChosenAsSaltDoes loads the same files by default (auto),
// with jinja: true and with renderer: gotmpl, and checks which renderer
// each got, what is broken, and what events render.
func TestRendererChosenAsSaltDoes(t *testing.T) {
	for _, tc := range []struct {
		name, section, check string
		renderers            string
		broken               []string // positions and wording of the files that do not load
		events               map[string]string
	}{{
		name: "auto",
		renderers: "plain.sls=jinja (Salt's default); bang.sls=jinja (#!jinja|yaml); spaced.sls=jinja (#!jinja|yaml); " +
			"gotmpl.sls=gotmpl (#!gotmpl|yaml); static.sls=yaml (#!yaml); pillar.sls=jinja (Salt's default) +1 salt; " +
			"gonobang.sls=gotmpl (detected); missing.sls=jinja (Salt's default)",
		events: map[string]string{
			"gonobang/x": `local test.ping tgt="m2"`,
			"pillar/x":   "pillar.sls:3:15: salt['pillar.get'](...): calls Salt while rendering, and no driver that reaches the master is configured",
		},
	}, {
		name: "jinja: true", section: "jinja: true",
		renderers: "plain.sls=jinja (renderer: jinja); bang.sls=jinja (renderer: jinja); spaced.sls=jinja (renderer: jinja); " +
			"gotmpl.sls=gotmpl (#!gotmpl|yaml); static.sls=yaml (#!yaml); pillar.sls=jinja (renderer: jinja) +1 salt; missing.sls=jinja (renderer: jinja)",
		broken: []string{"gonobang.sls:3:15: cannot load as Jinja (jinja (renderer: jinja)): ", "this file looks like a Go template: start it with #!gotmpl|yaml"},
		events: map[string]string{"gonobang/x": "gonobang.sls:3:15: cannot load as Jinja"},
	}, {
		name: "renderer: jinja, check --renderer auto", section: "renderer: jinja", check: "auto",
		renderers: "plain.sls=jinja (Salt's default); bang.sls=jinja (#!jinja|yaml); spaced.sls=jinja (#!jinja|yaml); " +
			"gotmpl.sls=gotmpl (#!gotmpl|yaml); static.sls=yaml (#!yaml); pillar.sls=jinja (Salt's default) +1 salt; " +
			"gonobang.sls=gotmpl (detected); missing.sls=jinja (Salt's default)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(writeJinjaConf(t, tc.section), tc.check)
			if rep.Config == nil {
				t.Fatalf("configuration refused: %v", rep.Problems)
			}
			if got := renderers(rep); got != tc.renderers {
				t.Errorf("renderers:\n got %s\nwant %s", got, tc.renderers)
			}
			broken := joinErrs(rep.Broken)
			for _, want := range tc.broken {
				if !strings.Contains(broken, want) {
					t.Errorf("broken lacks %q:\n%s", want, broken)
				}
			}
			if len(tc.broken) == 0 && broken != "" {
				t.Errorf("broken files: %s", broken)
			}
			if len(rep.Problems) != len(rep.Broken) {
				t.Errorf("problems beyond the broken files: %s", joinErrs(rep.Problems))
			}
			eng := MustNew(rep.Config, Options{})
			events := map[string]string{
				"plain/x":   `wheel key.accept match="web1"`,
				"bang/x":    `local state.apply tgt="m1" arg=["nginx"]`,
				"spaced/x":  `runner state.orchestrate args=[{"mods":"orch.x"},{"pillar":{"a":1.0,"b":[1,"x"]}}]`,
				"gotmpl/x":  `local test.ping tgt="m2"`,
				"yaml/x":    `local test.ping tgt="{{ data.id }}"`,
				"missing/x": "missing.sls:4:19: data['nope'] is undefined: 'dict object' has no attribute 'nope' (Salt's StrictUndefined fails the file too); for a key an event may lack, use data.get('nope', default) or test 'nope' in data",
			}
			data := map[string]string{"plain/x": `{"act": "pend", "id": "web1"}`, "bang/x": `{"id": "m1", "fun": "state.apply", "arg": "nginx"}`,
				"spaced/x": `{"a": 1.0, "b": [1, "x"]}`}
			for tag, want := range tc.events {
				events[tag] = want
			}
			for tag, want := range events {
				d := data[tag]
				if d == "" {
					d = `{"id": "m2"}`
				}
				dec, err := event.DecodeData([]byte(d))
				if err != nil {
					t.Fatal(err)
				}
				res, err := eng.Process(context.Background(), event.Event{Tag: tag, Data: dec})
				if err != nil {
					t.Fatal(err)
				}
				got := summarize(res.Chunks)
				if errs := res.Errors(); len(errs) > 0 {
					got = "error: " + joinErrs(errs)
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s: got %q, want %q", tag, got, want)
				}
			}
		})
	}
}

// TestRendererGotmplSaysSo: with renderer: gotmpl, a Jinja file is refused
// with one line that names the setting, and Go templates load.
func TestRendererGotmplSaysSo(t *testing.T) {
	rep := Check(writeJinjaConf(t, "renderer: gotmpl"), "")
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
		if !strings.Contains(line, "renderer: gotmpl") || !strings.Contains(line, "reactord convert -w") {
			t.Errorf("line does not name the setting and convert: %s", line)
		}
	}
	if len(rep.Problems) != 5 || len(rep.Broken) != 5 {
		t.Errorf("want one problem per Jinja file (5), all broken, got %d broken:\n%s", len(rep.Broken), probs)
	}
	eng := MustNew(rep.Config, Options{})
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
	if _, err := load("gotmpl", "x.sls", []byte("#!gotmpl|yaml\na: '{% raw %}'\n")); err != nil {
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

// TestJinjaInJinjaTerms renders Salt Jinja files (loaded by default) whose
// rendering fails, and checks each error names the line of the Jinja file
// and speaks Jinja, not the Go template it became; and that constructs
// once refused now load.
func TestJinjaInJinjaTerms(t *testing.T) {
	for _, tc := range []struct {
		name, src, data string
		want            string // an error's text, or the rendered chunks (parts split by NUL)
	}{
		{"after a multi-line comment", "{#\n  a\n  b\n#}\nr:\n  local.test.ping:\n    - tgt: {{ data.x.y }}\n", `{"x": 5}`,
			"f.sls:7:19: data['x'] has no attribute 'y': it is not a dict"},
		{"after a multi-line tag", "{% if data.x\n   and data.x > 1 %}\nr:\n  local.test.ping:\n    - tgt: {{ data.l[0] }}\n{% endif %}\n", `{"x": 5, "l": 3}`,
			"f.sls:5:15: 'int object' has no element 0"},
		{"after whitespace control", "{%- set v = data.get('vals') -%}\n\n\n{%- if v %}\nr:\n  local.test.ping:\n    - tgt: {{ v[3] }}\n{% endif %}\n", `{"vals": [1]}`,
			"f.sls:7:15: 'list object' has no element 3"},
		{"a set variable's attribute", "{% set m = data.m %}\nr:\n  local.test.ping:\n    - tgt: {{ m.k }}\n", `{"m": "s"}`,
			"f.sls:4:\x00'str object' has no attribute 'k'"},
		{"salt.log in a do", "{% do salt.log.error('seen') %}\nr:\n  local.test.ping:\n    - tgt: x\n", `{}`,
			`local test.ping tgt="x"`}, // the line goes to reactord's log (reactions/TestSaltCalls)
		{"Salt's compare_lists and Jinja's random filters", "{% set a = ['x','y']|compare_lists(['y','z']) %}\nr:\n  local.test.arg:\n    - tgt: {{ ['w1']|random }}\n    - arg:\n      - {{ a['new'] }}\n      - {{ a['old'] }}\n      - {{ ['q']|compare_lists(['q'])|length }}\n", `{}`,
			`local test.arg tgt="w1" arg=[["z"],["x"],0]`},
		{"pprint in a branch not taken", "{% if data.never is defined %}\nx: {{ data|pprint }}\n{% endif %}\nr:\n  local.test.ping:\n    - tgt: {{ data.id }}\n", `{"id": "w1"}`,
			`local test.ping tgt="w1"`},
		{"pprint", "r:\n  local.test.arg:\n    - tgt: w\n    - arg:\n      - {{ data.d|pprint }}\n", `{"d": {"b": 1, "a": null}}`,
			`local test.arg tgt="w" arg=[{"a":"None","b":1}]`},
		{"is defined on an index", "r:\n  local.test.arg:\n    - tgt: w\n    - arg:\n      - {{ data.l[1] is defined }}\n      - {{ data.l[5] is defined }}\n      - {{ data.l[9]|default('d') }}\n", `{"l": [1, 2]}`,
			`local test.arg tgt="w" arg=[true,false,"d"]`},
		{"a block scalar before a final -#}", "r:\n  local.test.arg:\n    - tgt: w\n    - arg:\n      - |\n        x\n{#- c -#}\n", `{}`,
			`local test.arg tgt="w" arg=["x\n"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "reactor.conf")
			if err := os.WriteFile(conf, []byte("reactor:\n  - 'x/*':\n    - "+dir+"/f.sls\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "f.sls"), []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			rep := Check(conf, "")
			if len(rep.Problems) > 0 {
				t.Fatalf("check: %s", joinErrs(rep.Problems))
			}
			data, err := event.DecodeData([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			res, err := MustNew(rep.Config, Options{}).Process(context.Background(), event.Event{Tag: "x/y", Data: data})
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(res.Chunks)
			if errs := res.Errors(); len(errs) > 0 {
				got = joinErrs(errs)
			}
			for _, part := range strings.Split(tc.want, "\x00") {
				if !strings.Contains(got, part) {
					t.Errorf("got  %q\nwant %q", got, part)
				}
			}
			for _, goSpeak := range []string{"executing", "error calling", "<", "$_", "interface {}"} {
				if strings.Contains(got, goSpeak) {
					t.Errorf("error speaks Go (%q): %s", goSpeak, got)
				}
			}
		})
	}
}

// TestCheckRendersSampleEvents: check renders each file with the sample
// events of reactord's catalogue its rule matches, and reports what the
// file's shape makes fail (a reaction Salt refuses), not what depends on
// the event's data. A file whose rendered YAML is broken whatever the
// event (mis-indented text, values printed in place) does not load: it is
// broken, reported once, not again as a sample's problem.
func TestCheckRendersSampleEvents(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"reactor.conf": "reactor:\n  - 'salt/minion/*/start':\n    - " + dir + "/indent.sls\n    - " + dir + "/data.sls\n  - 'salt/auth':\n    - " + dir + "/verify.sls\n",
		"indent.sls":   "r:\n  local.test.ping:\n    - tgt: {{ data.id }}\n   - arg: [1]\n",
		"data.sls":     "{% if data.nokey == 1 %}\nr:\n  local.test.ping:\n    - tgt: x\n{% endif %}\n",
		"verify.sls":   "{{ data.id }}: 5\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := Check(filepath.Join(dir, "reactor.conf"), "")
	probs := joinErrs(rep.Problems)
	for _, want := range []string{
		"indent.sls:4:4: ", "verify.sls", "(rendered with the sample salt/auth event of reactord's catalogue)",
	} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems lack %q:\n%s", want, probs)
		}
	}
	if strings.Contains(probs, "data.sls") || len(rep.Problems) != 2 {
		t.Errorf("want 2 problems (indent.sls, verify.sls), not the one that depends on data:\n%s", probs)
	}
	if len(rep.Broken) != 1 || !strings.Contains(rep.Broken[0].Error(), "indent.sls:4:4: ") {
		t.Errorf("broken: %v, want indent.sls alone (verify.sls's problem is a sample's)", rep.Broken)
	}
}

// TestGoTemplatesDetected: files without a shebang written as Go templates
// in reactord's own idioms are read as Go templates, not refused as broken
// Jinja.
func TestGoTemplatesDetected(t *testing.T) {
	for _, src := range []string{
		"r:\n  local.test.ping:\n    - tgt: {{ dig \"id\" \"\" .data }}\n",
		"r:\n  local.test.ping:\n    - tgt: {{ index .data \"id\" }}\n",
		"{{- /* a Go comment */ -}}\nr:\n  local.test.ping:\n    - tgt: web1\n",
		"r:\n  local.test.ping:\n    - tgt: {{ printf \"%s\" .data.id }}\n",
	} {
		ld, err := load("", "f.sls", []byte(src))
		if err != nil || ld.Renderer != "gotmpl (detected)" {
			t.Errorf("%q: %q, %v", src, ld.Renderer, err)
		}
	}
	for _, src := range []string{"a: {{ data.id }}\n", "a: {{ data|json }}\n", "a: 1\n"} {
		if ld, err := load("", "f.sls", []byte(src)); err != nil || ld.Renderer != "jinja (Salt's default)" {
			t.Errorf("%q: %q, %v", src, ld.Renderer, err)
		}
	}
}

// TestCheckReadsRetryOn: the retry option's `on:` key (a boolean in YAML
// 1.1) passes the schema as written; a misspelled option next to it is
// still found, at its line.
func TestCheckReadsRetryOn(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	sls := filepath.Join(dir, "d.sls")
	if err := os.WriteFile(sls, []byte("#!yaml\nd:\n  local.test.ping:\n    - tgt: web1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "reactor:\n  - 'myco/deploy':\n      sls: " + sls + "\n      retry: {attempts: 2, backoff: 3s, on: [failed, no_return]}\n" +
		"  - 'myco/other':\n      sls: " + sls + "\n      retry:\n        attempts: 1\n        yes: 1\n"
	if err := os.WriteFile(conf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	probs := joinErrs(Check(conf, "").Problems)
	if strings.Contains(probs, ":4:") || !strings.Contains(probs, "reactor.conf:9:") {
		t.Errorf("want one problem, the unknown retry option yes at line 9, not `on:` at line 4:\n%s", probs)
	}
}
