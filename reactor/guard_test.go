package reactor

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/guard"
)

// jidDriver answers every dispatch with a new jid.
type jidDriver struct {
	mu    sync.Mutex
	n     int
	calls []string
}

func (j *jidDriver) Name() string              { return "jid" }
func (j *jidDriver) Supports(string) bool      { return true }
func (*jidDriver) Close(context.Context) error { return nil }

func (j *jidDriver) Do(_ context.Context, a actions.Action) (actions.Result, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n++
	j.calls = append(j.calls, a.Tag+" "+a.Chunk.Str("__id__"))
	return actions.Result{JID: fmt.Sprintf("2026%016d", j.n)}, nil
}

func (j *jidDriver) count() int { j.mu.Lock(); defer j.mu.Unlock(); return len(j.calls) }
func (j *jidDriver) reset()     { j.mu.Lock(); defer j.mu.Unlock(); j.calls = nil }
func (j *jidDriver) snapshot() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

const revertSLS = "revert:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n    - args:\n      - mods: important_file\n"

func beacon(id string) []byte {
	return []byte(`{"tag": "salt/beacon/` + id + `/inotify//etc/important_file", "data": {"id": "` + id + `", "change": "IN_MODIFY", "path": "/etc/important_file"}}`)
}

func jobRet(jid, id string) []byte {
	return []byte(`{"tag": "salt/job/` + jid + `/ret/` + id + `", "data": {"id": "` + id + `", "jid": "` + jid + `", "fun": "state.apply", "success": true, "retcode": 0}}`)
}

// TestLoopGuardJobLinked: the reaction's own consequences (the beacon fired
// again by the state run) are suppressed until its job returned and the
// settle window passed; a genuine change afterwards reacts again.
func TestLoopGuardJobLinked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file': revert.sls\n", map[string]string{"revert.sls": revertSLS})
		drv := &jidDriver{}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(eng, Options{Driver: drv, Lanes: 1, Block: true, Metrics: m, Guard: guard.New(guard.Options{Settle: 5 * time.Second, JobTimeout: time.Minute})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		submit := func(b []byte) { d.Submit(ctx, Delivery{Body: b}); synctest.Wait() }

		submit(beacon("web1")) // genuine change: state.apply, jid 1
		submit(beacon("web1")) // the state run rewrites the file: suppressed (job running)
		submit(beacon("web2")) // another minion is not held
		pass(10 * time.Second)
		submit(beacon("web1"))                         // still running after 10s: suppressed
		submit(jobRet("20260000000000000001", "web1")) // the job returns
		pass(4 * time.Second)
		submit(beacon("web1")) // within the settle window: suppressed
		pass(2 * time.Second)
		submit(beacon("web1")) // a genuine change after the window: reacts
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"salt/beacon/web1/inotify//etc/important_file revert",
			"salt/beacon/web2/inotify//etc/important_file revert",
			"salt/beacon/web1/inotify//etc/important_file revert",
		}
		if fmt.Sprint(drv.snapshot()) != fmt.Sprint(want) {
			t.Fatalf("dispatched %q, want %q", drv.snapshot(), want)
		}
		if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("loop_guard_beacon")); v != 3 {
			t.Fatalf("loop_guard suppressions = %v, want 3", v)
		}
	})
}

// TestLoopGuardJobTimeout: without returns the guard lets go after the job
// timeout.
func TestLoopGuardJobTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := guard.New(guard.Options{Settle: time.Second, JobTimeout: time.Minute})
		now := time.Now()
		g.Started("ev-1", guard.Reaction{Rule: "f.sls", ID: "r"}, "jid1", []string{"web1"}, now)
		if _, phase, held := beaconHeld(g, "f.sls", "r", "web1", now.Add(59*time.Second)); !held || phase != "job running" {
			t.Fatalf("held=%v phase=%q before the timeout", held, phase)
		}
		if _, _, held := beaconHeld(g, "f.sls", "r", "web1", now.Add(61*time.Second)); held {
			t.Fatal("still held after the job timeout")
		}
		want := []guard.Expired{{Rule: "f.sls", ID: "r", Minion: "web1", JID: "jid1", EventID: "ev-1"}}
		if got := g.TakeExpired(now.Add(61 * time.Second)); !reflect.DeepEqual(got, want) {
			t.Fatalf("expired %+v, want %+v (with the id of the event that started the job)", got, want)
		}
		if _, _, held := beaconHeld(g, "other.sls", "r", "web1", now); held {
			t.Fatal("another reaction is held")
		}
	})
}

// TestThrottleAndDebounce: throttle allows N per period per key; debounce
// reacts once with the last event after a quiet period.
func TestThrottleAndDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, `reactor:
  - 'thr/*':
      sls: r.sls
      throttle: {count: 2, per: 10s, key: data.id}
  - 'deb/*':
      sls: r.sls
      debounce: 3s
  - 'cond/*':
      sls: r.sls
      when: data.change == "IN_MODIFY"
`, map[string]string{"r.sls": "r:\n  runner.test.arg:\n    - args:\n      - n: {{ .data.n }}\n"})
		drv := &jidDriver{}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(eng, Options{Driver: drv, Lanes: 1, Block: true, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		ev := func(tag, id string, n int, change string) {
			d.Submit(ctx, Delivery{Body: []byte(fmt.Sprintf(`{"tag": %q, "data": {"id": %q, "n": %d, "change": %q}}`, tag, id, n, change))})
			synctest.Wait()
		}
		for i := range 5 {
			ev("thr/x", "web1", i, "")
		}
		ev("thr/x", "web2", 9, "")
		pass(11 * time.Second)
		ev("thr/x", "web1", 10, "")
		if drv.count() != 4 {
			t.Fatalf("throttle: %d dispatched, want 2 (web1) + 1 (web2) + 1 after the period", drv.count())
		}
		if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("throttle")); v != 3 {
			t.Fatalf("throttle suppressions = %v", v)
		}
		drv.reset()
		for i := range 4 {
			ev("deb/x", "web1", i, "")
			pass(time.Second)
		}
		if drv.count() != 0 {
			t.Fatalf("debounce reacted during the burst: %v", drv.snapshot())
		}
		pass(3 * time.Second)
		if drv.count() != 1 {
			t.Fatalf("debounce: %d dispatched after the quiet period, want 1", drv.count())
		}
		drv.reset()
		ev("cond/x", "web1", 1, "IN_IGNORED")
		ev("cond/x", "web1", 2, "IN_MODIFY")
		if drv.count() != 1 {
			t.Fatalf("when: %d dispatched, want 1", drv.count())
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHopLimitForFiredEvents: a reaction that fires its own trigger tag
// (runner event.send) is followed for MaxHops events, then suppressed.
func TestHopLimitForFiredEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'myco/loop': loop.sls\n", map[string]string{
			"loop.sls": "again:\n  runner.event.send:\n    - args:\n      - tag: myco/loop\n      - data: {n: 1}\n"})
		drv := &jidDriver{}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(eng, Options{Driver: drv, Lanes: 1, Block: true, Metrics: m, MaxHops: 3})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		// Each dispatch would make Salt fire myco/loop again; the test plays
		// the master and feeds it back, with no header, as the bridge would.
		for range 5 {
			d.Submit(ctx, Delivery{Body: []byte(`{"tag": "myco/loop", "data": {"n": 1}}`)})
			synctest.Wait()
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// hop 0 (genuine), then hops 1, 2, 3 react; hop 4 is suppressed, which
		// also ends the chain (no new expectation is recorded).
		if drv.count() != 4 {
			t.Fatalf("%d reactions, want 4 (the original and 3 hops)", drv.count())
		}
		if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("hop_limit")); v != 1 {
			t.Fatalf("hop_limit suppressions = %v, want 1", v)
		}
	})
}

// TestGenuineEventAfterChain: once the chain was stopped, a new event of the
// same tag is genuine again.
func TestGenuineEventAfterChain(t *testing.T) {
	g := guard.New(guard.Options{})
	now := time.Now()
	g.ExpectEvent("myco/loop", guard.Fired{Hop: 4, Cause: "myco/loop"}, now)
	if f := g.HopOf("myco/loop", now); f.Hop != 4 {
		t.Fatalf("hop = %d", f.Hop)
	}
	if f := g.HopOf("myco/loop", now); f.Hop != 0 {
		t.Fatalf("second event hop = %d, want 0 (expectation used up)", f.Hop)
	}
}

// TestReturnBeforeStarted: a return handled on another lane before the
// dispatching lane recorded the job still releases the guard.
func TestReturnBeforeStarted(t *testing.T) {
	g := guard.New(guard.Options{Settle: time.Second, JobTimeout: time.Hour})
	now := time.Now()
	g.Returned("jid9", "db1", guard.OutcomeOK, now)
	g.Started("", guard.Reaction{Rule: "f.sls", ID: "r"}, "jid9", []string{"db1", "db2"}, now)
	if _, phase, held := beaconHeld(g, "f.sls", "r", "db1", now.Add(500*time.Millisecond)); !held || phase != "settling" {
		t.Fatalf("db1: held=%v phase=%q, want settling", held, phase)
	}
	if _, _, held := beaconHeld(g, "f.sls", "r", "db1", now.Add(2*time.Second)); held {
		t.Fatal("db1 still held after the settle window")
	}
	if _, phase, held := beaconHeld(g, "f.sls", "r", "db2", now.Add(2*time.Second)); !held || phase != "job running" {
		t.Fatalf("db2: held=%v phase=%q, want job running", held, phase)
	}
}

// TestGuardMergedJobEarlyReturns: a driver ran two reactions as one job
// (one jid, each reaction its own minion); returns that arrive before the
// reactions are recorded are kept for the reaction of their minion, not
// used up by the first one recorded.
func TestGuardMergedJobEarlyReturns(t *testing.T) {
	g := guard.New(guard.Options{Settle: time.Second, JobTimeout: time.Minute})
	now := time.Now()
	const jid = "20261123000000000001"
	g.Returned(jid, "m1", guard.OutcomeOK, now)
	g.Returned(jid, "m2", guard.OutcomeOK, now)
	g.Started("", guard.Reaction{Rule: "r.sls", ID: "highstate"}, jid, []string{"m1"}, now)
	g.Started("", guard.Reaction{Rule: "r.sls", ID: "highstate"}, jid, []string{"m2"}, now)
	for _, m := range []string{"m1", "m2"} {
		_, phase, held := beaconHeld(g, "r.sls", "highstate", m, now)
		if !held || phase != "settling" {
			t.Errorf("%s: held=%v phase=%q, want settling (its return came early)", m, held, phase)
		}
		if _, _, held := beaconHeld(g, "r.sls", "highstate", m, now.Add(2*time.Second)); held {
			t.Errorf("%s: still held after the settle window", m)
		}
	}
}

// TestDebounceHoldsTheAcknowledgement: a debounced JetStream event is
// acknowledged only once its debounce fired (or a newer event replaced
// it), and a stop during the quiet period refuses it (Nak) instead of
// acknowledging it, so JetStream redelivers it (issue 12).
func TestDebounceHoldsTheAcknowledgement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, `reactor:
  - 'deb/*':
      sls: r.sls
      debounce: 3s
`, map[string]string{"r.sls": "r:\n  runner.test.arg:\n    - args:\n      - n: {{ .data.n }}\n"})
		drv := &jidDriver{}
		d, err := New(eng, Options{Driver: drv, Lanes: 1, Block: true, Guard: guard.New(guard.Options{Disabled: true})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		var mu sync.Mutex
		acked, naked := map[int]int{}, map[int]int{}
		ev := func(n int) {
			d.Submit(ctx, Delivery{Body: fmt.Appendf(nil, `{"tag": "deb/x", "data": {"id": "web1", "n": %d}}`, n), Redelivers: true,
				Settle: func(o Outcome) {
					mu.Lock()
					defer mu.Unlock()
					switch o {
					case Ack:
						acked[n]++
					case Retry:
						naked[n]++
					}
				}})
			synctest.Wait()
		}
		state := func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprintf("acked %v naked %v", acked, naked) }
		ev(1)
		if s := state(); s != "acked map[] naked map[]" {
			t.Fatalf("while held: %s", s)
		}
		pass(time.Second)
		ev(2) // replaces 1, which is acknowledged: 2 stands for it
		if s := state(); s != "acked map[1:1] naked map[]" {
			t.Fatalf("after a newer event: %s", s)
		}
		pass(3 * time.Second)
		if s := state(); s != "acked map[1:1 2:1] naked map[]" || drv.count() != 1 {
			t.Fatalf("after the quiet period: %s, %d dispatched", s, drv.count())
		}
		ev(3)
		pass(time.Second)
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := state(); s != "acked map[1:1 2:1] naked map[3:1]" || drv.count() != 1 {
			t.Fatalf("after a stop in the quiet period: %s, %d dispatched", s, drv.count())
		}
	})
}

// TestReloadKeepsRuleState: throttle and debounce state stays with its
// rule, not with its position: a reload that inserts a throttled rule above
// another neither lets the old rule's event react again nor suppresses the
// new rule's first event, and a debounce that fires after such a reload
// runs its own rule (issue 20 #4).
func TestReloadKeepsRuleState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		files := map[string]string{
			"a.sls": "a:\n  runner.test.arg:\n    - args: [a]\n",
			"b.sls": "b:\n  runner.test.arg:\n    - args: [b]\n",
			"c.sls": "c:\n  runner.test.arg:\n    - args: [c]\n",
		}
		before := engineWith(t, `reactor:
  - 'thr/*':
      sls: a.sls
      throttle: {count: 1, per: 1h}
  - 'deb/*':
      sls: c.sls
      debounce: 3s
`, files)
		after := engineWith(t, `reactor:
  - 'thr/*':
      sls: b.sls
      throttle: {count: 1, per: 1h}
  - 'deb/*':
      sls: b.sls
      debounce: 3s
  - 'thr/*':
      sls: a.sls
      throttle: {count: 1, per: 1h}
  - 'deb/*':
      sls: c.sls
      debounce: 3s
`, files)
		drv := &jidDriver{}
		d, err := New(before, Options{Driver: drv, Lanes: 1, Block: true, Guard: guard.New(guard.Options{Disabled: true})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		ev := func(tag string) {
			d.Submit(ctx, Delivery{Body: []byte(fmt.Sprintf(`{"tag": %q, "data": {"id": "web1"}}`, tag))})
			synctest.Wait()
		}
		ev("thr/x")
		ev("deb/x") // held by c.sls's debounce across the reload
		if err := d.Reload(after); err != nil {
			t.Fatal(err)
		}
		ev("thr/x")
		pass(4 * time.Second)
		// deb/x went to b.sls's debounce too after the reload: only c's
		// was held before it.
		want := []string{"thr/x a", "thr/x b", "deb/x c"}
		if got := drv.snapshot(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("dispatched %q, want %q", got, want)
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// beaconHeld reports whether reaction (sls, id) is held back from a beacon
// of minion at, with the jid and the phase.
func beaconHeld(g *guard.Guard, sls, id, minion string, at time.Time) (jid, phase string, ok bool) {
	h, ok := g.Held(guard.Reaction{Rule: sls, ID: id}, guard.ModeBeacons, guard.EventOf("salt/beacon/"+minion+"/inotify//etc/important_file", minion, at))
	return h.JID, h.Phase, ok
}
