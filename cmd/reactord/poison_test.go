package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestPoisonEventParked: an event whose reaction kills the daemon (the
// stand-in salt SIGKILLs its parent, reactord, for target "poison") is
// redelivered after each restart; after three crashes with it in hand it
// is parked — published on reactord.parked, acknowledged, counted, in the
// ledger — and the events behind it are all reacted to. With the shared
// consumer and with partitions (issue 22, item 2).
func TestPoisonEventParked(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"shared", nil},
		{"partitions", []string{"--partitions", "2"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			srv, c := natsServer(t)
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			salt := filepath.Join(dir, "salt")
			standIn(t, salt, fmt.Sprintf(`# Stand-in for salt --async: argv is --async -- TGT FUN ARGS...
echo "$* ppid=$PPID $(cat /proc/$PPID/comm)" >> %q.argv
shift 2
echo "$1" >> %[1]q
if [ "$1" = poison ]; then kill -9 $PPID; sleep 5; fi
echo "Executed command with job ID: $(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
`, calls))
			sls := filepath.Join(dir, "step.sls")
			conf := filepath.Join(dir, "reactor.conf")
			if err := os.WriteFile(sls, []byte("step:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/step': "+sls+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var parked atomic.Int32
			var parkedBody atomic.Value
			if _, err := c.SubscribeRaw("reactord.parked", func(_ string, body []byte, _ natsbus.Meta) {
				parked.Add(1)
				parkedBody.Store(string(body))
			}); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--driver", "exec", "--salt-bin", salt,
				"--exec-coalesce", "1", "--data-dir", filepath.Join(dir, "data"), "--ack-wait", "2s"}, mode.args...)
			p := startProcess(t, args...)
			pub := func(id string) {
				if err := c.Publish(t.Context(), natsbus.Msg{Tag: "myco/step", Body: []byte(`{"tag": "myco/step", "data": {"id": "` + id + `"}}`)}, natsbus.Stored); err != nil {
					t.Fatal(err)
				}
			}
			pub("poison")
			for i := range 20 {
				pub(fmt.Sprintf("web%d", i))
			}
			crashes := 0
			deadline := time.Now().Add(2 * time.Minute)
			for parked.Load() == 0 && time.Now().Before(deadline) {
				select {
				case <-p.done:
					crashes++
					if crashes > 6 {
						t.Fatalf("the daemon died %d times on the event and never parked it", crashes)
					}
					p = launchProcess(t, args...)
				case <-time.After(100 * time.Millisecond):
				}
			}
			if parked.Load() != 1 {
				argv, _ := os.ReadFile(calls + ".argv")
				t.Fatalf("nothing parked after %d crashes; salt ran as:\n%s", crashes, argv)
			}
			if crashes != 3 {
				t.Errorf("parked after %d crashes, want 3", crashes)
			}
			if b, _ := parkedBody.Load().(string); !strings.Contains(b, `"poison"`) {
				t.Errorf("parked body %q is not the poison event", b)
			}
			checkFor(t, 30*time.Second, func() error {
				b, _ := os.ReadFile(calls)
				for i := range 20 {
					if !strings.Contains(string(b), fmt.Sprintf("web%d\n", i)) {
						return fmt.Errorf("web%d not reacted to", i)
					}
				}
				return nil
			})
			if got := metricValue(t, scrape(t, p), "reactord_events_parked_total"); got != "1" {
				t.Errorf("reactord_events_parked_total = %s", got)
			}
			if !strings.Contains(p.logs(), "event parked") {
				t.Errorf("the parking is not logged:\n%s", lastLines(p.logs(), 10))
			}
			waitSettled(t, srv.ClientURL(), 30*time.Second) // nothing comes back
			if b, _ := os.ReadFile(calls); strings.Count(string(b), "poison\n") != 3 {
				t.Errorf("the poison event was dispatched %d times, want 3 (once per crash)", strings.Count(string(b), "poison\n"))
			}
			m := regexp.MustCompile(`event parked.* event_id=(\S+)`).FindStringSubmatch(p.logs())
			if m == nil {
				t.Fatalf("no event_id in the parking line:\n%s", lastLines(p.logs(), 10))
			}
			if code, out, errOut := runCmd(t, "", "trace", m[1], "--store", "sqlite://"+filepath.Join(dir, "data", "reactord.db")); code != 0 || !strings.Contains(out, "parked after 3 crashes") {
				t.Errorf("reactord trace %s (exit %d) does not show the parking:\n%s%s", m[1], code, out, errOut)
			}
			t.Logf("%s: parked after %d crashes; 20 events behind it reacted to", mode.name, crashes)
		})
	}
}
