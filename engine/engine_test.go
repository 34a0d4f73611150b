package engine

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
)

// TestDropsAreLogged checks that every way a reaction is dropped leaves a
// log line with its cause and file position.
func TestDropsAreLogged(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*':\n    - missing.sls\n    - broken.sls\n  - 'b/*':\n    - notlist.sls\n",
		"broken.sls":   "x:\n  local.test.ping:\n    - tgt: {{ .data.nope }}\n",
		"notlist.sls":  "y:\n  local.test.ping: web1\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	eng := MustNew(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	for _, ev := range []event.Event{
		{Tag: "a/1", Data: map[string]any{}},
		{Tag: "b/1", Data: map[string]any{}},
		{Tag: "b/2", Data: map[string]any{"user": "Reactor"}},
	} {
		if _, err := eng.Process(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.ProcessLine(ctx, []byte("not json")); err == nil {
		t.Fatal("malformed line accepted")
	}
	out := logs.String()
	for _, want := range []string{
		"reactor.conf:3:7: can not render SLS missing.sls",
		"broken.sls:3:19:",
		"notlist.sls:1:1: State 'y'",
		"reason=\"event fired by the reactor itself",
		"malformed event",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	st := eng.Stats()
	if st.Events.Load() != 4 || st.Malformed.Load() != 1 || st.Errors.Load() != 4 {
		t.Errorf("stats: events %d malformed %d errors %d", st.Events.Load(), st.Malformed.Load(), st.Errors.Load())
	}
}
