package reactions

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

func items(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("web%03d", i)
	}
	return out
}

// argList prints one argument per item of .data.items: one printed value
// per item.
const argList = `r:
  local.test.arg:
    - arg:
{{- range .data.items }}
      - {{ . }}
{{- end }}
`

// aliased repeats one printed value through YAML aliases.
func aliased(n int) string {
	return "r:\n  local.test.arg:\n    - a: &v x{{ .data.s }}\n    - b: [" + strings.TrimSuffix(strings.Repeat("*v, ", n), ", ") + "]\n"
}

func TestRenderLimits(t *testing.T) {
	big := event.NewMap(0)
	for i := range 1000 {
		big.Set(fmt.Sprintf("key%04d", i), strings.Repeat("v", 100))
	}
	cases := []struct {
		name string
		tpl  string
		data map[string]any
		lim  Limits
		// what is the bound crossed ("" when the render must succeed), at
		// line:col (text/template's columns, as in every template error).
		what      string
		line, col int
	}{
		{"bytes: text in a loop", "{{ range .data.items }}# pad\n{{ end }}", map[string]any{"items": items(100)},
			Limits{Bytes: 599}, "Bytes", 1, 23},
		{"bytes: text in a loop, at the bound", "{{ range .data.items }}# pad\n{{ end }}", map[string]any{"items": items(100)},
			Limits{Bytes: 600}, "", 0, 0},
		{"bytes: a printed value", "r:\n  local.test.arg:\n    - v: {{ .data.s }}\n", map[string]any{"s": strings.Repeat("x", 1000)},
			Limits{Bytes: 1000}, "Bytes", 3, 12},
		{"bytes: a printed value, inside", "r:\n  local.test.arg:\n    - v: {{ .data.s }}\n", map[string]any{"s": strings.Repeat("x", 1000)},
			Limits{Bytes: 1100}, "", 0, 0},
		{"bytes: a map printed raw", "r:\n  local.test.arg:\n    - v: '{{ .data.m }}'\n", map[string]any{"m": big},
			Limits{Bytes: 100000}, "Bytes", 3, 13},
		{"bytes: a map printed raw, inside", "r:\n  local.test.arg:\n    - v: '{{ .data.m }}'\n", map[string]any{"m": big},
			Limits{Bytes: 200000}, "", 0, 0},
		{"values", argList, map[string]any{"items": items(10)}, Limits{Values: 9}, "Values", 5, 11},
		{"values, at the bound", argList, map[string]any{"items": items(10)}, Limits{Values: 10}, "", 0, 0},
		{"yaml bytes", "{{ range .data.items }}# pad\n{{ end }}", map[string]any{"items": items(100)},
			Limits{YAMLBytes: 599}, "YAMLBytes", 1, 23},
		{"yaml bytes, at the bound", "{{ range .data.items }}# pad\n{{ end }}", map[string]any{"items": items(100)},
			Limits{YAMLBytes: 600}, "", 0, 0},
		{"steps: a loop that prints nothing", "{{ range .data.items }}{{ end }}", map[string]any{"items": items(100)},
			Limits{Steps: 100}, "Steps", 1, 9},
		{"steps: at the bound", "{{ range .data.items }}{{ end }}", map[string]any{"items": items(100)},
			Limits{Steps: 101}, "", 0, 0},
		// The default step bound, whatever the time bound: a million
		// steps under the race detector on a loaded machine once took
		// longer than the default 10s.
		{"steps: a range over a number from the event", "\n{{ range .data.n }}{{ end }}", map[string]any{"n": int64(1e15)},
			Limits{Time: time.Hour}, "Steps", 2, 9},
		{"steps: a recursive template", "{{ define \"r\" }}{{ template \"r\" . }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}", map[string]any{},
			Limits{Steps: 5000}, "Steps", 1, 16},
		{"time", "{{ range .data.n }}{{ end }}", map[string]any{"n": int64(1e15)},
			Limits{Steps: 1 << 62, Time: time.Millisecond}, "Time", 1, 9},
		{"aliases repeat a value", aliased(8), map[string]any{"s": strings.Repeat("x", 1000)},
			Limits{Bytes: 4000}, "Aliases", 3, 10},
		{"aliases repeat a value, inside", aliased(3), map[string]any{"s": strings.Repeat("x", 1000)},
			Limits{Bytes: 4000}, "", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFileWith("/srv/reactor/l.sls", []byte(c.tpl), c.lim)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Render("t", c.data)
			if c.what == "" {
				if err != nil {
					t.Fatalf("refused inside the bounds: %v", err)
				}
				return
			}
			var le *LimitError
			var pe *PosError
			if !errors.As(err, &le) || !asPosError(err, &pe) {
				t.Fatalf("want a positioned limit error, got %v", err)
			}
			if le.What != c.what || pe.File != "/srv/reactor/l.sls" || pe.Line != c.line || pe.Col != c.col {
				t.Errorf("got %s at %s:%d:%d, want %s at line %d col %d: %v", le.What, pe.File, pe.Line, pe.Col, c.what, c.line, c.col, err)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("/srv/reactor/l.sls:%d:%d: rendering stopped: ", c.line, c.col)) || !strings.Contains(err.Error(), "reactions.Limits.") {
				t.Errorf("message: %v", err)
			}
			// The file renders again once the event fits.
			if strings.Contains(c.name, "recursive") {
				return // it never fits
			}
			if _, err := f.Render("t", map[string]any{"items": items(1), "s": "x", "n": int64(1), "m": event.NewMap(0)}); err != nil {
				t.Errorf("after a refusal: %v", err)
			}
		})
	}
}

// TestRenderLimitsDefaults checks that zero fields take the defaults, and
// that a file's bounds are its own: another file's do not change them.
func TestRenderLimitsDefaults(t *testing.T) {
	f, err := ParseFileWith("/srv/reactor/l.sls", []byte(argList), Limits{Values: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultLimits
	want.Values = 7
	if f.limits != want {
		t.Errorf("limits = %+v, want %+v", f.limits, want)
	}
	g, err := ParseFile("/srv/reactor/m.sls", []byte(argList))
	if err != nil {
		t.Fatal(err)
	}
	if g.limits != DefaultLimits {
		t.Errorf("a file parsed without bounds has %+v, want the defaults", g.limits)
	}
	if _, err := f.Render("t", map[string]any{"items": items(8)}); err == nil {
		t.Error("8 values rendered under a bound of 7")
	}
	if _, err := g.Render("t", map[string]any{"items": items(8)}); err != nil {
		t.Errorf("the other file took the first's bound: %v", err)
	}
}

// TestSizedFunctionsBounded: every template function that builds a value
// whose size comes from a number is refused, with its position, before it
// allocates, when event data asks for more than 1 MiB (a count of
// 8,000,000,000 ended the process with Go's out-of-memory error, and
// JetStream redelivered the event to every start after); the CPU-heavy
// crypto functions are gone.
func TestSizedFunctionsBounded(t *testing.T) {
	huge := map[string]any{"n": int64(8000000000), "neg": int64(-5), "far": int64(-9000000000000000000), "s": "y\ny"}
	for _, c := range []struct {
		name, call string
		want       string // "" renders
	}{
		{"indent", `{{ indent (int .data.n) "y" }}`, "indent: 8000000000"},
		{"nindent", `{{ nindent (int .data.n) .data.s }}`, "nindent: 8000000000"},
		{"indent negative", `{{ indent (int .data.neg) "y" }}`, "indent: -5"},
		{"repeat overflowing count×length", `{{ repeat 4611686018427387904 "yy" }}`, "repeat: 4611686018427387904"},
		{"randAlphaNum", `{{ randAlphaNum (int .data.n) }}`, "randAlphaNum: 8000000000"},
		{"randAscii", `{{ randAscii (int .data.n) }}`, "randAscii: 8000000000"},
		{"randBytes", `{{ randBytes (int .data.n) }}`, "randBytes: 8000000000"},
		{"untilStep overflowing its bounds", `{{ untilStep (int .data.far) 9000000000000000000 1 }}`, "untilStep: more than"},
		{"genPrivateKey", `{{ genPrivateKey "rsa" }}`, `function "genPrivateKey" not defined`},
		{"bcrypt", `{{ bcrypt "x" }}`, `function "bcrypt" not defined`},
		{"derivePassword", `{{ derivePassword 1 "long" "pw" "user" "site" }}`, `function "derivePassword" not defined`},
		{"indent within the bound", `{{ indent 4 .data.s }}`, ""},
		{"randAlpha within the bound", `{{ randAlpha 16 | len }}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFile("/srv/reactor/sized.sls", []byte("x:\n  local.test.arg:\n    - args:\n      - '"+c.call+"'\n"))
			if c.want != "" && err != nil {
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("parse: %v, want %q", err, c.want)
				}
				return // an undefined function is refused when the file loads
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Render("t", huge)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused within the bound: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "/srv/reactor/sized.sls:4:")):
				t.Fatalf("got %v, want a positioned error with %q", err, c.want)
			}
		})
	}
}
