package salt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// isJobNew matches the publish of a job running fun on tgt: alone, or
// among others when the exec driver merged reactions into one list
// target (two minions starting at once give one state.apply of both).
func isJobNew(fun, tgt, argContains string) func(event.Event) bool {
	return func(ev event.Event) bool {
		if !strings.HasPrefix(ev.Tag, "salt/job/") || !strings.HasSuffix(ev.Tag, "/new") {
			return false
		}
		if ev.Data["fun"] != fun || !targets(ev.Data["tgt"], tgt) {
			return false
		}
		arg, _ := json.Marshal(ev.Data["arg"])
		return argContains == "" || strings.Contains(string(arg), argContains)
	}
}

// targets reports whether a job's tgt (a name, a comma-separated list or a
// list) names id.
func targets(tgt any, id string) bool {
	switch t := tgt.(type) {
	case []any:
		for _, x := range t {
			if fmt.Sprint(x) == id {
				return true
			}
		}
		return false
	case string:
		return t == id || slices.Contains(strings.Split(t, ","), id)
	}
	return false
}

// isHighstate matches the publish of a state.apply of id without
// arguments (the start recipe's; a revert or a failing job names its
// states).
func isHighstate(id string) func(event.Event) bool {
	return func(ev event.Event) bool {
		arg, _ := ev.Data["arg"].([]any)
		return isJobNew("state.apply", id, "")(ev) && len(arg) == 0
	}
}

func tagIs(tag string) func(event.Event) bool {
	return func(ev event.Event) bool { return ev.Tag == tag }
}

// TestRecipesOnRealSalt runs the four recipes of examples/reactor against a
// real master, two minions and salt-api, through the exec driver (Salt's
// own CLIs), the saltapi driver and the master driver (the master's request
// channel), with the native bridge reading the master's event socket.
func TestRecipesOnRealSalt(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"exec", "saltapi", "master"} {
		t.Run(driver, func(t *testing.T) { t.Parallel(); testRecipes(t, driver) })
	}
}

func testRecipes(t *testing.T, driver string) {
	e := startSalt(t)
	r := startReactord(t, e, driver)
	e.startMinions()

	jid := acceptedAndStarted(t, e, r, driver)
	waitFor(t, 30*time.Second, "reactord trace "+jid, func() error {
		out, err := r.cli([]string{"trace"}, jid)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, want := range []string{"salt/minion/web1/start", "dispatch", "web1"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("trace lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(out, "return") {
			return fmt.Errorf("trace shows no return:\n%s", out)
		}
		return nil
	})
	out, _ := r.cli([]string{"trace"}, jid)
	t.Logf("%s: reactord trace %s:\n%s", driver, jid, out)

	// The job cache agrees with Salt's.
	compareLookup(t, e, r, jid)

	// revert-on-inotify: one genuine change gives exactly one revert. On
	// web1 Salt pauses the beacon during the state run; on web2 it does not,
	// and the beacon event the revert's own write causes is suppressed by
	// the loop guard.
	time.Sleep(4 * time.Second) // past the highstate's settle window
	for _, id := range []string{"web1", "web2"} {
		revertsOf(t, e, r, driver, id, "state.apply")
	}

	// alert-on-failed-job: each failing state job → its alert event
	// arrives on the master's bus (and so back through the bridge): four
	// failures, three of them on web1 in quick succession, give four
	// alerts (the loop guard holds back only what a reaction caused).
	var fails []string
	for _, id := range []string{"web1", "web1", "web2", "web1"} {
		out, err := e.salt("salt", "--async", id, "state.apply", "fail")
		fails = append(fails, jidOf(t, out, err))
	}
	fail := fails[2]
	waitFor(t, 90*time.Second, "an alert for each of the jobs "+strings.Join(fails, ", "), func() error {
		alerted := map[string]bool{}
		for _, ev := range r.seen(tagIs("myco/alert/job_failed")) {
			alerted[fmt.Sprint(ev.Data["jid"])] = true
		}
		for _, j := range fails {
			if !alerted[j] {
				return fmt.Errorf("no alert for job %s yet (%d alerts)", j, len(alerted))
			}
		}
		return nil
	})
	t.Logf("%s: 4 failed jobs %v → 4 alerts myco/alert/job_failed", driver, fails)
	compareLookup(t, e, r, fail)

	// The master restarts: the bridge reconnects, says how long it was
	// blind, and events flow again.
	e.restartMaster()
	waitFor(t, 60*time.Second, "the bridge to reconnect", func() error {
		if !strings.Contains(r.log(), "reconnected to the master's event bus") {
			return fmt.Errorf("no reconnection logged")
		}
		return nil
	})
	waitFor(t, 60*time.Second, "an event after the restart", func() error {
		if out, err := e.salt("salt-run", "event.send", "reactord/after/restart"); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(r.seen(tagIs("reactord/after/restart"))) == 0 {
			return fmt.Errorf("not on the bus")
		}
		return nil
	})
	for _, l := range strings.Split(r.log(), "\n") {
		if strings.Contains(l, "reconnected to the master's event bus") {
			t.Logf("%s: master restarted: %s", driver, l)
		}
	}
}

// acceptedAndStarted waits for the accept-pending-keys and
// start-on-minion-start recipes: the minions' keys go pending and reactord
// accepts them, then each minion's start runs a real state.apply, which
// returns. It returns web1's highstate jid.
func acceptedAndStarted(t *testing.T, e *saltEnv, r *reactord, driver string) string {
	t.Helper()
	waitFor(t, 90*time.Second, "web1 and web2 accepted by the reactor", func() error {
		out, err := e.salt("salt-key", "-L", "--out", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var keys map[string][]string
		if err := json.Unmarshal([]byte(out), &keys); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(keys["minions"]) != 2 {
			return fmt.Errorf("salt-key -L: %s", out)
		}
		return nil
	})
	if n := len(r.seen(func(ev event.Event) bool { return ev.Tag == "salt/auth" && ev.Data["act"] == "pend" })); n == 0 {
		t.Error("no pending salt/auth event reached the bus")
	}
	t.Logf("%s: keys accepted by the reactor", driver)

	// start-on-minion-start: each minion's start runs a real state.apply,
	// which returns; the ledger shows event → dispatch → return.
	var jid string
	for _, id := range []string{"web1", "web2"} {
		waitFor(t, 90*time.Second, "highstate of "+id, func() error {
			news := r.seen(isJobNew("state.apply", id, ""))
			if len(news) == 0 {
				return fmt.Errorf("no state.apply job for %s", id)
			}
			j := fmt.Sprint(news[0].Data["jid"])
			if len(r.seen(tagIs("salt/job/"+j+"/ret/"+id))) == 0 {
				return fmt.Errorf("job %s has not returned", j)
			}
			if id == "web1" {
				jid = j
			}
			return nil
		})
	}
	return jid
}

// compareLookup checks `reactord jobs lookup JID --out json` against
// `salt-run jobs.lookup_jid JID --out json`.
func compareLookup(t *testing.T, e *saltEnv, r *reactord, jid string) {
	t.Helper()
	var want, got any
	waitFor(t, 30*time.Second, "both lookups of "+jid, func() error {
		sout, err := e.salt("salt-run", "jobs.lookup_jid", jid, "--out", "json")
		if err != nil {
			return fmt.Errorf("salt-run: %v: %s", err, sout)
		}
		rout, err := r.cli([]string{"jobs", "lookup"}, "--out", "json", jid)
		if err != nil {
			return fmt.Errorf("reactord: %v: %s", err, rout)
		}
		want, got = nil, nil
		if err := json.Unmarshal([]byte(sout), &want); err != nil {
			return fmt.Errorf("salt-run output: %v: %s", err, sout)
		}
		if err := json.Unmarshal([]byte(rout), &got); err != nil {
			return fmt.Errorf("reactord output: %v: %s", err, rout)
		}
		if !reflect.DeepEqual(want, got) {
			return fmt.Errorf("jobs lookup %s differs:\nsalt-run: %s\nreactord: %s", jid, sout, rout)
		}
		return nil
	})
}

// revertsOf makes three genuine changes to id's watched file, the third
// 3s after the second revert's return, and checks that each gives exactly
// one revert.
func revertsOf(t *testing.T, e *saltEnv, r *reactord, driver, id, fun string) {
	t.Helper()
	reverts := isJobNew(fun, id, "maintain_important_file")
	// A beacon is held back on its own evidence, or, for an
	// orchestration, as an event of the minion it runs on.
	suppressions := func() int {
		return r.metric(`reactord_suppressed_total{reason="loop_guard_beacon"}`) + r.metric(`reactord_suppressed_total{reason="loop_guard_minion"}`)
	}
	suppressedBefore := suppressions()
	for change := 1; change <= 3; change++ {
		f, err := os.OpenFile(e.watch[id], os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "genuine change %d\n", change)
		f.Close()
		waitFor(t, 60*time.Second, fmt.Sprintf("revert %d of %s", change, id), func() error {
			if n := len(r.seen(reverts)); n < change {
				return fmt.Errorf("%d reverts", n)
			}
			return nil
		})
		news := r.seen(reverts)
		j := fmt.Sprint(news[len(news)-1].Data["jid"])
		waitFor(t, 60*time.Second, "the revert's return", func() error {
			if len(r.seen(tagIs("salt/job/"+j+"/ret/"+id))) == 0 {
				return fmt.Errorf("revert %s has not returned", j)
			}
			return nil
		})
		// Wait out the beacon interval and the settle window: a loop
		// would show a further revert here. The third change comes 3s
		// after the second revert's return (the beacon interval is 1s):
		// it is a second tamper, and must be reverted too.
		wait := 8 * time.Second
		if change == 2 {
			wait = 3 * time.Second
		}
		holds(t, wait, id+": one revert per genuine change", func() error {
			if n := len(r.seen(reverts)); n != change {
				return fmt.Errorf("after %d genuine change(s): %d reverts", change, n)
			}
			return nil
		})
		content, _ := os.ReadFile(e.watch[id])
		if strings.TrimSpace(string(content)) != "known content" {
			t.Errorf("%s: the watched file was not reverted: %q", id, content)
		}
	}
	beacons := r.seen(func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "salt/beacon/"+id+"/inotify/") })
	suppressed := suppressions() - suppressedBefore
	t.Logf("%s: %s: 3 genuine changes → %d beacon events → 3 reverts, %d suppressed by the loop guard", driver, id, len(beacons), suppressed)
	if len(beacons) > 3 && suppressed < len(beacons)-3 {
		t.Errorf("%s: %d beacon events gave 3 reverts, but only %d loop_guard suppressions were counted", id, len(beacons), suppressed)
	}
	if id == "web2" && len(beacons) < 4 {
		t.Errorf("web2's beacon (disable_during_state_run False) fired %d times: the revert's own write did not come back, the guard was not tested", len(beacons))
	}
}

// TestOrchestratedRevertOnRealSalt runs the revert through
// state.orchestrate: a runner reaction whose minion job the master starts
// itself, which the loop guard cannot link to the reaction, so it holds
// the reaction back from the event's minion while the orchestration runs
// and settles (guard: minion, the default for orchestration). Each genuine
// change on web2 (whose beacon Salt does not pause) gives one revert, the
// third 3s after the second orchestration's return included.
func TestOrchestratedRevertOnRealSalt(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"exec", "saltapi", "master"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := startSalt(t)
			orch := filepath.Join(t.TempDir(), "orch.sls")
			writeFile(t, orch, "revert_through_orchestration:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.revert\n      - pillar:\n          target: {{ .data.id }}\n")
			r := startReactordWith(t, e, driver, orch)
			e.startMinions()
			acceptedAndStarted(t, e, r, driver)
			time.Sleep(4 * time.Second) // past the highstate's settle window
			revertsOf(t, e, r, driver, "web2", "state.sls")
		})
	}
}
