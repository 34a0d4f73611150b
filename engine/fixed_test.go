package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// TestCheckRefusesJinjaNoEventRenders: a Salt Jinja file (the default
// renderer reads it) whose rendered YAML is broken whatever the event —
// no expression at all, or values printed in place of scalars — is a
// broken file for check (and so for the daemon's start and reloads),
// positioned at the YAML error; a Jinja file broken only for some events
// loads and reacts to the others.
func TestCheckRefusesJinjaNoEventRenders(t *testing.T) {
	cases := []struct {
		file string
		want string // position and message start after the path; "" loads
		// bad, for a file that loads, is an event it fails on.
		bad map[string]any
	}{
		{"jinja_no_expression.sls", ":4:4: did not find expected key", nil},
		{"jinja_printed.sls", ":4:12: did not find expected ',' or ']'", nil},
		{"jinja_set_printed.sls", ":5:4: did not find expected key", nil},
		{"jinja_if.sls", "", map[string]any{"broken": true}},
		{"jinja_comment.sls", "", nil},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".sls"), func(t *testing.T) {
			sls, err := filepath.Abs(filepath.Join("testdata", "fixed", c.file))
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(t.TempDir(), "reactor.conf")
			if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/*':\n    - "+sls+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rep := Check(conf, "")
			if c.want != "" {
				if len(rep.Broken) != 1 || !strings.HasPrefix(rep.Broken[0].Error(), sls+c.want) || len(rep.Loaded) != 0 {
					t.Fatalf("broken %v, loaded %v; want %s%s broken", rep.Broken, rep.Loaded, sls, c.want)
				}
				return
			}
			if len(rep.Broken) != 0 || len(rep.Loaded) != 1 || !strings.HasPrefix(rep.Loaded[0].Renderer, "jinja") {
				t.Fatalf("broken %v, loaded %v; want it loaded as Jinja", rep.Broken, rep.Loaded)
			}
			eng := MustNew(rep.Config, Options{})
			res, err := eng.Process(context.Background(), event.Event{Tag: "myco/a", Data: map[string]any{"id": "web1"}})
			if err != nil || len(res.Errors()) > 0 || len(res.Chunks) != 1 {
				t.Fatalf("an event renders %d chunks, %v %v; want 1", len(res.Chunks), err, res.Errors())
			}
			if c.bad != nil {
				res, err := eng.Process(context.Background(), event.Event{Tag: "myco/a", Data: c.bad})
				if err != nil || len(res.Errors()) == 0 {
					t.Errorf("the event %v renders (%v): want it to fail", c.bad, err)
				}
			}
		})
	}
}
