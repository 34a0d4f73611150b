package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// TestUnknownReactionType: a templated file whose reaction type is not
// local, runner, wheel, caller (or cmd) is refused at render, positioned,
// instead of reaching a driver that cannot run it; the file's other
// reactions go on.
func TestUnknownReactionType(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		refused   bool
	}{
		{"typo", "lcoal.state.apply", true},
		{"module as type", "foo.bar", true},
		{"bare word", "state", true},
		{"local", "local.state.apply", false},
		{"legacy cmd", "cmd.state.apply", false},
		{"runner", "runner.jobs.list_jobs", false},
		{"wheel", "wheel.key.accept", false},
		{"caller", "caller.test.ping", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sls := "good:\n  local.test.ping:\n    - tgt: {{ .data.id }}\nmaybe:\n  " + tc.key + ":\n    - tgt: {{ .data.id }}\n"
			dir, cfg := loadFiles(t, map[string]string{"reactor.conf": "reactor:\n  - 'x/*': x.sls\n", "x.sls": sls})
			res, err := MustNew(cfg, Options{}).Process(context.Background(), event.Event{Tag: "x/1", Data: map[string]any{"id": "web1"}})
			if err != nil {
				t.Fatal(err)
			}
			errs := res.Errors()
			if !tc.refused {
				if len(errs) != 0 || len(res.Chunks) != 2 {
					t.Fatalf("%d chunks, errors %v; want 2 and none", len(res.Chunks), errs)
				}
				return
			}
			if len(res.Chunks) != 1 || res.Chunks[0].Str("__id__") != "good" {
				t.Errorf("chunks %d, want only good", len(res.Chunks))
			}
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one", errs)
			}
			msg := errs[0].Error()
			typ, _, _ := strings.Cut(tc.key, ".")
			for _, want := range []string{filepath.Join(dir, "x.sls") + ":4:1", `reaction maybe: "` + typ + `" is not a reaction type`} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
		})
	}
}
