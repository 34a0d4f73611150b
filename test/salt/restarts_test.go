package salt_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// TestRestartsAndLoopsOnRealSalt runs the loop guard's scenarios of minion
// restarts and of a reaction that fires its own trigger on a real master,
// through the exec driver and the master driver (its runner reactions go
// through the master's runner clear function):
//
//   - web1 restarted twice after its highstate returned → two more
//     highstates (genuine starts are never held back);
//   - web1 restarted while a reaction's highstate runs on it, as a
//     highstate that upgrades salt-minion would → held back, no further
//     highstate (the restart killed the job, which never returns);
//   - web1 restarted again afterwards → a highstate (the minion's start
//     ended the killed job's evidence);
//   - a reaction that sends its own trigger through the master → stopped
//     at --max-hops, once.
func TestRestartsAndLoopsOnRealSalt(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"exec", "master"} {
		t.Run(driver, func(t *testing.T) { t.Parallel(); testRestartsAndLoops(t, driver) })
	}
}

func testRestartsAndLoops(t *testing.T, driver string) {
	e := startSalt(t)
	// Every highstate takes a few seconds, so a restart can land inside one.
	writeFile(t, filepath.Join(e.dir, "srv/salt/top.sls"), "base:\n  '*':\n    - trivial\n    - slow\n")
	writeFile(t, filepath.Join(e.dir, "srv/salt/slow.sls"), "slow_step:\n  cmd.run:\n    - name: sleep 5\n")
	loop := filepath.Join(t.TempDir(), "loop.sls")
	writeFile(t, loop, "again:\n  runner.event.send:\n    - args:\n      - tag: myco/loop\n      - data: {n: 1}\n")
	root, _ := filepath.Abs("../..")
	r := startReactordRules(t, e, driver, root+"/examples/reactor/revert-on-inotify/revert.sls",
		"  - 'myco/loop':\n    - "+loop+"\n", "--max-hops", "3")
	e.startMinions()
	acceptedAndStarted(t, e, r, driver)

	highstates := isJobNew("state.apply", "web1", "")
	returned := func(j string) func() error {
		return func() error {
			if len(r.seen(tagIs("salt/job/"+j+"/ret/web1"))) == 0 {
				return fmt.Errorf("job %s has not returned", j)
			}
			return nil
		}
	}
	lastJID := func() string {
		news := r.seen(highstates)
		return fmt.Sprint(news[len(news)-1].Data["jid"])
	}
	waitCount := func(n int, what string) {
		t.Helper()
		waitFor(t, 90*time.Second, what, func() error {
			if got := len(r.seen(highstates)); got < n {
				return fmt.Errorf("%d highstates of web1", got)
			}
			return nil
		})
	}

	// Two genuine restarts, each after the last highstate returned.
	for n := 2; n <= 3; n++ {
		waitFor(t, 60*time.Second, "web1's highstate to return", returned(lastJID()))
		time.Sleep(3 * time.Second) // past the settle window
		e.restartMinion("web1")
		waitCount(n, fmt.Sprintf("highstate %d of web1 after a genuine restart", n))
	}
	t.Logf("web1 restarted twice after its highstate returned: %d highstates in all", len(r.seen(highstates)))

	// A restart inside the reaction's highstate (the third is running).
	held := r.metric(`reactord_suppressed_total{reason="loop_guard_minion_start"}`)
	running := lastJID()
	time.Sleep(2 * time.Second) // the job is in its sleep
	if err := returned(running)(); err == nil {
		t.Fatalf("highstate %s returned before the restart: the slow state did not hold it", running)
	}
	starts := len(r.seen(tagIs("salt/minion/web1/start")))
	e.restartMinion("web1")
	waitFor(t, 60*time.Second, "web1's start after the restart inside its highstate", func() error {
		if len(r.seen(tagIs("salt/minion/web1/start"))) <= starts {
			return fmt.Errorf("no new start event")
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the start to be held back", func() error {
		if got := r.metric(`reactord_suppressed_total{reason="loop_guard_minion_start"}`); got != held+1 {
			return fmt.Errorf("loop_guard_minion_start %d, want %d", got, held+1)
		}
		return nil
	})
	// A reaction would have started within 8 s.
	holds(t, 8*time.Second, "no highstate from a restart inside the reaction's own", func() error {
		if got := len(r.seen(highstates)); got != 3 {
			return fmt.Errorf("a restart inside the reaction's own highstate gave another: %d highstates", got)
		}
		return nil
	})
	t.Logf("web1 restarted inside highstate %s: held back (loop_guard_minion_start), still 3 highstates", running)

	// The restart ended that job: the next genuine restart reacts.
	e.restartMinion("web1")
	waitCount(4, "a highstate after a genuine restart that follows the killed job")
	t.Logf("web1 restarted again: highstate 4")

	// A reaction that sends its own trigger: myco/loop → event.send
	// myco/loop → … stopped at --max-hops 3.
	if out, err := e.salt("salt-run", "event.send", "myco/loop"); err != nil {
		t.Fatalf("salt-run event.send: %v: %s", err, out)
	}
	waitFor(t, 60*time.Second, "the loop to stop at the hop limit", func() error {
		if got := r.metric(`reactord_suppressed_total{reason="hop_limit"}`); got != 1 {
			return fmt.Errorf("hop_limit %d", got)
		}
		return nil
	})
	holds(t, 5*time.Second, "the loop held at the hop limit", func() error {
		if n := len(r.seen(tagIs("myco/loop"))); n > 5 {
			return fmt.Errorf("myco/loop on the bus %d times, more than the operator's and 4 sends", n)
		}
		if got := r.metric(`reactord_suppressed_total{reason="hop_limit"}`); got != 1 {
			return fmt.Errorf("hop_limit %d", got)
		}
		return nil
	})
	loops := r.seen(tagIs("myco/loop"))
	sends := r.seen(func(ev event.Event) bool {
		return strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "runner.event.send"
	})
	// The operator's event and the reactions' four sends (the genuine
	// reaction and three hops); the fifth is held back.
	if len(loops) != 5 || r.metric(`reactord_suppressed_total{reason="hop_limit"}`) != 1 {
		t.Errorf("myco/loop on the bus %d times (want the operator's and 4 sends), hop_limit %d", len(loops), r.metric(`reactord_suppressed_total{reason="hop_limit"}`))
	}
	t.Logf("a reaction firing its own trigger: %d myco/loop events, %d event.send runs, stopped at --max-hops 3", len(loops), len(sends))
}
