package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
)

// TestForgedEventsDoNotReact: through the daemon on its defaults, a
// minion's start event naming another minion does not react (counted in
// reactord_suppressed_total{reason="forged_event"}, logged once per
// minion and family), a genuine one does, and a rule with from: any
// reacts to both.
func TestForgedEventsDoNotReact(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	files := map[string]string{
		conf: "reactor:\n  - 'salt/minion/*/start':\n    - " + dir + "/start.sls\n" +
			"  - 'salt/minion/*/start':\n      sls: " + dir + "/audit.sls\n      from: any\n",
		filepath.Join(dir, "start.sls"): "#!gotmpl|yaml\nstart:\n  local.state.apply:\n    - tgt: {{ index (splitList \"/\" .tag) 2 }}\n",
		filepath.Join(dir, "audit.sls"): "#!gotmpl|yaml\naudit:\n  runner.event.send:\n    - tag: myco/audit/{{ index (splitList \"/\" .tag) 2 }}/{{ .data.id }}\n",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions(t)
	o.Config = conf
	out := &syncbuf.Buffer{}
	o.Stdout = out
	d, _ := runDaemon(t, o)
	forged := `{"id": "web2", "cmd": "_minion_event", "tag": "salt/minion/web1/start", "data": "Minion web1 started"}`
	for range 3 {
		publish(t, d, "salt/minion/web1/start", forged)
	}
	publish(t, d, "salt/minion/web2/start", `{"id": "web2", "cmd": "_minion_event", "tag": "salt/minion/web2/start", "data": "Minion web2 started"}`)
	waitFor(t, out, `"tgt":"web2"`)
	waitFor(t, out, "myco/audit/web2/web2")
	wait.Until(t, 10*time.Second, "from: any to react to the 3 forged events", func() bool {
		return strings.Count(out.String(), "myco/audit/web1/web2") >= 3
	})
	if strings.Contains(out.String(), `"tgt":"web1"`) {
		t.Errorf("the forged start highstated web1:\n%s", out.String())
	}
	if n := counterValue(t, d, "reactord_suppressed_total", "reason", "forged_event"); n != 3 {
		t.Errorf("reactord_suppressed_total{reason=forged_event} = %v, want 3", n)
	}
	if n := strings.Count(o.Stderr.(*syncbuf.Buffer).String(), "forged event: no reaction"); n != 1 {
		t.Errorf("forged events logged %d times, want once:\n%s", n, o.Stderr.(*syncbuf.Buffer).String())
	}
}

// counterValue reads a counter of the daemon's registry with one label.
func counterValue(t *testing.T, d *Daemon, name, label, value string) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
