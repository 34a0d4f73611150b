package salt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// syndicTree is a master of masters (order_masters) with two syndic
// masters under it, each a salt-master with its salt-syndic and two
// minions: web1 and web2 under syn1, web3 and web4 under syn2.
type syndicTree struct {
	top *saltEnv
	syn []*saltEnv          // syn1, syn2
	ids [][]string          // the minions under each syndic
	of  map[string]*saltEnv // minion id → its syndic master
}

// startSyndicTree starts the top master and the two syndic masters with
// their salt-syndic in syndic_mode mode, accepts the syndics' keys on the
// top, and writes (but does not start) the minions.
func startSyndicTree(t *testing.T, mode string) *syndicTree {
	t.Helper()
	// Each master runs two workers: nine Salt daemons share two cores.
	workers := "worker_threads: 2\n"
	tr := &syndicTree{of: map[string]*saltEnv{}}
	tr.top = startSalt(t, saltOptions{noMinions: true, noAPI: true, masterExtra: workers + "order_masters: True"})
	for i, ids := range [][]string{{"web1", "web2"}, {"web3", "web4"}} {
		name := fmt.Sprintf("syn%d", i+1)
		syn := startSalt(t, saltOptions{noMinions: true, noAPI: true, masterExtra: workers + fmt.Sprintf(
			"syndic_master: 127.0.0.1\nsyndic_master_port: %d\nsyndic_mode: %s", tr.top.ret, mode)})
		// salt-syndic reads the master's configuration, then the minion
		// file beside it, whose values win: its id, its key, the master's
		// event socket it forwards from and the top's publish port (left
		// alone, it subscribes to the publish port of its own master).
		writeFile(t, filepath.Join(syn.etc, "minion"), fmt.Sprintf(`id: %[1]s
user: %[2]s
ipv6: False
root_dir: %[3]s
pki_dir: %[3]s/pki/syndic
sock_dir: %[4]s
publish_port: %[5]d
acceptance_wait_time: 2
syndic_log_file: %[3]s/log/syndic
syndic_pidfile: %[3]s/run/salt-syndic.pid
`, name, syn.user, syn.dir, syn.sockDir, tr.top.pub))
		syn.start("salt-syndic", "-c", syn.etc, "-l", "error")
		for _, id := range ids {
			addMinion(syn, id, []*saltEnv{syn}, "")
			// Each pending salt/auth is one accept reaction (a wheel call
			// through salt-run, slow on a loaded machine) queued before
			// the minion's start: retry the key every 10s, not 2s.
			conf := filepath.Join(syn.dir, "minions", id, "etc", "minion")
			b, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, conf, strings.Replace(string(b), "acceptance_wait_time: 2\n", "acceptance_wait_time: 10\n", 1))
			tr.of[id] = syn
		}
		tr.syn = append(tr.syn, syn)
		tr.ids = append(tr.ids, ids)
	}
	// The operator accepts the syndics on the top; the minions' keys go
	// pending on their syndic's master, where reactord accepts them.
	waitFor(t, 180*time.Second, "the syndics' keys pending on the top", func() error {
		keys, err := saltKeys(tr.top)
		if err != nil {
			return err
		}
		if !slices.Contains(keys["minions_pre"], "syn1") || !slices.Contains(keys["minions_pre"], "syn2") {
			return fmt.Errorf("salt-key -L: %v", keys)
		}
		return nil
	})
	if out, err := tr.top.salt("salt-key", "-A", "-y"); err != nil {
		t.Fatalf("salt-key -A on the top: %v: %s", err, out)
	}
	return tr
}

// saltKeys returns `salt-key -L` of e's master.
func saltKeys(e *saltEnv) (map[string][]string, error) {
	out, err := e.salt("salt-key", "-L", "--out", "json")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var keys map[string][]string
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return keys, nil
}

// seenAll counts the events matching f on every daemon's bus.
func seenAll(rs []*reactord, f func(event.Event) bool) int {
	n := 0
	for _, r := range rs {
		n += len(r.seen(f))
	}
	return n
}

// TestSyndicTreeOnRealSalt runs the four recipes of examples/reactor on a
// Salt syndic tree — a master of masters, two syndic masters, two minions
// under each — in each syndic_mode, with reactord deployed where the
// minions' events first land: on each syndic master a bridge and a daemon
// (its own embedded NATS, the master driver on that syndic master), none
// on the top, Salt's own reactor nowhere. Each intended reaction happens
// exactly once in the tree:
//
//   - the minions' keys, pending on their syndic's master (never on the
//     top), are accepted;
//   - each minion start gives one highstate;
//   - a genuine change on web2 (whose beacon Salt does not pause) gives one
//     revert, its own write none (the loop guard); one on web3 under syn2
//     gives one;
//   - a failed job gives one alert, whether the top started it (its
//     return comes back through syn1) or a syndic master did;
//   - syn1's master restarts: a change made while it is down and failed
//     jobs started as it comes back each react once.
func TestSyndicTreeOnRealSalt(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "cluster"} {
		t.Run(mode, func(t *testing.T) { t.Parallel(); testSyndicTree(t, mode) })
	}
}

func testSyndicTree(t *testing.T, mode string) {
	start := time.Now()
	tr := startSyndicTree(t, mode)
	topBus := watchBus(tr.top)
	var rs []*reactord
	for _, syn := range tr.syn {
		// Nine Salt daemons on two cores: salt-run (the accept
		// reaction's wheel call) can take more than the default 30s to
		// start; killing and retrying it only queues more behind it.
		rs = append(rs, startReactord(t, syn, "master", "--exec-timeout", "120s"))
	}
	for _, syn := range tr.syn {
		syn.startMinions()
	}
	r1, r2 := rs[0], rs[1]
	all := append(append([]string{}, tr.ids[0]...), tr.ids[1]...)

	// accept-pending-keys: each syndic's reactord accepts its minions.
	for i, syn := range tr.syn {
		waitFor(t, 300*time.Second, fmt.Sprintf("%v accepted on syn%d", tr.ids[i], i+1), func() error {
			keys, err := saltKeys(syn)
			if err != nil {
				return err
			}
			if !slices.Equal(keys["minions"], tr.ids[i]) {
				return fmt.Errorf("salt-key -L: %v", keys)
			}
			return nil
		})
	}
	if keys, err := saltKeys(tr.top); err != nil || !slices.Equal(keys["minions"], []string{"syn1", "syn2"}) || len(keys["minions_pre"]) != 0 {
		t.Errorf("the top's keys: %v (%v): want the syndics only", keys, err)
	}
	for i, r := range rs {
		if n := len(r.seen(func(ev event.Event) bool { return ev.Tag == "salt/auth" && ev.Data["act"] == "pend" })); n == 0 {
			t.Errorf("no pending salt/auth event on syn%d's bus", i+1)
		}
	}
	t.Logf("%s: keys of %v accepted on their syndics by reactord (%s)", mode, all, time.Since(start).Round(time.Second))

	// start-on-minion-start: one highstate per start, which returns.
	for _, id := range all {
		r := rs[slices.Index(tr.syn, tr.of[id])]
		waitFor(t, 300*time.Second, "the highstate of "+id, func() error {
			news := r.seen(isHighstate(id))
			if len(news) == 0 {
				return fmt.Errorf("no highstate of %s", id)
			}
			if len(r.seen(tagIs(fmt.Sprintf("salt/job/%v/ret/%s", news[0].Data["jid"], id)))) == 0 {
				return fmt.Errorf("highstate %v has not returned", news[0].Data["jid"])
			}
			return nil
		})
	}
	// The top reaches every minion through the syndics (the failed job
	// below is started there).
	waitFor(t, 120*time.Second, "the top to reach the minions through the syndics", func() error {
		out, err := tr.top.salt("salt", "--out", "json", "--static", "-L", strings.Join(all, ","), "test.ping")
		if err != nil || strings.Count(out, "true") != len(all) {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	// Past the highstates' settle window, still one each.
	holds(t, 4*time.Second, "nothing more", func() error {
		for _, id := range all {
			starts, hs := seenAll(rs, tagIs("salt/minion/"+id+"/start")), seenAll(rs, isHighstate(id))
			if starts != 1 || hs != 1 {
				return fmt.Errorf("%s: %d start event(s) gave %d highstate(s) in the tree, want 1 and 1", id, starts, hs)
			}
		}
		return nil
	})
	t.Logf("%s: 4 minion starts → 4 highstates (%s)", mode, time.Since(start).Round(time.Second))

	// revert-on-inotify: web2's three genuine changes give three reverts
	// (the loop guard stops its reverts' own writes); one on web3 gives one.
	revertsOf(t, tr.syn[0], r1, mode, "web2", "state.apply")
	before := revertsIn(rs, "web3")
	appendLine(t, tr.syn[1].watch["web3"], "genuine change")
	syndicRevertOnce(t, tr.syn[1], rs, "web3", before)

	// alert-on-failed-job: a failed job the top starts (its return reaches
	// syn1's bus) and one syn2's master starts give one alert each.
	out, err := tr.top.salt("salt", "--async", "web1", "state.apply", "fail")
	topJob := jidOf(t, out, err)
	out, err = tr.syn[1].salt("salt", "--async", "web3", "state.apply", "fail")
	synJob := jidOf(t, out, err)
	syndicAlertsOnce(t, rs, map[string]*reactord{topJob: r1, synJob: r2})
	t.Logf("%s: failed jobs %s (from the top, on web1) and %s (from syn2, on web3) → one alert each (%s)", mode, topJob, synJob, time.Since(start).Round(time.Second))

	// syn1's master restarts: failed jobs published as soon as it takes
	// them, and a genuine change on web1 as soon as web1 is back, each
	// react once. (A change made while the master is down is lost in Salt:
	// the minion does not send its beacon event again.)
	tr.syn[0].stopMaster()
	tr.syn[0].startMaster()
	var jobs []string
	returnedIn := func(j string) bool {
		out, _ := tr.syn[0].salt("salt-run", "jobs.lookup_jid", j, "--out", "json")
		return strings.Contains(out, "web1")
	}
	waitFor(t, 180*time.Second, "a failed job on web1 that returns as syn1's master comes back", func() error {
		out, err := tr.syn[0].salt("salt", "--async", "web1", "state.apply", "fail")
		if err != nil || !strings.Contains(out, "job ID: ") {
			return fmt.Errorf("%v: %s", err, out)
		}
		jobs = append(jobs, jidOf(t, out, err))
		if !returnedIn(jobs[len(jobs)-1]) {
			return fmt.Errorf("job %s did not return (web1 not back yet)", jobs[len(jobs)-1])
		}
		return nil
	})
	before = revertsIn(rs, "web1")
	appendLine(t, tr.syn[0].watch["web1"], "changed as the master came back")
	syndicRevertOnce(t, tr.syn[0], rs, "web1", before)
	// Each job web1 ran reacts once; one published before web1 was back
	// on its master never ran, and has neither a return nor an alert.
	returned := map[string]*reactord{}
	for _, j := range jobs {
		if returnedIn(j) {
			returned[j] = r1
		} else if n := seenAll(rs, func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "salt/job/"+j+"/ret/") }); n != 0 {
			t.Errorf("job %s: not in syn1's job cache, but %d returns on the bus", j, n)
		}
	}
	syndicAlertsOnce(t, rs, returned)
	if !strings.Contains(r1.log(), "reconnected to the master's event bus") {
		t.Errorf("syn1's bridge logged no reconnection")
	}
	t.Logf("%s: syn1's master restarted: a change as web1 came back → 1 revert; %d failed jobs as it came back → 1 alert each", mode, len(returned))
	if len(returned) < len(jobs) {
		t.Logf("%s: %d job(s) published before web1 was back on syn1 never ran", mode, len(jobs)-len(returned))
	}

	// Nothing a syndic forwards is taken for a forgery.
	for i, r := range rs {
		if n := r.metric(`reactord_suppressed_total{reason="forged_event"}`); n != 0 {
			t.Errorf("syn%d: %d events refused as forged", i+1, n)
		}
	}
	wheels := map[string]bool{}
	for _, ev := range append(r1.seen(isWheelNew), r2.seen(isWheelNew)...) {
		wheels[strings.Split(ev.Tag, "/")[2]] = true
	}
	checkTopBus(t, tr.top, mode, topBus(), wheels)
	t.Logf("%s: done in %s", mode, time.Since(start).Round(time.Second))
}

// isWheelNew is a wheel job's new event.
func isWheelNew(ev event.Event) bool {
	p := strings.Split(ev.Tag, "/")
	return len(p) == 4 && p[0] == "salt" && p[1] == "wheel" && p[3] == "new"
}

// appendLine appends a line to path: a genuine change of a watched file.
func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// revertsIn counts the reverts of id published in the tree.
func revertsIn(rs []*reactord, id string) int {
	return seenAll(rs, isJobNew("state.apply", id, "maintain_important_file"))
}

// syndicRevertOnce waits for one revert of id's watched file more than before
// (the count before its genuine change) and for its known content, and
// checks that no further revert follows.
func syndicRevertOnce(t *testing.T, syn *saltEnv, rs []*reactord, id string, before int) {
	t.Helper()
	waitFor(t, 90*time.Second, "the revert of "+id, func() error {
		if got := revertsIn(rs, id); got <= before {
			return fmt.Errorf("%d reverts", got-before)
		}
		content, _ := os.ReadFile(syn.watch[id])
		if strings.TrimSpace(string(content)) != "known content" {
			return fmt.Errorf("not reverted yet: %q", content)
		}
		return nil
	})
	// A loop would show a further revert within the beacon interval and
	// the settle window.
	holds(t, 8*time.Second, "nothing more", func() error {
		if got := revertsIn(rs, id) - before; got != 1 {
			return fmt.Errorf("%s: %d reverts after one genuine change, want 1", id, got)
		}
		return nil
	})
}

// syndicAlertsOnce waits for one alert per job, on the bus of the daemon given
// for it, and checks that no job has two in the tree.
func syndicAlertsOnce(t *testing.T, rs []*reactord, jobs map[string]*reactord) {
	t.Helper()
	alertsOf := func(j string) func(event.Event) bool {
		return func(ev event.Event) bool { return ev.Tag == "myco/alert/job_failed" && fmt.Sprint(ev.Data["jid"]) == j }
	}
	waitFor(t, 90*time.Second, "an alert for each failed job", func() error {
		for j, r := range jobs {
			if len(r.seen(alertsOf(j))) == 0 {
				return fmt.Errorf("no alert for job %s yet", j)
			}
		}
		return nil
	})
	// A second alert would be here by now.
	holds(t, 4*time.Second, "nothing more", func() error {
		for j := range jobs {
			if n := seenAll(rs, alertsOf(j)); n != 1 {
				return fmt.Errorf("job %s: %d alerts in the tree, want 1", j, n)
			}
		}
		return nil
	})
}
