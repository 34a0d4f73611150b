package salt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// Salt's Jinja reaction files the shadow test's master and reactord both
// read: the four recipes, an orchestration, a failing state, a burst.
var shadowFiles = map[string]string{
	"start.sls":  "highstate_on_start:\n  local.state.apply:\n    - tgt: {{ data['id'] }}\n",
	"accept.sls": "{% if data.get('act') == 'pend' and data['id'].startswith('web') %}\naccept_key:\n  wheel.key.accept:\n    - args:\n      - match: {{ data['id'] }}\n{% endif %}\n",
	"revert.sls": "revert-file:\n  local.state.apply:\n    - tgt: {{ data['id'] }}\n    - args:\n      - mods: maintain_important_file\n      - saltenv: base\n",
	"alert.sls": "{% if not data.get('success', True) and data.get('fun') != 'saltutil.find_job' %}\nnotify_failure:\n  runner.event.send:\n" +
		"    - args:\n      - tag: myco/alert/job_failed\n      - data:\n          minion: {{ data['id'] }}\n          jid: '{{ data['jid'] }}'\n{% endif %}\n",
	"orch.sls":   "orchestrate_revert:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.revert\n      - pillar:\n          target: {{ data['id'] }}\n",
	"fail.sls":   "failing_state:\n  local.state.apply:\n    - tgt: {{ data['id'] }}\n    - args:\n      - mods: fail\n",
	"burst.sls":  "burst_arg:\n  local.test.arg:\n    - tgt: {{ data['id'] }}\n    - args:\n      - n: {{ data['n'] }}\n",
	"edited.sls": "edited_reaction:\n  local.test.arg:\n    - tgt: {{ data['id'] }}\n    - args:\n      - side: salt\n",
	"when.sls":   "gated_reaction:\n  local.test.echo:\n    - tgt: {{ data['id'] }}\n    - args:\n      - text: gated\n",
	"only.sls":   "reactord_only_reaction:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n",
	"slow.sls":   "slow_runner:\n  runner.test.sleep:\n    - args:\n      - s_time: 3\n",
}

// TestShadowOnRealSalt runs `reactord shadow` beside a real master whose
// own reactor runs the recipes, an orchestration and a burst, and reads
// its verdicts (reactord shadow report --out json): every job Salt's
// reactor started is paired; the differences seeded on reactord's side —
// an edited file (differ), a rule only reactord has (reactord-only), a
// rule reactord's `when` refuses (salt-only) — and what reactord holds back
// on purpose — the echo of a revert on web2, whose beacon does not pause
// during state runs (held-loop), web2's forged start of web1 (held-forged)
// — each get their verdict. It measures what the shadow (daemon and bridge)
// costs in CPU beside what the Salt processes spend on the same traffic.
func TestShadowOnRealSalt(t *testing.T) {
	saltDir, ourDir := t.TempDir(), t.TempDir()
	for name, text := range shadowFiles {
		writeFile(t, filepath.Join(saltDir, name), text)
		writeFile(t, filepath.Join(ourDir, name), text)
	}
	// The seeded difference: reactord's copy of edited.sls has other
	// arguments.
	writeFile(t, filepath.Join(ourDir, "edited.sls"), strings.Replace(shadowFiles["edited.sls"], "side: salt", "side: reactord", 1))
	rules := func(dir string) string {
		return fmt.Sprintf(`  - 'salt/minion/*/start':
    - %[1]s/start.sls
  - 'salt/auth':
    - %[1]s/accept.sls
  - 'salt/beacon/*/inotify/*':
    - %[1]s/revert.sls
  - 'salt/job/*/ret/*':
    - %[1]s/alert.sls
  - 'myco/orch/*':
    - %[1]s/orch.sls
  - 'myco/fail/*':
    - %[1]s/fail.sls
  - 'myco/burst/*':
    - %[1]s/burst.sls
  - 'myco/edited':
    - %[1]s/edited.sls
  - 'myco/slow/*':
    - %[1]s/slow.sls
`, dir)
	}
	// Salt's reactor runs runner and wheel reactions in a pool of two
	// threads with room for two more waiting (reactor_worker_threads,
	// reactor_worker_hwm): a burst of slow runner reactions overflows it.
	e := startSalt(t, saltOptions{masterExtra: "reactor_worker_threads: 2\nreactor_worker_hwm: 2\nreactor:\n" + rules(saltDir) +
		fmt.Sprintf("  - 'myco/when':\n    - %s/when.sls\n", saltDir)})
	r := newReactord(t)
	writeFile(t, r.conf, "reactor:\n"+rules(ourDir)+fmt.Sprintf(`  - 'myco/only':
    - %[1]s/only.sls
  - 'myco/when':
      sls:
        - %[1]s/when.sls
      when: data.id == "nobody"
`, ourDir))
	const window = 10 * time.Second
	// REACTORD_E2E_SHADOW_ARGS adds flags (to measure what costs CPU).
	r.launch(e, []string{"shadow"}, "dryrun", append([]string{"--shadow-window", window.String()}, strings.Fields(os.Getenv("REACTORD_E2E_SHADOW_ARGS"))...)...)
	// The line is logged before the daemon is ready, but its log is read
	// by a goroutine of its own: on a loaded machine it may lag a moment.
	waitFor(t, 15*time.Second, "the shadow mode line at start", func() error {
		if !strings.Contains(r.log(), "shadow mode: dispatching nothing") {
			return fmt.Errorf("not in the log:\n%s", r.log())
		}
		return nil
	})
	e.startMinions()

	// Salt's reactor accepts the keys; the minions start and are
	// highstated. No job of the test's own: a job of the master's user
	// would be ambiguous.
	started := func(id string) func(event.Event) bool {
		return func(ev event.Event) bool { return ev.Tag == "salt/minion/"+id+"/start" }
	}
	returned := func(fun, id string) func(event.Event) bool {
		return func(ev event.Event) bool {
			return strings.HasSuffix(ev.Tag, "/ret/"+id) && ev.Data["fun"] == fun
		}
	}
	waitFor(t, 180*time.Second, "both minions highstated by Salt's reactor", func() error {
		for _, id := range e.minions {
			if len(r.seen(started(id))) == 0 || len(r.seen(returned("state.apply", id))) == 0 {
				return fmt.Errorf("%s: not started and highstated yet", id)
			}
		}
		return nil
	})

	// Reverts: web1's beacon pauses during state runs, web2's does not,
	// so the revert's own write on web2 comes back and Salt's reactor
	// reverts again.
	reverts := func(id string) int {
		return len(r.seen(func(ev event.Event) bool {
			return strings.HasPrefix(ev.Tag, "salt/job/") && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "state.apply" &&
				fmt.Sprint(ev.Data["tgt"]) == id && strings.Contains(fmt.Sprint(ev.Data["arg"]), "maintain_important_file")
		}))
	}
	// A beacon that has not set its watch up yet, or that pauses during a
	// state run still going, misses a change: the change is made again
	// until Salt's reactor reverts it (each one an event of its own).
	for _, id := range e.minions {
		reverted := func() error {
			if b, err := os.ReadFile(e.watch[id]); err != nil || strings.TrimSpace(string(b)) != "known content" {
				return fmt.Errorf("%s: %q %v", id, b, err)
			}
			return nil
		}
		for try := 1; ; try++ {
			f, err := os.OpenFile(e.watch[id], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, "a genuine change")
			f.Close()
			err = wait.PollEvery(30*time.Second, 200*time.Millisecond, reverted)
			if err == nil {
				break
			}
			if try == 3 {
				t.Fatalf("Salt's reactor did not revert %s after %d changes: %v", id, try, err)
			}
		}
	}
	waitFor(t, 60*time.Second, "Salt's reactor to revert web2 again (its own write's beacon)", func() error {
		if n := reverts("web2"); n < 2 {
			return fmt.Errorf("%d reverts of web2", n)
		}
		return nil
	})

	// web2 claims web1's start.
	if out, err := e.saltAs("salt-call", filepath.Join(e.dir, "minions", "web2", "etc"), "event.send", "salt/minion/web1/start"); err != nil {
		t.Fatalf("salt-call event.send: %v %s", err, out)
	}

	// The seeded differences, an orchestration, a failing job (whose
	// return the alert recipe reacts to), then a burst and a quiet
	// stretch.
	const burst = 100
	cpu0, wall0 := cpuOf(t, e, r), time.Now()
	evs := []event.Event{
		{Tag: "myco/edited", Data: map[string]any{"id": "web1"}},
		{Tag: "myco/only", Data: map[string]any{"id": "web1"}},
		{Tag: "myco/when", Data: map[string]any{"id": "web1"}},
		{Tag: "myco/orch/web1", Data: map[string]any{"id": "web1"}},
		{Tag: "myco/fail/web2", Data: map[string]any{"id": "web2"}},
	}
	for i := range burst {
		id := e.minions[i%len(e.minions)]
		evs = append(evs, event.Event{Tag: "myco/burst/" + id, Data: map[string]any{"id": id, "n": i}})
	}
	pushEvents(t, e.sockDir, evs)
	waitFor(t, 180*time.Second, "Salt's reactor's burst jobs to return", func() error {
		if n := len(r.seen(returned("test.arg", "web1"))) + len(r.seen(returned("test.arg", "web2"))); n < burst+1 {
			return fmt.Errorf("%d test.arg returns", n)
		}
		return nil
	})
	// Quiet: every decision and job is decided window + grace after it.
	report := func() shadowReport {
		out, err := r.cli([]string{"shadow", "report"}, "--out", "json", "--limit", "1000")
		if err != nil {
			t.Fatalf("shadow report: %v\n%s", err, out)
		}
		var rep shadowReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("shadow report: %v\n%s", err, out)
		}
		return rep
	}
	var rep shadowReport
	waitFor(t, 60*time.Second, "the shadow to decide everything", func() error {
		if p := r.metric(`reactord_shadow_total{verdict="agree"}`); p < burst {
			return fmt.Errorf("%d agreements", p)
		}
		rep = report()
		if rep.Verdicts["salt-only"] == 0 || rep.Verdicts["reactord-only"] == 0 || rep.Verdicts["differ"] == 0 {
			var b strings.Builder
			for _, d := range rep.Disagreements {
				fmt.Fprintf(&b, "\n  %s %s %s jid=%s: %s", d.Verdict, d.Rule, d.Tag, d.JID, d.Reason)
			}
			return fmt.Errorf("not all decided yet: %v%s", rep.Verdicts, b.String())
		}
		return nil
	})
	// Every job Salt's reactor started gets a verdict (its shadow row in
	// the ledger: reactord trace JID), but an orchestration's own job.
	saltJobs := r.seen(func(ev event.Event) bool {
		p := strings.Split(ev.Tag, "/")
		if len(p) != 4 || p[3] != "new" || (p[1] != "job" && p[1] != "run" && p[1] != "wheel") {
			return false
		}
		u, _ := ev.Data["user"].(string)
		return u == "Reactor" || (p[1] == "job" && u == "root" && ev.Data["fun"] != "saltutil.find_job")
	})
	unpaired := map[string]bool{}
	for _, ev := range saltJobs {
		unpaired[fmt.Sprint(ev.Data["jid"])] = true
	}
	waitFor(t, 60*time.Second, "a verdict for every job of Salt's reactor", func() error {
		for jid := range unpaired {
			if out, _ := r.cli([]string{"trace"}, jid); strings.Contains(out, " shadow ") {
				delete(unpaired, jid)
			}
		}
		if children := r.metric("reactord_shadow_runner_jobs_total"); len(unpaired) != children {
			return fmt.Errorf("%d jobs without a verdict, %d an orchestration's: %v", len(unpaired), children, unpaired)
		}
		return nil
	})
	if len(unpaired) != 1 {
		t.Errorf("%d jobs of Salt's reactor taken as an orchestration's, want its one state.sls: %v", len(unpaired), unpaired)
	}
	cpu1, wall := cpuOf(t, e, r), time.Since(wall0)
	// What the shadow costs beside what Salt spends on the same traffic,
	// logged before the checks below can end the test.
	ours, salts := cpu1.ours-cpu0.ours, cpu1.salt-cpu0.salt
	if salts <= 0 {
		t.Fatalf("no CPU measured for Salt's processes")
	}
	// A figure, not a bound (the goal is at most 5%): shadow mode flushes
	// JetStream's writes every two minutes and trims once a second; with
	// REACTORD_E2E_SHADOW_ARGS="--jetstream-sync 0" each write is flushed.
	t.Logf("CPU over the burst and the quiet stretch (%s): reactord shadow %.2fs and its bridge %.2fs, Salt's master, minions and salt-api %.2fs: %.1f%% of Salt's; %.1f%% of the host's %d cores",
		wall.Round(time.Second), cpu1.daemon-cpu0.daemon, ours-(cpu1.daemon-cpu0.daemon), salts, 100*ours/salts,
		100*ours/wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	rep = report()
	t.Logf("verdicts: %v", rep.Verdicts)
	for _, d := range rep.Disagreements {
		t.Logf("  %s %s %s jid=%s: %s", d.Verdict, d.Rule, d.Tag, d.JID, d.Reason)
	}
	agreed := rep.Verdicts["agree"]
	// Each revert Salt's reactor ran after the first on a minion is the
	// revert's own write come back (web2's beacon does not pause during
	// state runs; web1's pause does not catch every event either): a
	// reaction the loop guard would have stopped.
	again := reverts("web1") - 1 + reverts("web2") - 1
	want := map[string]int{"differ": 1, "reactord-only": 1, "salt-only": 1, "held-loop": again, "held-forged": 1}
	for v, n := range want {
		if got := rep.Verdicts[v]; got != n {
			t.Errorf("%d %s verdicts, want %d", got, v, n)
		}
	}
	if again < 1 {
		t.Errorf("Salt's reactor reverted no file twice: the loop was not seeded")
	}
	for v, n := range rep.Verdicts {
		if _, ok := want[v]; !ok && v != "agree" && n > 0 {
			t.Errorf("%d unexpected %s verdicts", n, v)
		}
	}
	t.Logf("%d jobs of Salt's reactor: %d with a verdict (%d agreements in all), %d an orchestration's", len(saltJobs), len(saltJobs)-len(unpaired), agreed, len(unpaired))
	for _, check := range []struct{ verdict, rule, reason string }{
		{"differ", "myco/edited", "reactord"},
		{"reactord-only", "myco/only", "no such job"},
		{"salt-only", "myco/when", "when:"},
		{"held-loop", "salt/beacon/*/inotify/*", "loop guard"},
		{"held-forged", "salt/minion/*/start", "forged"},
	} {
		found := false
		for _, d := range rep.Disagreements {
			if d.Verdict == check.verdict && d.Rule == check.rule && strings.Contains(d.Reason, check.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s verdict for rule %s with %q in its reason", check.verdict, check.rule, check.reason)
		}
	}

	// A burst of slow runner reactions: Salt's reactor drops what its
	// pool cannot queue ("TaskPool queue is full!" in its log), which
	// reactord would run: reactord-only, one per drop.
	const slow = 8
	before := rep.Verdicts["reactord-only"]
	var slowEvs []event.Event
	for i := range slow {
		slowEvs = append(slowEvs, event.Event{Tag: fmt.Sprintf("myco/slow/%d", i), Data: map[string]any{"id": "web1"}})
	}
	pushEvents(t, e.sockDir, slowEvs)
	full := func() int {
		b, _ := os.ReadFile(filepath.Join(e.dir, "log", "master"))
		return strings.Count(string(b), "TaskPool queue is full")
	}
	// A decision no job pairs with is reactord-only once the comparer's
	// window has passed: 10 s, or 1.5 times the lag it saw between events
	// and Salt's jobs (over 50 s on a loaded machine), at most MaxWindow.
	waitFor(t, 60*time.Second+shadowWindowSeen(t, rep), "the slow runners to be decided", func() error {
		rep = report()
		sleeps := len(r.seen(func(ev event.Event) bool {
			return strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "runner.test.sleep"
		}))
		if got := rep.Verdicts["reactord-only"] - before; got+sleeps < slow || full() == 0 {
			return fmt.Errorf("%d reactord-only, %d test.sleep runs, %d drops in Salt's log", got, sleeps, full())
		}
		return nil
	})
	if got, drops := rep.Verdicts["reactord-only"]-before, full(); got != drops {
		t.Errorf("Salt's reactor dropped %d slow runner reactions (its log), shadow found %d reactord-only", drops, got)
	} else {
		t.Logf("Salt's reactor dropped %d of %d slow runner reactions at its queue limit: %d reactord-only verdicts", drops, slow, got)
	}
}

// shadowReport is what `reactord shadow report --out json` prints, as far
// as the test reads it.
type shadowReport struct {
	Verdicts      map[string]int `json:"verdicts"`
	Disagreements []struct {
		Verdict string `json:"verdict"`
		Rule    string `json:"rule"`
		Tag     string `json:"tag"`
		JID     string `json:"jid"`
		Reason  string `json:"reason"`
	} `json:"disagreements"`
}

// cpuTimes are CPU seconds (user and system) spent so far.
type cpuTimes struct{ ours, daemon, salt float64 }

// cpuOf reads the CPU seconds of reactord's processes and of every
// process in the Salt programs' process groups (the master's workers, the
// minions and their job processes, those that exited included).
func cpuOf(t *testing.T, e *saltEnv, r *reactord) cpuTimes {
	t.Helper()
	groups := map[int]bool{}
	for _, p := range e.procs {
		groups[p.Process.Pid] = true
	}
	ours := map[int]bool{}
	for _, p := range r.pids {
		ours[p] = true
	}
	var c cpuTimes
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+2:])
		if len(fields) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		pgrp, _ := strconv.Atoi(fields[2])
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		// Salt's job processes come and go: what the exited ones spent is
		// their parents' children's time.
		cutime, _ := strconv.ParseFloat(fields[13], 64)
		cstime, _ := strconv.ParseFloat(fields[14], 64)
		switch {
		case ours[pid]:
			c.ours += (utime + stime) / 100 // USER_HZ
			if pid == r.pids[0] {
				c.daemon += (utime + stime) / 100
			}
		case groups[pgrp]:
			c.salt += (utime + stime + cutime + cstime) / 100
		}
	}
	return c
}

// shadowWindowSeen is the comparer's window as the report's reactord-only
// verdicts state it ("within 46.1s of the event"), the longest of them;
// the --shadow-window given (10 s) when none says.
func shadowWindowSeen(t *testing.T, rep shadowReport) time.Duration {
	t.Helper()
	longest := 10 * time.Second
	for _, d := range rep.Disagreements {
		_, after, ok := strings.Cut(d.Reason, "started no such job within ")
		if !ok {
			continue
		}
		if w, err := time.ParseDuration(strings.Fields(after)[0]); err == nil && w > longest {
			longest = w
		}
	}
	return longest
}
