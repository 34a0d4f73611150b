package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// waitExit sends SIGTERM and waits for a clean exit.
func waitExit(t *testing.T, p *proc) {
	t.Helper()
	p.terminate()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

// TestDebounceSurvivesStop: an event a debounce holds in JetStream mode is
// neither acknowledged nor lost when the daemon stops in its quiet period:
// the next daemon gets it again and reacts once. The quiet period (2s) is
// longer than --ack-wait (1s): progress acknowledgements keep it from
// being redelivered while the first daemon holds it. In core mode the
// stop drops it and says so (issue 12).
func TestDebounceSurvivesStop(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := t.TempDir()
	sls := filepath.Join(dir, "r.sls")
	conf := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(sls, []byte("r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'deb/*':\n      sls: "+sls+"\n      debounce: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ce := collect(t, c, "test.exec.")
	held := func(p *proc) int { return strings.Count(p.logs(), "event held by debounce") }

	t.Run("jetstream", func(t *testing.T) {
		args := []string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--ack-wait", "1s", "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none"}
		a := startDaemon(t, args...)
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "deb/x", Body: []byte(`{"tag": "deb/x", "data": {"id": "web1"}}`), Meta: natsbus.Meta{MsgID: "deb-1"}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
		checkFor(t, 10*time.Second, func() error {
			if held(a) == 0 {
				return fmt.Errorf("not held yet")
			}
			return nil
		})
		time.Sleep(1500 * time.Millisecond) // past --ack-wait, inside the quiet period
		if n := held(a); n != 1 {
			t.Fatalf("held %d times within the quiet period: redelivered while held", n)
		}
		waitExit(t, a)
		if !strings.Contains(a.logs(), "stopping: debounced events left for redelivery") {
			t.Fatalf("the stop did not report the debounced event it left:\n%s", a.logs())
		}
		if total, _, _, _ := ce.snapshot(); total != 0 {
			t.Fatalf("%d reactions before the quiet period ended", total)
		}
		b := startDaemon(t, args...)
		checkFor(t, 10*time.Second, func() error {
			if total, _, _, _ := ce.snapshot(); total < 1 {
				return fmt.Errorf("no reaction from the next daemon")
			}
			return nil
		})
		waitSettled(t, srv.ClientURL(), 30*time.Second) // a second one would come within a quiet period
		if total, _, _, _ := ce.snapshot(); total != 1 || held(b) != 1 {
			t.Fatalf("%d reactions, held %d times by the next daemon; want 1 and 1", total, held(b))
		}
		waitExit(t, b)
	})
	t.Run("core", func(t *testing.T) {
		p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--jetstream=false", "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
		before, _, _, _ := ce.snapshot()
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "deb/y", Body: []byte(`{"tag": "deb/y", "data": {"id": "web2"}}`)}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
		checkFor(t, 10*time.Second, func() error {
			if held(p) == 0 {
				return fmt.Errorf("not held yet")
			}
			return nil
		})
		waitExit(t, p)
		if !strings.Contains(p.logs(), "stopping: debounced events dropped") || !strings.Contains(p.logs(), "events=1") {
			t.Fatalf("the stop did not report the dropped event:\n%s", p.logs())
		}
		if total, _, _, _ := ce.snapshot(); total != before {
			t.Fatalf("%d reactions after the stop", total-before)
		}
	})
}

// TestBacklogNotRedelivered: one JetStream daemon with one lane and a slow
// driver (a stand-in salt taking ~30ms a call) takes a backlog of several
// --ack-wait (1s): progress acknowledgements keep the stream from
// redelivering what waits in the lane, so every event runs exactly once
// (issue 12).
//
// Not in parallel with other tests: its progress acknowledgements must
// come within the 1s --ack-wait, which a busy machine delays.
func TestBacklogNotRedelivered(t *testing.T) {
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	dir := t.TempDir()
	salt, calls := filepath.Join(dir, "salt"), filepath.Join(dir, "calls")
	standIn(t, salt, fmt.Sprintf(`# argv: --async -- TGT FUN ARGS...
shift 2
echo "$1" >> %q
sleep 0.03
echo "Executed command with job ID: 20261123000000000000"
`, calls))
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--ack-wait", "1s", "--workers", "1", "--driver", "exec",
		"--salt-bin", salt, "--exec-coalesce", "1", "--store", "none", "--no-loop-guard")
	const n = 120
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	checkFor(t, 30*time.Second, func() error {
		if got := countLines(t, calls); got < n {
			return fmt.Errorf("%d of %d calls", got, n)
		}
		return nil
	})
	took := time.Since(start)
	waitSettled(t, srv.ClientURL(), 30*time.Second) // a late redelivery would show up
	b, _ := os.ReadFile(calls)
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	if len(seen) != n || dups != 0 {
		t.Fatalf("%d distinct minions called, %d duplicates; want %d and 0", len(seen), dups, n)
	}
	if took < 2*time.Second {
		t.Logf("the backlog took only %v: it did not outlast --ack-wait much", took)
	}
	t.Logf("%d events through one lane in %v (--ack-wait 1s), 0 duplicates", n, took.Round(time.Millisecond))
	waitExit(t, p)
}
