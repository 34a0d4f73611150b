package reactor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/natsbus/kv"
)

// saltDriver plays a master: each dispatch gets the next jid (or none,
// as --dry-run), and the scenario feeds back what the job causes.
type saltDriver struct {
	mu    sync.Mutex
	noJID bool
	n     int
	calls []string // "tag id jid"
}

func (s *saltDriver) Name() string              { return "salt" }
func (s *saltDriver) Supports(string) bool      { return true }
func (*saltDriver) Close(context.Context) error { return nil }

func (s *saltDriver) Do(_ context.Context, a actions.Action) (actions.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	jid := jidN(s.n)
	if s.noJID {
		jid = ""
	}
	s.calls = append(s.calls, a.Chunk.Str("__id__")+" "+jid)
	return actions.Result{JID: jid}, nil
}

// jidN is the n-th job ID the scenarios' master hands out, shaped as
// Salt's (the exec driver reads only digits from salt-run's output).
func jidN(n int) string { return fmt.Sprintf("20261126%012d", n) }

// j1 and j2 are the first two jobs a scenario's reactions start.
var j1, j2 = jidN(1), jidN(2)

// count returns how many dispatches reaction id had.
func (s *saltDriver) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if strings.HasPrefix(c, id+" ") {
			n++
		}
	}
	return n
}

// step is one moment of a scenario: wait, then an event.
type step struct {
	after time.Duration
	tag   string
	data  string // JSON object
}

func beaconStep(after time.Duration, id string) step {
	return step{after, "salt/beacon/" + id + "/inotify//etc/important_file", `{"id": "` + id + `", "change": "IN_MODIFY", "path": "/etc/important_file"}`}
}

func retStep(after time.Duration, jid, id string, success bool) step {
	return step{after, "salt/job/" + jid + "/ret/" + id, fmt.Sprintf(`{"id": %q, "jid": %q, "fun": "state.apply", "success": %v, "retcode": %d}`, id, jid, success, map[bool]int{true: 0, false: 2}[success])}
}

func startStep(after time.Duration, id string) step {
	return step{after, "salt/minion/" + id + "/start", `{"id": "` + id + `"}`}
}

const (
	scenarioRevert = "revert:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n    - args:\n      - mods: important_file\n"
	scenarioAlert  = "{{- if not (dig \"success\" true .data) }}\nalert:\n  runner.event.send:\n    - args:\n      - tag: myco/alert/job_failed\n      - data: {minion: {{ .data.id }}}\n{{- end }}\n"
	scenarioHigh   = "highstate:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"
	scenarioStep   = "step:\n  local.cmd.run:\n    - tgt: {{ .data.id }}\n    - args:\n      - cmd: 'true'\n"
)

// TestLoopGuardScenarios is the causal model's matrix through the daemon:
// every genuine event reacts, every consequence of a reaction is held
// back from that reaction alone, on its evidence.
func TestLoopGuardScenarios(t *testing.T) {
	for _, c := range loopGuardScenarios {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &saltDriver{noJID: c.noJID}
				c.run(t, drv, drv)
			})
		})
	}
}

// run plays the scenario through one daemon dispatching with drv, on the
// fake clock of the synctest bubble it runs in, and checks the
// dispatches that calls recorded. It returns the daemon's metrics.
func (c scenario) run(t *testing.T, drv actions.Driver, calls *saltDriver) *Metrics {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(scenarioEngine(t, c.conf), Options{Driver: drv, Lanes: 4, Block: true, Metrics: m,
		Guard: guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	for _, s := range c.steps {
		pass(s.after)
		d.Submit(ctx, Delivery{Body: s.body()})
		synctest.Wait()
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c.check(t, calls, []*Metrics{m})
	return m
}

// scenario is one row of the loop guard's matrix.
type scenario struct {
	name  string
	conf  string
	noJID bool
	steps []step
	want  map[string]int     // dispatches per reaction id
	held  map[string]float64 // reactord_suppressed_total by reason
	// long marks a scenario of minutes, run on the fake clock only;
	// local one whose evidence does not cross replicas any differently
	// from another's (run on one daemon only, to keep CI short).
	long, local bool
}

// body is the step's event envelope.
func (s step) body() []byte { return fmt.Appendf(nil, `{"tag": %q, "data": %s}`, s.tag, s.data) }

// scenarioEngine loads conf with the scenarios' reaction files.
func scenarioEngine(t testing.TB, conf string) *engine.Engine {
	return engineWith(t, conf, map[string]string{"revert.sls": scenarioRevert, "alert.sls": scenarioAlert,
		"highstate.sls": scenarioHigh, "step.sls": scenarioStep,
		"orch.sls":  "orch:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.revert\n      - pillar: {target: {{ .data.id }}}\n",
		"loop.sls":  "again:\n  runner.event.send:\n    - args:\n      - tag: myco/loop\n      - data: {id: web1}\n",
		"watch.sls": "watch:\n  runner.test.arg:\n    - args:\n      - seen\n"})
}

// check compares the dispatches and the suppressions, added up over the
// replicas' metrics, with the scenario's.
func (c scenario) check(t *testing.T, drv *saltDriver, ms []*Metrics) {
	t.Helper()
	for id, n := range c.want {
		if got := drv.count(id); got != n {
			t.Errorf("%s: %d dispatches, want %d (%v)", id, got, n, drv.calls)
		}
	}
	for _, reason := range []string{"loop_guard_job", "loop_guard_beacon", "loop_guard_minion_start", "loop_guard_minion", "hop_limit"} {
		var got float64
		for _, m := range ms {
			got += testutil.ToFloat64(m.Suppressed.WithLabelValues(reason))
		}
		if got != c.held[reason] {
			t.Errorf("reactord_suppressed_total{reason=%q} = %v, want %v", reason, got, c.held[reason])
		}
	}
}

var loopGuardScenarios = []scenario{
	{
		name: "four failed jobs reactord never started: four alerts (dry-run)", local: true, noJID: true,
		conf:  "reactor:\n  - 'salt/job/*/ret/*': alert.sls\n",
		steps: []step{retStep(0, "100", "web1", false), retStep(50*time.Millisecond, "101", "web1", false), retStep(time.Second, "102", "web1", false), retStep(0, "103", "web2", false)},
		want:  map[string]int{"alert": 4},
	},
	{
		name:  "four failed jobs, a driver that gives jids: four alerts",
		conf:  "reactor:\n  - 'salt/job/*/ret/*': alert.sls\n",
		steps: []step{retStep(0, "100", "web1", false), retStep(50*time.Millisecond, "101", "web1", false), retStep(time.Second, "102", "web1", false), retStep(0, "103", "web2", false)},
		want:  map[string]int{"alert": 4},
	},
	{
		name: "revert: its own beacons held, a second change 3s after the return reverted",
		conf: "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file': revert.sls\n",
		steps: []step{
			beaconStep(0, "web1"),                           // genuine: revert J1
			beaconStep(200*time.Millisecond, "web1"),        // the state run rewrites the file: held (running)
			retStep(300*time.Millisecond, j1, "web1", true), // the revert returns
			beaconStep(860*time.Millisecond, "web1"),        // the beacon reports the job's change late: held (settling)
			beaconStep(2140*time.Millisecond, "web1"),       // 3s after the return: a genuine second change
		},
		want: map[string]int{"revert": 2},
		held: map[string]float64{"loop_guard_beacon": 2},
	},
	{
		name: "a failed revert alerts: the job's return is held back from the revert only", local: true,
		conf: "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file': revert.sls\n  - 'salt/job/*/ret/*': alert.sls\n",
		steps: []step{
			beaconStep(0, "web1"),
			retStep(time.Second, j1, "web1", false),    // the revert failed: alert
			retStep(time.Second, "900", "web2", false), // another failure: alert
		},
		want: map[string]int{"revert": 1, "alert": 2},
	},
	{
		name: "a minion restarted twice a minute apart: two highstates",
		conf: "reactor:\n  - 'salt/minion/*/start': highstate.sls\n",
		steps: []step{
			startStep(0, "web1"), retStep(20*time.Second, j1, "web1", true),
			startStep(40*time.Second, "web1"), retStep(20*time.Second, j2, "web1", true),
		},
		want: map[string]int{"highstate": 2},
		long: true,
	},
	{
		name: "a highstate that restarts the minion: one",
		conf: "reactor:\n  - 'salt/minion/*/start': highstate.sls\n",
		steps: []step{
			startStep(0, "web1"),
			startStep(2*time.Second, "web1"), // the highstate restarted it: held
			retStep(time.Second, j1, "web1", true),
		},
		want: map[string]int{"highstate": 1},
		held: map[string]float64{"loop_guard_minion_start": 1},
	},
	{
		name: "a highstate that restarts the minion and never returns; a genuine restart a minute later: two",
		conf: "reactor:\n  - 'salt/minion/*/start': highstate.sls\n",
		steps: []step{
			startStep(0, "web1"),
			startStep(2*time.Second, "web1"), // the highstate restarted it, killing the job: held
			startStep(time.Minute, "web1"),   // a genuine restart: J1 will never return
		},
		want: map[string]int{"highstate": 2},
		held: map[string]float64{"loop_guard_minion_start": 1},
		long: true,
	},
	{
		name: "a highstate that restarts the minion, guard: minion: one", local: true,
		conf: "reactor:\n  - 'salt/minion/*/start':\n      sls: highstate.sls\n      guard: minion\n",
		steps: []step{
			startStep(0, "web1"),
			startStep(2*time.Second, "web1"),
			retStep(time.Second, j1, "web1", true),
		},
		want: map[string]int{"highstate": 1},
		held: map[string]float64{"loop_guard_minion": 1},
	},
	{
		name: "per-minion streams are never thinned while their jobs run",
		conf: "reactor:\n  - 'myco/step': step.sls\n",
		steps: func() []step {
			var s []step
			for i := range 5 {
				for _, m := range []string{"web1", "web2", "web3"} {
					s = append(s, step{time.Duration(i) * 10 * time.Millisecond, "myco/step", `{"id": "` + m + `"}`})
				}
			}
			return s
		}(),
		want: map[string]int{"step": 15},
	},
	{
		name: "a reaction that fires its own trigger stops at the hop limit; another rule on the tag still reacts",
		conf: "reactor:\n  - 'myco/loop': loop.sls\n  - 'myco/loop': watch.sls\n",
		steps: func() []step {
			var s []step
			for range 5 { // the master sends each fired event back, without a header
				s = append(s, step{10 * time.Millisecond, "myco/loop", `{"id": "web1"}`})
			}
			return s
		}(),
		want: map[string]int{"again": 4, "watch": 5},
		held: map[string]float64{"hop_limit": 1},
	},
	{
		name: "the revert through state.orchestrate: held while the orchestration runs and settles",
		conf: "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file': orch.sls\n",
		steps: []step{
			beaconStep(0, "web1"),                    // genuine: orchestrate J1 (its sub-job is not seen)
			beaconStep(500*time.Millisecond, "web1"), // the sub-job's write: held (guard: minion for orchestration)
			{time.Second, "salt/run/" + j1 + "/ret", `{"fun": "runner.state.orchestrate", "jid": "` + j1 + `", "success": true, "user": "salt"}`},
			beaconStep(800*time.Millisecond, "web1"), // late: held (settling)
			beaconStep(3*time.Second, "web1"),        // a genuine second change
		},
		want: map[string]int{"orch": 2},
		held: map[string]float64{"loop_guard_minion": 2},
	},
	{
		name: "guard: off reverts the revert's own beacon", local: true,
		conf:  "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file':\n      sls: revert.sls\n      guard: off\n",
		steps: []step{beaconStep(0, "web1"), beaconStep(200*time.Millisecond, "web1")},
		want:  map[string]int{"revert": 2},
	},
}

// TestLoopGuardScenariosReplicas runs the matrix's scenarios of seconds on
// three replicas sharing the loop guard's state (a key-value bucket on an
// embedded server), each event on the next replica in turn as a shared
// consumer hands them out: the counts are one daemon's.
func TestLoopGuardScenariosReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: seconds per scenario")
	}
	for _, c := range loopGuardScenarios {
		if c.long || c.local {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			// Each scenario has a server of its own and spends its time
			// waiting between events: they run side by side.
			t.Parallel()
			srv, _ := natstest.Start(t)
			drv := &saltDriver{noJID: c.noJID}
			var ms []*Metrics
			var rs []*Reactor
			var handled sync.WaitGroup
			ctx := context.Background()
			var states []*kv.State
			var seen []chan string
			for range 3 {
				st, watch := natstest.SharedState(t, srv)
				g := guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute, Shared: st})
				marks := make(chan string, len(c.steps))
				watch(func(key string, value []byte, deleted bool) {
					if strings.HasPrefix(key, "test.synced.") {
						marks <- key
						return
					}
					g.ApplyShared(key, value, deleted)
				})
				m := NewMetrics(prometheus.NewRegistry())
				d, err := New(scenarioEngine(t, c.conf), Options{Driver: drv, Lanes: 4, Block: true, Metrics: m, Guard: g,
					OnDone: func(Delivery) { handled.Done() }})
				if err != nil {
					t.Fatal(err)
				}
				d.Start(ctx)
				ms, rs = append(ms, m), append(rs, d)
				states, seen = append(states, st), append(seen, marks)
			}
			for i, s := range c.steps {
				time.Sleep(s.after)
				handled.Add(1)
				rs[i%len(rs)].Submit(ctx, Delivery{Body: s.body()})
				handled.Wait()
				// What the replica wrote reaches the others before the
				// next event, as the bridge's events come further apart.
				synced(t, states, seen, i)
			}
			for _, d := range rs {
				if err := d.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c.check(t, drv, ms)
		})
	}
}

// synced waits until every replica's guard has what each replica wrote to
// the shared state so far: each one's writes confirmed by the server, then
// a mark written after them seen by every replica's watch, which hands
// the bucket's changes over in order.
func synced(t *testing.T, states []*kv.State, seen []chan string, step int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, st := range states {
		if err := st.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mark := fmt.Sprintf("test.synced.%d", step)
	states[0].Put(mark, []byte("1"), time.Minute)
	for i, marks := range seen {
		select {
		case got := <-marks:
			if got != mark {
				t.Fatalf("replica %d saw mark %s, want %s", i, got, mark)
			}
		case <-ctx.Done():
			t.Fatalf("replica %d did not see the shared state's mark %s within 10s", i, mark)
		}
	}
}
