package reactions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesThatNoEventRenders: a reaction file whose every render fails,
// whatever the event, does not load (Library.File), positioned where the
// render fails; a file that some event renders loads, however broken
// other events find it. Each refusal is checked against a real render of
// the same source: the load refuses only what an event would fail on.
func TestFilesThatNoEventRenders(t *testing.T) {
	cases := []struct {
		file string
		// want is the error's position and start of message after the
		// path; "" for a file that loads.
		want string
		// data is an event that renders a file that loads into n
		// reactions.
		data map[string]any
		n    int
		// bad, when set, is an event the file that loads fails on.
		bad map[string]any
	}{
		{file: "yaml_shebang.sls", want: ":5:4: did not find expected key"},
		{file: "no_expression.sls", want: ":3:12: did not find expected ',' or ']'"},
		{file: "printed_values.sls", want: ":5:4: did not find expected key"},
		{file: "top_level_list.sls", want: ":2:1: the rendered file is a list"},
		{file: "conflicting_ids.sls", want: ":4:1: found conflicting ID 'a'"},

		// Broken for some events only: they load.
		{file: "if_branch.sls", data: map[string]any{"id": "web1"}, n: 1, bad: map[string]any{"broken": true}},
		{file: "range_shape.sls", data: map[string]any{"minions": []any{"web1", "web2"}}, n: 2},
		{file: "value_in_place.sls", data: map[string]any{"id": "a: [b"}, n: 1},
		{file: "comment_only.sls", data: map[string]any{}, n: 0},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".sls"), func(t *testing.T) {
			path := filepath.Join("testdata", "fixed", c.file)
			f, err := NewLibrary().File(path)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				rs, err := f.Render("x/y", c.data)
				if err != nil || len(rs) != c.n {
					t.Fatalf("render: %d reactions, %v; want %d", len(rs), err, c.n)
				}
				if _, err := f.Render("x/y", c.bad); c.bad != nil && err == nil {
					t.Errorf("the event %v renders: want it to fail", c.bad)
				}
				return
			}
			if err == nil || f != nil {
				t.Fatalf("loaded (%v), want refused with %s%s", err, path, c.want)
			}
			if !strings.HasPrefix(err.Error(), path+c.want) || !strings.HasSuffix(err.Error(), "no event can render this file, so it does not load") {
				t.Fatalf("error %q, want %s%s... saying why it does not load", err, path, c.want)
			}
			var pe *PosError
			if !asPosError(err, &pe) || pe.File != path {
				t.Errorf("error %v is not positioned in %s", err, path)
			}
			// What an event meets, rendering the same source.
			src, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			pf, perr := ParseFile(path, src)
			if perr != nil {
				t.Fatalf("ParseFile: %v", perr)
			}
			_, rerr = pf.Render("x/y", map[string]any{"id": "web1", "sls": "base"})
			if rerr == nil || !strings.HasPrefix(rerr.Error(), path+c.want) {
				t.Errorf("an event renders %v, want the refusal's error %s%s", rerr, path, c.want)
			}
		})
	}
}

// TestLibraryKeepsLastGoodOnFixedError: a change that no event can render
// is a broken edit like a syntax error: with KeepLastGood, the previous
// version goes on and the change is reported once.
func TestLibraryKeepsLastGoodOnFixedError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sls")
	if err := os.WriteFile(path, []byte("r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := NewLibrary()
	lib.CheckEvery, lib.KeepLastGood = 1, true
	var stale []error
	lib.OnStale = func(_ string, err error) { stale = append(stale, err) }
	good, err := lib.File(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n   - arg: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := lib.File(path)
	if err != nil || got != good {
		t.Fatalf("after a broken edit: %p, %v; want the previous version %p", got, err, good)
	}
	if len(stale) != 1 || !strings.HasPrefix(stale[0].Error(), path+":4:4: ") || lib.Stale()[path] == nil {
		t.Errorf("stale reports %v, Stale() %v; want the edit's error at %s:4:4 once", stale, lib.Stale(), path)
	}
}
