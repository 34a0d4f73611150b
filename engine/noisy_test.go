package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// TestRepeatedLinesAreLimited: a file that breaks for every event is
// logged once (then once a minute with a count), not once per event; each
// failure stays counted. A second broken file still gets its own line.
func TestRepeatedLinesAreLimited(t *testing.T) {
	_, cfg := loadFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*':\n    - broken.sls\n    - other.sls\n",
		"broken.sls":   "x:\n  local.test.ping:\n    - tgt: {{ .data.nope }}\n",
		"other.sls":    "y:\n  local.test.ping:\n    - tgt: {{ .data.nope }}\n",
	})
	var logs bytes.Buffer
	eng := MustNew(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 500 {
		if _, err := eng.Process(context.Background(), event.Event{Tag: fmt.Sprintf("a/%d", i), Data: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "reaction file dropped"); n != 2 {
		t.Errorf("%d 'reaction file dropped' lines for 2 broken files × 500 events, want 2:\n%.2000s", n, out)
	}
	for _, f := range []string{"broken.sls:3:", "other.sls:3:"} {
		if !strings.Contains(out, f) {
			t.Errorf("no line for %s", f)
		}
	}
	if got := eng.Stats().Errors.Load(); got != 1000 {
		t.Errorf("Errors = %d, want 1000: every failure counted", got)
	}
}
