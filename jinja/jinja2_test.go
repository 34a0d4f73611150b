package jinja

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/reactord/reactord/reactions"
)

// jinja2Case is one case of testdata/jinja2/*.json: a Jinja source, the
// event data it renders with, and what Jinja2 made of it, configured as
// Salt configures it (sandboxed, StrictUndefined, the do and
// loopcontrols extensions, the final newline added back as Salt's
// render_jinja_tmpl adds it): the text, or the exception it raised.
type jinja2Case struct {
	Name        string         `json:"name"`
	Src         string         `json:"src"`
	Data        map[string]any `json:"data"`
	Jinja2      *string        `json:"jinja2"`
	Jinja2Error string         `json:"jinja2_error"`
}

// TestJinja2Text renders the cases recorded from Jinja2 (3.1.2, which
// Salt 3007.1 and 3006.8 run here, and 3.1.6 record the same) in
// testdata/jinja2/raw_kwargs.json ({% raw %} blocks and their whitespace
// control, literal braces next to printed values, repeated keyword
// arguments) through reactord, with the options of a file loaded at start
// and with reactord convert's, and requires Jinja2's text, or a refusal
// at load where Jinja2 refuses the template. The outputs were recorded by
// rendering each src with
//
//	jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined,
//	    extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
//	    .from_string(src).render(tag="salt/test", data=data)
//
// plus "\n" when src ends with one; no Python runs here.
func TestJinja2Text(t *testing.T) {
	raw, err := os.ReadFile("testdata/jinja2/raw_kwargs.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []jinja2Case
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	// reactord's refusal for each case Jinja2 refuses: the position and
	// the reason.
	wantErr := map[string]string{
		"raw unclosed":                             "x.sls:1:2: {% raw %}: raw block not closed with {% endraw %}",
		"raw with an argument":                     "x.sls:1:4: {% raw %}: unknown statement",
		"raw closed with plus":                     "x.sls:1:4: {% raw %}: unknown statement",
		"endraw alone":                             "x.sls:1:5: {% endraw %}: unknown statement",
		"repeated keyword argument":                "x.sls:1:29: default=...: keyword argument repeated",
		"repeated keyword argument in a filter":    "x.sls:1:38: boolean=...: keyword argument repeated",
		"repeated keyword argument in a test":      "x.sls:1:26: a=...: keyword argument repeated",
		"repeated keyword argument in a statement": "x.sls:1:35: d=...: keyword argument repeated",
		"repeated keyword argument in a Salt call": "x.sls:1:49: queue=...: keyword argument repeated",
		"repeated keyword argument across lines":   "x.sls:4:3: b=...: keyword argument repeated",
		"repeated keyword argument in namespace":   "x.sls:1:28: a=...: keyword argument repeated",
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if seen[tc.Name] {
				t.Fatalf("two cases named %q", tc.Name)
			}
			seen[tc.Name] = true
			for _, o := range []Options{{DeferSalt: true, KeepLines: true}, {MarkWhole: true}} {
				out, _, err := ConvertWith("x.sls", []byte(tc.Src), o)
				if tc.Jinja2 == nil {
					want, ok := wantErr[tc.Name]
					switch {
					case !ok:
						t.Fatalf("Jinja2 refuses it (%s): list reactord's error in wantErr", tc.Jinja2Error)
					case err == nil:
						t.Fatalf("%+v: converted, but Jinja2 refuses it (%s):\n%s", o, tc.Jinja2Error, out)
					case !strings.Contains(err.Error(), want):
						t.Fatalf("%+v: error %q, want %q (Jinja2: %s)", o, err, want, tc.Jinja2Error)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%+v: %v (Jinja2 renders %q)", o, err, *tc.Jinja2)
				}
				// The shebang line Convert adds is dropped, as the engine
				// drops it for a file without one.
				out, ok := bytes.CutPrefix(out, []byte(Shebang+"\n"))
				if !ok {
					t.Fatalf("%+v: no shebang line:\n%s", o, out)
				}
				if o.KeepLines {
					// The template keeps the source's lines.
					if got, want := bytes.Count(out, []byte("\n")), strings.Count(tc.Src, "\n"); got != want {
						t.Errorf("%+v: %d lines, the source has %d:\n%s", o, got, want, out)
					}
				}
				f, err := reactions.ParseFile("x.sls", out)
				if err != nil {
					t.Fatalf("%+v: %v\n%s", o, err, out)
				}
				got, err := f.RenderText("salt/test", tc.Data)
				if err != nil {
					t.Fatalf("%+v: render: %v\n%s", o, err, out)
				}
				if string(got) != *tc.Jinja2 {
					t.Errorf("%+v: got %q, Jinja2 renders %q\ntemplate:\n%s", o, got, *tc.Jinja2, out)
				}
			}
		})
	}
	for name := range wantErr {
		if !seen[name] {
			t.Errorf("wantErr names no case: %q", name)
		}
	}
}
