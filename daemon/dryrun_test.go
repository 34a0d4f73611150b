package daemon

import (
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/syncbuf"
)

// TestDryRunShowsEachReactionOnce: with --dry-run a reaction is shown in
// one place, its JSON line on stdout (what the README's command greps);
// the log does not repeat it at info level, with the audit store or
// without.
func TestDryRunShowsEachReactionOnce(t *testing.T) {
	for _, st := range []string{"", "none"} {
		t.Run("store="+st, func(t *testing.T) {
			o := testOptions(t)
			o.Store = st
			out := &syncbuf.Buffer{}
			o.Stdout = out
			d, stop := runDaemon(t, o)
			publish(t, d, "salt/minion/web1/start", `{"id": "web1"}`)
			waitFor(t, out, `"tag":"salt/minion/web1/start"`)
			if err := stop(); err != nil { // drained: every line is written
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), `"tag":"salt/minion/web1/start"`); n != 1 {
				t.Errorf("stdout shows the reaction %d times, want once:\n%s", n, out.String())
			}
			logs := o.Stderr.(*syncbuf.Buffer).String()
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, "highstate_on_start") && !strings.Contains(line, "level=DEBUG") {
					t.Errorf("the log shows the reaction again: %s", line)
				}
			}
		})
	}
}
