package reactions

import (
	"reflect"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/yaml11"
)

// hostileTemplate places one event value in every position a reaction file
// can print it: in a reaction ID, as a whole plain scalar, inside single and
// double quotes, in the middle of a plain scalar, in a nested mapping, as a
// flow-sequence item and in a literal block.
const hostileTemplate = `react_{{ .data.v }}:
  local.cmd.run:
    - tgt: {{ .data.v }}
    - arg:
      - '{{ .data.v }}'
      - "{{ .data.v }}"
      - prefix-{{ .data.v }}-suffix
      - [{{ .data.v }}, fixed]
    - kwarg:
        note: {{ .data.v }}
        script: |
          echo {{ .data.v }}
{{ .data.v }}:
  runner.test.arg:
    - args:
      - x: 1
`

// hostilePayloads are values a minion could put into event data to try to
// change the structure of a reaction.
var hostilePayloads = []struct {
	name, v string
}{
	{"newline list item", "x\n- tgt: '*'"},
	{"newline new key", "x\n    - tgt: '*'"},
	{"newline new reaction", "x\nevil:\n  local.cmd.run:\n    - tgt: '*'\n    - arg: [rm -rf /]"},
	{"carriage return", "x\r- tgt: '*'"},
	{"crlf", "x\r\n- tgt: '*'"},
	{"unicode line separator", "x\u2028- tgt: '*'"},
	{"unicode paragraph separator", "x\u2029evil: 1"},
	{"next line", "x\u0085- tgt: '*'"},
	{"colon space", "a: b"},
	{"colon end", "a:"},
	{"dash space", "- a"},
	{"comment", "web1 # tgt: '*'"},
	{"hash start", "#x"},
	{"flow mapping", "{tgt: '*'}"},
	{"flow sequence", "[a, '*']"},
	{"close brackets", "a]}, evil: {"},
	{"anchor", "&a x"},
	{"alias", "*a"},
	{"tag", "!!python/object/apply:os.system ['id']"},
	{"literal block", "|\n  evil"},
	{"folded block", ">\n  evil"},
	{"double quote", `a"b`},
	{"double quote break", `x", "evil": "y`},
	{"single quote", "a'b"},
	{"single quote break", "x', evil: 'y"},
	{"backslash escapes", `a\nb\"c\\`},
	{"template braces", "{{ .data }}"},
	{"document start", "---\nevil: 1"},
	{"document end", "...\nevil: 1"},
	{"directive", "%YAML 1.1"},
	{"merge key", "<<: {tgt: '*'}"},
	{"question mark key", "? evil"},
	{"at sign", "@x"},
	{"backtick", "`id`"},
	{"tab", "a\tb"},
	{"leading space", "  web1"},
	{"trailing space", "web1  "},
	{"nul", "a\x00b"},
	{"bom", "\ufeffweb1"},
	{"empty", ""},
	{"dunder id", "__sls__"},
	{"huge", strings.Repeat("A: - [{", 50000)}, // printed 9 times: within Limits.Bytes
	{"deep indentation", strings.Repeat(" ", 50) + "- x"},
}

func renderHostile(t testing.TB, tpl, v string) ([]Reaction, error) {
	t.Helper()
	f, err := ParseFile("/srv/reactor/hostile.sls", []byte(tpl))
	if err != nil {
		t.Fatalf("parsing template: %v", err)
	}
	return f.Render("salt/beacon/web1/x", map[string]any{"v": v, "id": "web1"})
}

// expectScalar is what a whole plain scalar holding v becomes: Salt's YAML
// typing when v is a safe plain scalar, else v itself; the blanks and line
// breaks at its ends are not part of it, as in Salt.
func expectScalar(v string) any {
	v = strings.TrimLeft(strings.TrimRight(v, " \t\n\r\u0085\u2028\u2029"), " \t")
	if yaml11.PlainSafe(v) {
		if t, err := resolve(v); err == nil {
			return t
		}
	}
	return v
}

func TestHostilePayloadsKeepStructure(t *testing.T) {
	for _, p := range hostilePayloads {
		t.Run(p.name, func(t *testing.T) {
			rs, err := renderHostile(t, hostileTemplate, p.v)
			if err != nil {
				// Refusal is allowed only with a positioned, clear error.
				var pe *PosError
				if !asPosError(err, &pe) {
					t.Fatalf("refused without a position: %v", err)
				}
				if p.name != "dunder id" && p.name != "empty" {
					t.Fatalf("unexpected refusal: %v", err)
				}
				return
			}
			if len(rs) != 2 {
				t.Fatalf("got %d reactions, want 2: %+v", len(rs), rs)
			}
			if want := expectScalar("react_" + p.v); rs[0].ID != want {
				t.Errorf("ID = %q, want %q", rs[0].ID, want)
			}
			if want := expectScalar(p.v); !reflect.DeepEqual(rs[1].ID, want) {
				t.Errorf("whole ID = %#v, want %#v", rs[1].ID, want)
			}
			body := rs[0].Body
			if got := body.Keys(); !reflect.DeepEqual(got, []string{"local", "__sls__"}) {
				t.Fatalf("body keys = %q", got)
			}
			list, _ := body.Get("local")
			args := list.([]any)
			if len(args) != 4 {
				t.Fatalf("got %d args, want 4: %#v", len(args), args)
			}
			tgt := args[0].(*event.Map)
			if tgt.Len() != 1 {
				t.Fatalf("tgt item has keys %q", tgt.Keys())
			}
			if got, _ := tgt.Get("tgt"); !reflect.DeepEqual(got, expectScalar(p.v)) {
				t.Errorf("tgt = %#v, want %#v", got, expectScalar(p.v))
			}
			arg := args[1].(*event.Map)
			av, _ := arg.Get("arg")
			items := av.([]any)
			if len(items) != 4 {
				t.Fatalf("arg has %d items: %#v", len(items), items)
			}
			if items[0] != p.v || items[1] != p.v {
				t.Errorf("quoted values = %#v, %#v; want %q verbatim", items[0], items[1], p.v)
			}
			mid := "prefix-" + p.v + "-suffix"
			if want := expectScalar(mid); !reflect.DeepEqual(items[2], want) {
				t.Errorf("mid-scalar = %#v, want %#v", items[2], want)
			}
			flow := items[3].([]any)
			if len(flow) != 2 || !reflect.DeepEqual(flow[0], expectScalar(p.v)) || flow[1] != "fixed" {
				t.Errorf("flow sequence = %#v", flow)
			}
			kw := args[2].(*event.Map)
			kv, _ := kw.Get("kwarg")
			km := kv.(*event.Map)
			if !reflect.DeepEqual(km.Keys(), []string{"note", "script"}) {
				t.Fatalf("kwarg keys = %q", km.Keys())
			}
			if got, _ := km.Get("note"); !reflect.DeepEqual(got, expectScalar(p.v)) {
				t.Errorf("note = %#v", got)
			}
			if got, _ := km.Get("script"); got != "echo "+p.v+"\n" {
				t.Errorf("script = %#v, want %q", got, "echo "+p.v+"\n")
			}
			if args[3] != "cmd.run" {
				t.Errorf("function = %#v", args[3])
			}
		})
	}
}

// TestBenignValuesTypedLikeSalt checks that ordinary values are typed as
// Salt types them after pasting them into YAML.
func TestBenignValuesTypedLikeSalt(t *testing.T) {
	cases := []struct {
		v    string
		want any
	}{
		{"web1", "web1"},
		{"yes", true},
		{"off", false},
		{"010", int64(10)},
		{"1.10", 1.1},
		{"1e3", "1e3"},
		{"2024-01-15", "2024-01-15"},
		{"12:30", int64(750)},
		{"~", nil},
		{"salt/job/1/ret/web1", "salt/job/1/ret/web1"},
		{"None", "None"},
	}
	for _, c := range cases {
		rs, err := renderHostile(t, hostileTemplate, c.v)
		if err != nil {
			t.Fatalf("%q: %v", c.v, err)
		}
		list, _ := rs[0].Body.Get("local")
		tgt, _ := list.([]any)[0].(*event.Map).Get("tgt")
		if !reflect.DeepEqual(tgt, c.want) {
			t.Errorf("%q: tgt = %#v, want %#v", c.v, tgt, c.want)
		}
	}
}

func FuzzHostileValue(f *testing.F) {
	for _, p := range hostilePayloads {
		if len(p.v) < 1000 {
			f.Add(p.v)
		}
	}
	f.Fuzz(func(t *testing.T, v string) {
		rs, err := renderHostile(t, hostileTemplate, v)
		if err != nil {
			var pe *PosError
			if !asPosError(err, &pe) {
				t.Fatalf("refused without a position: %v", err)
			}
			return
		}
		if len(rs) != 2 || rs[0].ID != expectScalar("react_"+v) {
			t.Fatalf("structure changed: %+v", rs)
		}
		list, _ := rs[0].Body.Get("local")
		args := list.([]any)
		if len(args) != 4 || rs[0].Body.Len() != 2 {
			t.Fatalf("structure changed: %#v", args)
		}
		av, _ := args[1].(*event.Map).Get("arg")
		items := av.([]any)
		if len(items) != 4 || items[0] != v || items[1] != v {
			t.Fatalf("quoted value not verbatim: %#v", items)
		}
	})
}

// TestStructuredValuesNeverBecomeStructure covers event values that are
// themselves maps or lists: printed raw they are text (Python's repr, as
// Jinja prints them); through toJson they are one node, and only below an
// argument key.
func TestStructuredValuesNeverBecomeStructure(t *testing.T) {
	evil := map[string]any{"state": "runner", "tgt": "*"}
	cases := []struct {
		name, tpl string
		data      map[string]any
		refused   string // substring of the refusal, "" when it must render
		check     func(t *testing.T, rs []Reaction)
	}{
		{"raw map as argument item", "r:\n  local.cmd.run:\n    - tgt: web1\n    - {{ .data.x }}\n", map[string]any{"x": evil}, "", func(t *testing.T, rs []Reaction) {
			list, _ := rs[0].Body.Get("local")
			if got := list.([]any)[1]; got != "{'state': 'runner', 'tgt': '*'}" {
				t.Fatalf("item = %#v, want the printed text", got)
			}
		}},
		{"toJson map as argument item", "r:\n  local.cmd.run:\n    - tgt: web1\n    - {{ toJson .data.x }}\n", map[string]any{"x": evil}, "is a structure", nil},
		{"whole argument list", "r:\n  local.cmd.run: {{ toJson .data.x }}\n", map[string]any{"x": []any{map[string]any{"tgt": "*"}}}, "argument list is printed from event data", nil},
		{"raw argument list", "r:\n  local.cmd.run: {{ .data.x }}\n", map[string]any{"x": []any{"a"}}, "argument list is printed from event data", nil},
		{"argument key from data", "r:\n  local.cmd.run:\n    - tgt: web1\n    - {{ .data.k }}: {{ .data.v }}\n", map[string]any{"k": "tgt", "v": "*"}, "argument name printed by the template could come from event data", nil},
		{"list as target", "r:\n  local.cmd.run:\n    - tgt: {{ .data.id }}\n", map[string]any{"id": []any{"*"}}, "", func(t *testing.T, rs []Reaction) {
			list, _ := rs[0].Body.Get("local")
			tgt, _ := list.([]any)[0].(*event.Map).Get("tgt")
			if tgt != "['*']" {
				t.Fatalf("tgt = %#v, want the printed text", tgt)
			}
		}},
		{"toJson under an argument key", "r:\n  runner.state.orchestrate:\n    - args:\n      - pillar: {{ toJson .data.x }}\n", map[string]any{"x": evil}, "", func(t *testing.T, rs []Reaction) {
			list, _ := rs[0].Body.Get("runner")
			args, _ := list.([]any)[0].(*event.Map).Get("args")
			pillar, _ := args.([]any)[0].(*event.Map).Get("pillar")
			if m, ok := pillar.(*event.Map); !ok || m.Len() != 2 {
				t.Fatalf("pillar = %#v, want the mapping", pillar)
			}
		}},
		{"nan is a float, as in Salt", "r:\n  local.cmd.run:\n    - tgt: {{ .data.x }}\n", map[string]any{"x": ".nan"}, "", func(t *testing.T, rs []Reaction) {
			list, _ := rs[0].Body.Get("local")
			if tgt, _ := list.([]any)[0].(*event.Map).Get("tgt"); !isNaN(tgt) {
				t.Fatalf("tgt = %#v", tgt)
			}
		}},
		{"big float as Salt prints it", "r:\n  local.cmd.run:\n    - tgt: web1\n    - kwarg:\n        n: {{ .data.x }}\n", map[string]any{"x": 1e16}, "", func(t *testing.T, rs []Reaction) {
			list, _ := rs[0].Body.Get("local")
			kw, _ := list.([]any)[1].(*event.Map).Get("kwarg")
			if n, _ := kw.(*event.Map).Get("n"); n != "1e+16" {
				t.Fatalf("n = %#v, want the string 1e+16 (Salt's typing of Python's repr)", n)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFile("/srv/reactor/s.sls", []byte(c.tpl))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := f.Render("t", c.data)
			if c.refused != "" {
				var pe *PosError
				if err == nil || !asPosError(err, &pe) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("err = %v, want a positioned refusal containing %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, rs)
		})
	}
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && f != f
}
