package salt_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/event"
)

// engineConfig is the master configuration that runs reactord's Salt
// engine from this checkout, with its options (YAML under reactord:, or
// "{}").
func engineConfig(options string) string {
	return "engines_dirs:\n  - " + filepath.Join(rootDir(), "salt-engine") + "\nengines:\n  - reactord: " + options + "\n"
}

// waitEngine waits for the engine's socket in e's sock_dir.
func waitEngine(t *testing.T, e *saltEnv) string {
	t.Helper()
	path := filepath.Join(e.sockDir, "reactord.ipc")
	waitFor(t, 90*time.Second, "the reactord engine's socket", func() error {
		c, err := net.Dial("unix", path)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return path
}

// stampOf is an event's _stamp (Salt's UTC stamp) as a time.
func stampOf(ev event.Event) time.Time {
	s, _ := ev.Data["_stamp"].(string)
	ts, _ := time.Parse("2006-01-02T15:04:05.999999", s)
	return ts
}

// TestEngineOnRealSalt runs reactord's Salt engine in a real master beside
// Salt's own reactor, the same reaction files on the same events (Salt's
// reactor on myco/salt/N, reactord on myco/rd/N), alternating:
//   - a file with five Salt calls and opts while rendering: reactord's job
//     goes out no later than Salt's reactor's (median over the rounds);
//   - a runner and a wheel reaction run inside the master: the same
//     fun_args and user ("Reactor") as Salt's reactor's jobs, where the
//     master's clear functions gave other shapes;
//   - the engine's pool: 12 two-second runners never run more than its
//     worker_threads (3) at once, though spread over its two worker
//     processes (each runner says its process), and all 12 run;
//   - its socket: mode 0600, another user cannot connect, and a request
//     of another kind is refused and logged in the master's log.
func TestEngineOnRealSalt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	five := filepath.Join(dir, "five.sls")
	writeFile(t, five, `{% set a = salt['config.get']('nosuch' ~ data['n'], 'c' ~ data['n']) %}
{% set b = salt['grains.get']('nosuch' ~ data['n'], 'g' ~ data['n']) %}
{% set c = salt['pillar.get']('nosuch' ~ data['n'], 'p' ~ data['n']) %}
{% set d = salt['file.file_exists']('/etc/hostname' ~ data['n']) %}
{% set f = salt['test.echo']('e' ~ data['n']) %}
five_{{ data['n'] }}:
  local.test.arg:
    - tgt: web1
    - arg:
      - {{ tag }}
      - {{ a }}
      - {{ b }}
      - {{ c }}
      - {{ d }}
      - {{ f }}
      - {{ opts['sock_dir'] }}
`)
	wheel := filepath.Join(dir, "wheel.sls")
	writeFile(t, wheel, "wheel_{{ data['n'] }}:\n  wheel.key.accept:\n    - match: nosuch-{{ data['n'] }}\n")
	runner := filepath.Join(dir, "runner.sls")
	writeFile(t, runner, "runner_{{ data['n'] }}:\n  runner.test.arg:\n    - args:\n      - n: {{ data['n'] }}\n")
	sleeper := filepath.Join(dir, "sleep.sls")
	writeFile(t, sleeper, "sleep_{{ data['n'] }}:\n  runner.rdsleep.pid:\n    - s_time: {{ data['s'] }}\n")
	// test.sleep, answering with the process it ran in.
	writeFile(t, filepath.Join(dir, "runners", "rdsleep.py"), "import os, time\n\n\ndef pid(s_time=1):\n    time.sleep(s_time)\n    return os.getpid()\n")
	rules := func(prefix string) string {
		return "  - '" + prefix + "/five/*':\n    - " + five + "\n  - '" + prefix + "/jobs/*':\n    - " + wheel + "\n    - " + runner + "\n"
	}
	e := startSalt(t, saltOptions{minions: []string{"web1"}, noAPI: true,
		masterExtra: engineConfig("{worker_threads: 3, worker_processes: 2}") + "runner_dirs:\n  - " + filepath.Join(dir, "runners") + "\n" +
			"reactor:\n" + rules("myco/salt")})
	sock := waitEngine(t, e)
	r := startReactordRules(t, e, "master", filepath.Join(rootDir(), "examples/reactor/revert-on-inotify/revert.sls"),
		rules("myco/rd")+"  - 'myco/sleep/*':\n    - "+sleeper+"\n", "--no-loop-guard")
	e.startMinions()
	waitFor(t, 120*time.Second, "web1's key accepted by the reactor", func() error {
		out, err := e.salt("salt", "--out", "json", "--static", "web1", "test.ping")
		if err != nil || !strings.Contains(out, "true") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the master driver's use of the engine", func() error {
		if !strings.Contains(r.log(), "the reactord Salt engine answers") {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})

	jobFor := func(tagPrefix string, n int) func() (event.Event, bool) {
		want := fmt.Sprintf("%s/five/%d", tagPrefix, n)
		return func() (event.Event, bool) {
			for _, ev := range r.seen(func(ev event.Event) bool {
				return strings.HasPrefix(ev.Tag, "salt/job/") && strings.HasSuffix(ev.Tag, "/new")
			}) {
				if args, _ := ev.Data["arg"].([]any); len(args) > 0 && args[0] == want {
					return ev, true
				}
			}
			return event.Event{}, false
		}
	}
	var saltTook, rdTook []time.Duration
	for n := range 7 {
		for _, who := range []string{"myco/salt", "myco/rd"} {
			start := time.Now()
			pushEvents(t, e.sockDir, []event.Event{{Tag: fmt.Sprintf("%s/five/%d", who, n), Data: map[string]any{"n": n}}})
			var job event.Event
			waitFor(t, 60*time.Second, who+"'s five-call job", func() error {
				var ok bool
				if job, ok = jobFor(who, n)(); !ok {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			took := stampOf(job).Sub(start.UTC())
			if who == "myco/salt" {
				saltTook = append(saltTook, took)
			} else {
				rdTook = append(rdTook, took)
				sj, _ := jobFor("myco/salt", n)()
				if a, b := fmt.Sprint(sj.Data["arg"].([]any)[1:]), fmt.Sprint(job.Data["arg"].([]any)[1:]); a != b {
					t.Errorf("round %d: Salt's reactor's arguments %s, reactord's %s", n, a, b)
				}
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("five Salt calls and opts, event to job: Salt's reactor %v (median %v), reactord %v (median %v): %.2fx",
		saltTook, median(saltTook), rdTook, median(rdTook), median(rdTook).Seconds()/median(saltTook).Seconds())
	// The engine's own round trip for one render-time call, for the docs.
	eng := masterdriver.NewEngine(sock, nil)
	defer eng.Close(context.Background())
	var rtt []time.Duration
	for i := range 20 {
		start := time.Now()
		if _, err := eng.Call(context.Background(), "grains.get", []any{fmt.Sprintf("nosuch%d", i)}, nil); err != nil {
			t.Fatalf("grains.get through the engine: %v", err)
		}
		rtt = append(rtt, time.Since(start))
	}
	t.Logf("one grains.get through the engine: median %v (of 20, min %v)", median(rtt), slices.Min(rtt))
	if median(rdTook) > median(saltTook) {
		t.Errorf("reactord's five-call file took %v from event to job, Salt's reactor %v", median(rdTook), median(saltTook))
	}

	// The runner and wheel jobs of both, by function: same arguments, same user.
	t.Run("runner and wheel jobs as Salt's reactor's", func(t *testing.T) {
		for n := range 5 {
			for _, who := range []string{"myco/salt", "myco/rd"} {
				pushEvents(t, e.sockDir, []event.Event{{Tag: fmt.Sprintf("%s/jobs/%d", who, n), Data: map[string]any{"n": n}}})
			}
		}
		for _, c := range []struct{ prefix, fun string }{{"salt/run/", "runner.test.arg"}, {"salt/wheel/", "wheel.key.accept"}} {
			var got []event.Event
			waitFor(t, 60*time.Second, c.fun+" jobs of both", func() error {
				got = r.seen(func(ev event.Event) bool {
					return strings.HasPrefix(ev.Tag, c.prefix) && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == c.fun &&
						!strings.Contains(fmt.Sprint(ev.Data["fun_args"]), "web1") // the pending-key reaction's accept
				})
				if len(got) < 10 {
					return fmt.Errorf("%d of 10", len(got))
				}
				return nil
			})
			shapes := map[string]int{}
			for _, ev := range got {
				shapes[fmt.Sprintf("user=%v fun_args=%v", ev.Data["user"], ev.Data["fun_args"])]++
			}
			for shape, count := range shapes {
				if count != 2 || !strings.HasPrefix(shape, "user=Reactor ") {
					t.Errorf("%s: %q seen %d times (each of Salt's reactor's jobs once more by reactord's, user Reactor): %v", c.fun, shape, count, shapes)
				}
			}
		}
	})

	// The sleeps' job events, and how many of the jobs in jids ran at once
	// (by their events' stamps).
	sleeps := func(suffix string) []event.Event {
		return r.seen(func(ev event.Event) bool {
			return strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, suffix) && ev.Data["fun"] == "runner.rdsleep.pid"
		})
	}
	atOnce := func(jids map[any]bool) int {
		type edge struct {
			at    time.Time
			delta int
		}
		var edges []edge
		for suffix, delta := range map[string]int{"/new": 1, "/ret": -1} {
			for _, ev := range sleeps(suffix) {
				if jids[ev.Data["jid"]] {
					edges = append(edges, edge{stampOf(ev), delta})
				}
			}
		}
		sort.SliceStable(edges, func(i, j int) bool {
			if edges[i].at.Equal(edges[j].at) {
				return edges[i].delta < edges[j].delta
			}
			return edges[i].at.Before(edges[j].at)
		})
		running, most := 0, 0
		for _, ed := range edges {
			running += ed.delta
			most = max(most, running)
		}
		return most
	}
	pushSleeps := func(from, n, seconds int) {
		evs := make([]event.Event, n)
		for i := range evs {
			evs[i] = event.Event{Tag: fmt.Sprintf("myco/sleep/%d", from+i), Data: map[string]any{"n": from + i, "s": seconds}}
		}
		pushEvents(t, e.sockDir, evs)
	}
	masterLog := func() string {
		b, _ := os.ReadFile(filepath.Join(e.dir, "log", "master"))
		return string(b)
	}
	const threads = 3
	workers := map[string]int{} // the worker processes' pids, by the sleeps' returns

	t.Run("pool bound", func(t *testing.T) {
		const n = 12
		pushSleeps(0, n, 2)
		waitFor(t, 120*time.Second, "every sleep's return", func() error {
			if got := len(sleeps("/ret")); got < n {
				return fmt.Errorf("%d of %d", got, n)
			}
			return nil
		})
		all := map[any]bool{}
		for _, ev := range sleeps("/new") {
			all[ev.Data["jid"]] = true
		}
		most := atOnce(all)
		for _, ev := range sleeps("/ret") {
			workers[fmt.Sprint(ev.Data["return"])]++
		}
		t.Logf("%d sleeps started, %d returned; at most %d at once (worker_threads %d); by process: %v", len(sleeps("/new")), len(sleeps("/ret")), most, threads, workers)
		if len(sleeps("/new")) != n || most != threads {
			t.Errorf("%d sleeps started (want %d), at most %d at once (want %d)", len(sleeps("/new")), n, most, threads)
		}
		if len(workers) != 2 {
			t.Errorf("the sleeps ran in %d processes (%v), want the engine's 2 worker processes", len(workers), workers)
		}
		if !strings.Contains(masterLog(), "wait for a free thread") {
			t.Error("the master's log does not say that reactions waited for a free thread")
		}
		for _, w := range []string{"reactord-worker-0 ready", "reactord-worker-1 ready"} {
			if !strings.Contains(masterLog(), w) {
				t.Errorf("the master's log does not say %q", w)
			}
		}
	})

	// Both worker processes killed while running the three jobs the bound
	// allows: their slots come back (none would run after otherwise), new
	// workers take the next jobs, again at most three at once.
	t.Run("worker processes that end", func(t *testing.T) {
		if len(workers) != 2 {
			t.Skip("no two worker processes seen")
		}
		before := map[any]bool{}
		for _, ev := range sleeps("/new") {
			before[ev.Data["jid"]] = true
		}
		pushSleeps(100, threads, 600)
		waitFor(t, 60*time.Second, "the long sleeps' start", func() error {
			if got := len(sleeps("/new")) - len(before); got < threads {
				return fmt.Errorf("%d of %d", got, threads)
			}
			return nil
		})
		for pid := range workers {
			p, _ := strconv.Atoi(pid)
			if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
				t.Fatalf("killing worker process %d: %v", p, err)
			}
		}
		waitFor(t, 30*time.Second, "the engine's note of its workers' end", func() error {
			if c := strings.Count(masterLog(), "ready (pid"); c < 4 {
				return fmt.Errorf("%d workers ready, want 2 more", c)
			}
			return nil
		})
		for _, ev := range sleeps("/new") {
			before[ev.Data["jid"]] = true
		}
		const n = 6
		pushSleeps(200, n, 2)
		after := map[any]bool{}
		waitFor(t, 120*time.Second, "the next sleeps' return", func() error {
			for _, ev := range sleeps("/ret") {
				if !before[ev.Data["jid"]] {
					after[ev.Data["jid"]] = true
					if workers[fmt.Sprint(ev.Data["return"])] > 0 {
						return fmt.Errorf("a sleep returned from killed worker %v", ev.Data["return"])
					}
				}
			}
			if len(after) < n {
				return fmt.Errorf("%d of %d", len(after), n)
			}
			return nil
		})
		lost := 0
		for _, line := range strings.Split(masterLog(), "\n") {
			if i := strings.Index(line, " job(s) running, which ended with it"); i >= 0 && strings.Contains(line, "reactord engine: worker process") {
				f := strings.Fields(line[:i])
				c, _ := strconv.Atoi(f[len(f)-1])
				lost += c
			}
		}
		most := atOnce(after)
		t.Logf("after both workers were killed (%d jobs ended with them): %d sleeps returned, at most %d at once", lost, len(after), most)
		if most != threads || lost != threads {
			t.Errorf("want %d at once after the workers ended (slots given back), and %d jobs ended with them: %d at once, %d ended", threads, threads, most, lost)
		}
	})

	t.Run("socket", func(t *testing.T) {
		st, err := os.Stat(sock)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("socket %s: %v, mode %v (want 0600)", sock, err, st.Mode().Perm())
		}
		if os.Geteuid() == 0 {
			out, err := exec.Command("runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c",
				"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", sock).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "PermissionError") {
				t.Errorf("user nobody connected to the engine's socket (or failed otherwise): %v %s", err, out)
			}
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, _ := msgpack.Marshal(map[string]any{"head": map[string]any{"id": 7}, "body": map[string]any{"kind": "exec", "cmd": "id"}})
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var ans struct {
			Head map[string]any `msgpack:"head"`
			Body map[string]any `msgpack:"body"`
		}
		if err := msgpack.NewDecoder(bufio.NewReader(c)).Decode(&ans); err != nil {
			t.Fatal(err)
		}
		if msg, _ := ans.Body["error"].(string); !strings.Contains(msg, "unknown request 'exec'") || fmt.Sprint(ans.Head["id"]) != "7" {
			t.Errorf("answer to an unknown request: %v", ans)
		}
		waitFor(t, 10*time.Second, "the refusal in the master's log", func() error {
			b, _ := os.ReadFile(filepath.Join(e.dir, "log", "master"))
			if !strings.Contains(string(b), "reactord engine: refused a request") {
				return fmt.Errorf("not logged")
			}
			return nil
		})
	})
}

// TestEngineOrchestrationStorm pushes REACTORD_E2E_ORCH_STORM events (100
// by default) at a master with the engine at its defaults, each reacting
// with an orchestration: every one runs, never more at once than the
// master's reactor_worker_threads (10), none lost.
func TestEngineOrchestrationStorm(t *testing.T) {
	t.Parallel()
	n := 100
	if v, _ := strconv.Atoi(os.Getenv("REACTORD_E2E_ORCH_STORM")); v > 0 {
		n = v
	}
	dir := t.TempDir()
	orch := filepath.Join(dir, "orch.sls")
	writeFile(t, orch, "orch_{{ data['n'] }}:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.nop\n      - pillar:\n          n: {{ data['n'] }}\n")
	e := startSalt(t, saltOptions{noMinions: true, noAPI: true, masterExtra: engineConfig("{}")})
	writeFile(t, filepath.Join(e.dir, "srv/salt/orch/nop.sls"), "nop:\n  test.succeed_without_changes:\n    - name: nop {{ pillar['n'] }}\n")
	waitEngine(t, e)
	r := startReactordRules(t, e, "master", filepath.Join(rootDir(), "examples/reactor/revert-on-inotify/revert.sls"),
		"  - 'myco/orch/*':\n    - "+orch+"\n", "--no-loop-guard")
	waitFor(t, 30*time.Second, "the master driver's use of the engine", func() error {
		if !strings.Contains(r.log(), "the reactord Salt engine answers") {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{Tag: fmt.Sprintf("myco/orch/%d", i), Data: map[string]any{"n": i}}
	}
	start := time.Now()
	pushEvents(t, e.sockDir, evs)
	orchs := func(suffix string) []event.Event {
		return r.seen(func(ev event.Event) bool {
			return strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, suffix) && ev.Data["fun"] == "runner.state.orchestrate"
		})
	}
	waitFor(t, time.Duration(n)*time.Second+2*time.Minute, "every orchestration's return", func() error {
		if got := len(orchs("/ret")); got < n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
	took := time.Since(start)
	running, most := 0, 0
	var edges []event.Event
	edges = append(append(edges, orchs("/new")...), orchs("/ret")...)
	sort.SliceStable(edges, func(i, j int) bool {
		a, b := stampOf(edges[i]), stampOf(edges[j])
		if a.Equal(b) {
			return strings.HasSuffix(edges[i].Tag, "/ret") && strings.HasSuffix(edges[j].Tag, "/new")
		}
		return a.Before(b)
	})
	for _, ev := range edges {
		if strings.HasSuffix(ev.Tag, "/new") {
			running++
		} else {
			running--
		}
		most = max(most, running)
	}
	seen := map[any]bool{} // distinct jids returned
	for _, ev := range orchs("/ret") {
		seen[ev.Data["jid"]] = true
	}
	// An orchestration that ran and failed inside Salt is not lost: Salt's
	// own reactor, running orchestrations in threads as the engine does,
	// fails some the same way under load (its loader's race: "The renderer
	// "jinja|yaml" is not available" in the master's log). Counted, shown.
	failed := map[string]int{}
	for _, ev := range orchs("/ret") {
		if ev.Data["success"] != true {
			why := fmt.Sprint(ev.Data["return"])
			if i := strings.Index(why, "not available"); i >= 0 {
				why = "renderer not available"
			} else if len(why) > 120 {
				why = why[:120]
			}
			failed[why]++
		}
	}
	t.Logf("%d orchestrations: %d started, %d returned in %v; at most %d at once; not successful inside Salt: %v",
		n, len(orchs("/new")), len(orchs("/ret")), took.Round(time.Millisecond), most, failed)
	if len(orchs("/new")) != n || most > 10 || len(seen) != n {
		t.Errorf("want %d orchestrations started and returned, at most 10 at once: %d started, %d returned, %d at once",
			n, len(orchs("/new")), len(seen), most)
	}
}
