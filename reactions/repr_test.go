package reactions

import (
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// TestReprStructsInTranslatedFiles: in a file converted from Jinja, a map
// or list printed as a whole plain value is what Salt's loader reads from
// its repr (checked against Salt 3007.1 by jinja's corpus); the checks on
// structure from event data still apply; a Go template keeps the text.
func TestReprStructsInTranslatedFiles(t *testing.T) {
	const src = "r:\n  local.test.arg:\n    - tgt: m1\n    - arg: {{ .data.v }}\n"
	data, err := event.DecodeData([]byte(`{"v": [null, true, 1, 1.5, 1e16, "it's", "a\nb", {"k": [2, "x: y"]}, []]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		translated bool
		want       string
	}{
		{true, `["None",true,1,1.5,"1e+16","it's","a\\nb",{"k":[2,"x: y"]},[]]`},
		{false, `"[None, True, 1, 1.5, 1e+16, \"it's\", 'a\\nb', {'k': [2, 'x: y']}, []]"`},
	} {
		f, err := ParseFile("x.sls", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		f.Translated = tc.translated
		rs, err := f.Render("t", data)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := rs[0].Body.Get("local")
		args := body.([]any)
		v, _ := args[1].(*event.Map).Get("arg")
		raw, _ := event.AppendJSON(nil, v)
		if string(raw) != tc.want {
			t.Errorf("translated=%v: arg = %s, want %s", tc.translated, raw, tc.want)
		}
	}

	// An argument item printed from data stays refused when it is a
	// structure, in a translated file too.
	f, err := ParseFile("x.sls", []byte("r:\n  local.test.arg:\n    - tgt: m1\n    - {{ .data.v }}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.Translated = true
	obj, _ := event.DecodeData([]byte(`{"v": {"tgt": "*"}}`))
	if _, err := f.Render("t", obj); err == nil || !strings.Contains(err.Error(), "is a structure, which would be merged") {
		t.Errorf("structure as an argument item: %v", err)
	}
}

// TestDedentLines: a block scalar's indentation comes off a printed
// value's later lines (as Salt's loader reads the pasted text); a line with
// text indented less stays as it is, a line of fewer spaces is empty.
func TestDedentLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"one line", "one line"},
		{"a\n    b\n      c", "a\nb\n  c"},
		{"a\n  \n    b", "a\n\nb"},
		{"a\n  - tgt: '*'", "a\n  - tgt: '*'"},
		{"a\r\n    b\r\n", "a\r\nb\r\n"},
	} {
		if got := dedentLines(tc.in, 4); got != tc.want {
			t.Errorf("dedentLines(%q, 4) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
