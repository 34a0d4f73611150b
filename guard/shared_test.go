package guard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
)

// sharedGuards runs an embedded NATS server and returns a function that
// makes guards sharing its state bucket, each with its own connection (a
// replica), loaded before it returns.
func sharedGuards(t *testing.T) func(Options) *Guard {
	t.Helper()
	srv, _ := natstest.Start(t)
	return func(o Options) *Guard {
		t.Helper()
		st, watch := natstest.SharedState(t, srv)
		o.Shared = st
		g := New(o)
		watch(g.ApplyShared)
		return g
	}
}

// eventually waits up to 5 seconds for fn to hold.
func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	wait.Until(t, 5*time.Second, what, fn)
}

// hasEarlyReturn reports whether g recorded a return of jid that came
// before the job's own record.
func hasEarlyReturn(g *Guard, jid string) bool {
	g.jobs.mu.Lock()
	defer g.jobs.mu.Unlock()
	_, ok := g.jobs.early[jid]
	return ok
}

// knowsJob reports whether g follows job jid's returns.
func knowsJob(g *Guard, jid string) bool {
	g.jobs.mu.Lock()
	defer g.jobs.mu.Unlock()
	return len(g.jobs.byJID[jid]) > 0
}

// TestSharedGuardJobLinked: a job one replica started holds its reaction
// on the others; a return another replica sees releases it everywhere
// after the settle window; a replica started afterwards loads it all.
func TestSharedGuardJobLinked(t *testing.T) {
	newGuard := sharedGuards(t)
	o := Options{Settle: 2 * time.Second, JobTimeout: time.Minute}
	g := []*Guard{newGuard(o), newGuard(o), newGuard(o)}
	// phase is the guard's phase for a beacon of minion at: the settle
	// window is over at a time past it, without waiting for it.
	phase := func(g *Guard, minion string, at time.Time) string {
		_, p, _ := beaconHeldAt(g, minion, at)
		return p
	}
	now := func(time.Duration) time.Time { return time.Now() }
	cases := []struct {
		name   string
		act    func()
		minion string
		at     func(time.Duration) time.Time
		want   [3]string
	}{
		{"started on replica 0", func() {
			g[0].Started("ev-1", Reaction{"revert.sls", "revert"}, "jid1", []string{"web1"}, time.Now())
		}, "web1", now, [3]string{"job running", "job running", "job running"}},
		{"returned on replica 2", func() {
			if !g[2].Returned("jid1", "web1", OutcomeOK, time.Now()) {
				t.Error("replica 2 did not know the job")
			}
		}, "web1", now, [3]string{"settling", "settling", "settling"}},
		{"settle window over", func() {}, "web1", func(settle time.Duration) time.Time { return time.Now().Add(settle) }, [3]string{"", "", ""}},
		// The return overtakes the job's record: replica 1 keeps it (a
		// return of a job no replica recorded is not shared) and shares it
		// once replica 0's record of the dispatch reaches it.
		{"early return on replica 1", func() {
			g[1].Returned("jid2", "web4", OutcomeOK, time.Now())
			if !hasEarlyReturn(g[1], "jid2") {
				t.Error("replica 1 did not keep the return of a job it does not know yet")
			}
			g[0].Started("ev-2", Reaction{"revert.sls", "revert"}, "jid2", []string{"web4"}, time.Now())
		}, "web4", now, [3]string{"settling", "settling", "settling"}},
	}
	for _, c := range cases {
		c.act()
		for i := range g {
			eventually(t, fmt.Sprintf("%s: replica %d phase %q", c.name, i, c.want[i]), func() bool { return phase(g[i], c.minion, c.at(o.Settle)) == c.want[i] })
		}
	}
	g[0].Started("ev-3", Reaction{"revert.sls", "revert"}, "jid3", []string{"web2"}, time.Now())
	eventually(t, "replica 1 sees jid3", func() bool { _, _, ok := beaconHeld(g[1], "web2"); return ok })
	// A replica that starts now (or restarts) continues with the state.
	late := newGuard(o)
	if jid, p, ok := beaconHeld(late, "web2"); !ok || p != "job running" || jid != "jid3" {
		t.Fatalf("a new replica: jid=%q phase=%q held=%v, want jid3 job running", jid, p, ok)
	}
	// A job's timeout is reported once: by the replica that started it,
	// or by another when that one is gone (replica 2 stopped taking part).
	g[2].Started("ev-4", Reaction{"revert.sls", "revert"}, "jid4", []string{"web3"}, time.Now())
	eventually(t, "the new replica sees jid4", func() bool { _, _, ok := beaconHeld(late, "web3"); return ok })
	timedOut := time.Now().Add(time.Minute + 2*time.Second)
	for _, c := range []struct {
		name string
		g    *Guard
		at   time.Time
		want string
	}{
		{"replica 0", g[0], timedOut, "[jid3]"},
		{"the new replica, in the grace", late, timedOut, "[]"},
		{"the new replica, after the grace", late, timedOut.Add(time.Minute), "[jid4]"},
		{"replica 1", g[1], timedOut.Add(time.Minute), "[]"},
	} {
		var jids []string
		for _, x := range c.g.TakeExpired(c.at) {
			jids = append(jids, x.JID)
		}
		if got := fmt.Sprint(jids); got != c.want {
			t.Errorf("%s reports timeouts %s, want %s", c.name, got, c.want)
		}
	}
}

// TestSharedThrottle: the throttle counts the replicas' reactions
// together, and a replica started later counts on.
func TestSharedThrottle(t *testing.T) {
	newGuard := sharedGuards(t)
	g := []*Guard{newGuard(Options{}), newGuard(Options{}), newGuard(Options{})}
	for _, tc := range []struct {
		key   string
		count int
		calls int
	}{{"web1", 3, 12}, {"web2", 1, 5}, {"web3", 5, 5}} {
		var allowed atomic.Int32
		var wg sync.WaitGroup
		for i := range tc.calls {
			wg.Go(func() {
				if g[i%3].Throttle("r0", tc.key, tc.count, time.Hour, time.Now()) {
					allowed.Add(1)
				}
			})
		}
		wg.Wait()
		if got := int(allowed.Load()); got != min(tc.count, tc.calls) {
			t.Errorf("%s: %d allowed of %d, want %d", tc.key, got, tc.calls, min(tc.count, tc.calls))
		}
	}
	late := newGuard(Options{})
	if late.Throttle("r0", "web1", 3, time.Hour, time.Now()) {
		t.Error("a new replica allowed a fourth reaction for web1")
	}
	if !late.Throttle("r0", "web3", 6, time.Hour, time.Now()) {
		t.Error("a new replica refused the sixth of six for web3")
	}
}

// TestSharedDebounce: events of one key held on several replicas fire
// once, on the replica holding the last one; the others release theirs
// as replaced.
func TestSharedDebounce(t *testing.T) {
	newGuard := sharedGuards(t)
	g := []*Guard{newGuard(Options{}), newGuard(Options{}), newGuard(Options{})}
	var mu sync.Mutex
	var fired []string
	released := map[string]bool{}
	// Each event goes to the next replica once the one before is in
	// hand everywhere: its replica saw its own record come back, and the
	// replica holding the previous event released it as replaced.
	for i := range 6 {
		body := fmt.Sprintf("event %d", i)
		g[i%3].Debounce("r0", "web1", []byte(body), 0, 500*time.Millisecond, func(abandon bool) {
			mu.Lock()
			defer mu.Unlock()
			released[body] = !abandon
		}, func(b []byte, _ int, let func(bool)) {
			mu.Lock()
			fired = append(fired, string(b))
			mu.Unlock()
			let(false)
		})
		eventually(t, body+"'s record back on its replica", func() bool { return debounceSeen(g[i%3], "r0", "web1") })
		if i > 0 {
			prev := fmt.Sprintf("event %d", i-1)
			eventually(t, prev+" released as replaced", func() bool { mu.Lock(); defer mu.Unlock(); return released[prev] })
		}
	}
	// Every event is let go once: five replaced, the last fired. A second
	// fire would let its event go too, before the count is complete.
	eventually(t, "all 6 events let go", func() bool { mu.Lock(); defer mu.Unlock(); return len(released) == 6 })
	mu.Lock()
	defer mu.Unlock()
	if len(fired) != 1 || fired[0] != "event 5" {
		t.Fatalf("fired %q, want the last event once", fired)
	}
	if len(released) != 6 {
		t.Fatalf("released %v, want all 6 events", released)
	}
}

// debounceSeen reports whether g holds an event of rule and key whose
// record the shared state handed back.
func debounceSeen(g *Guard, rule, key string) bool {
	g.debounces.mu.Lock()
	defer g.debounces.mu.Unlock()
	st := g.debounces.states[ruleKey{rule, key}]
	return st != nil && st.seen
}

// TestSharedExpectedEvent: an event a reaction on one replica is expected
// to fire gets its hop count on another, and only once.
func TestSharedExpectedEvent(t *testing.T) {
	newGuard := sharedGuards(t)
	g := []*Guard{newGuard(Options{}), newGuard(Options{})}
	g[0].ExpectEvent("myco/loop", Fired{Hop: 2, Cause: "myco/start", By: Reaction{"loop.sls", "again"}}, time.Now())
	eventually(t, "replica 1 expects the event", func() bool {
		return g[1].counts().expected == 1
	})
	if f := g[1].HopOf("myco/loop", time.Now()); f.Hop != 2 || f.Cause != "myco/start" || f.By != (Reaction{"loop.sls", "again"}) {
		t.Fatalf("replica 1: %+v", f)
	}
	eventually(t, "replica 0 forgets the used expectation", func() bool {
		return g[0].counts().expected == 0
	})
	if f := g[0].HopOf("myco/loop", time.Now()); f.Hop != 0 {
		t.Fatalf("replica 0: hop %d for a used expectation", f.Hop)
	}
}

// TestGuardExpiresByTime: the guard forgets returns of unknown jobs,
// entries and throttle windows by time, whatever their number.
func TestGuardExpiresByTime(t *testing.T) {
	g := New(Options{Settle: time.Second, JobTimeout: time.Minute})
	now := time.Now()
	for i := range 100 {
		g.Returned(fmt.Sprintf("jid%d", i), "web1", OutcomeOK, now)
		g.Started("", Reaction{"f.sls", "r"}, fmt.Sprintf("job%d", i), []string{fmt.Sprintf("m%d", i)}, now)
		g.Throttle("r0", fmt.Sprintf("k%d", i), 1, time.Minute, now)
		g.ExpectEvent(fmt.Sprintf("t%d", i), Fired{Hop: 1, Cause: "x"}, now)
	}
	// A newer job of the same reaction and minion replaces the older.
	g.Started("", Reaction{"f.sls", "r"}, "job0b", []string{"m0"}, now.Add(time.Millisecond))
	g.jobs.mu.Lock()
	_, kept := g.jobs.byJID["job0"]
	g.jobs.mu.Unlock()
	if c := g.counts(); kept || c.jobs != 100 {
		t.Fatalf("jobs: %d, job0 kept after its entry was replaced", c.jobs)
	}
	g.TakeExpired(now.Add(30 * time.Second))
	if c := g.counts(); c.early != 100 || c.entries != 100 || c.throttles != 100 || c.expected != 100 {
		t.Fatalf("forgot too early: %+v", c)
	}
	g.TakeExpired(now.Add(2 * time.Minute))
	if c := g.counts(); c != (guardCounts{}) {
		t.Fatalf("left: %+v", c)
	}
}

// failingState is a shared state that cannot be written.
type failingState struct{ updates atomic.Int32 }

func (*failingState) Put(string, []byte, time.Duration) {}
func (*failingState) Delete(string, time.Duration)      {}
func (f *failingState) Update(context.Context, string, time.Duration, func([]byte) ([]byte, bool)) (bool, error) {
	f.updates.Add(1)
	return false, fmt.Errorf("nats: timeout")
}
func (*failingState) Get(context.Context, string) ([]byte, bool, error) {
	return nil, false, fmt.Errorf("nats: timeout")
}
func (*failingState) Flush(context.Context) error { return fmt.Errorf("nats: timeout") }

// TestThrottleSharedStateDown: while the shared state fails, the throttle
// asks it again for SharedWait, then counts in the replica, without
// asking again per event.
func TestThrottleSharedStateDown(t *testing.T) {
	st := &failingState{}
	g := New(Options{Shared: st, SharedWait: 300 * time.Millisecond})
	start := time.Now()
	allowed := 0
	for range 10 {
		if g.Throttle("r0", "web1", 3, time.Hour, time.Now()) {
			allowed++
		}
	}
	took := time.Since(start)
	if allowed != 3 || st.updates.Load() < 2 || took < 300*time.Millisecond || took > 2*time.Second {
		t.Fatalf("%d allowed (want 3), %d shared updates tried (want a few, within the first call), %v (want SharedWait, once)", allowed, st.updates.Load(), took)
	}
}

// flakyState fails its first updates, as a bucket does while it elects
// a new leader, and then works.
type flakyState struct {
	SharedState
	fail atomic.Int32
}

func (f *flakyState) Update(ctx context.Context, key string, ttl time.Duration, fn func([]byte) ([]byte, bool)) (bool, error) {
	if f.fail.Add(-1) >= 0 {
		return false, fmt.Errorf("reading shared state: nats: no responders available for request")
	}
	return f.SharedState.Update(ctx, key, ttl, fn)
}

// TestThrottleWaitsForSharedState: a throttle whose shared state fails for
// a moment asks again and counts with the other replicas, rather than
// alone (where three replicas would allow three times the count).
func TestThrottleWaitsForSharedState(t *testing.T) {
	newGuard := sharedGuards(t)
	a := newGuard(Options{})
	if !a.Throttle("r0", "web1", 2, time.Hour, time.Now()) {
		t.Fatal("the first reaction was refused")
	}
	b := newGuard(Options{SharedWait: 5 * time.Second})
	fl := &flakyState{SharedState: b.sh.st()}
	fl.fail.Store(3)
	b.sh.state.Store(&stateRef{fl})
	if !b.Throttle("r0", "web1", 2, time.Hour, time.Now()) {
		t.Fatal("the second reaction was refused")
	}
	if a.Throttle("r0", "web1", 2, time.Hour, time.Now()) {
		t.Fatal("a third reaction was allowed: the second replica counted alone")
	}
	if fl.fail.Load() >= 0 {
		t.Fatalf("the failing updates were not all tried (%d left)", fl.fail.Load()+1)
	}
}

// countingState counts the j and r records (job starts and returns)
// written through it.
type countingState struct {
	SharedState
	returns atomic.Int64
}

func (c *countingState) Put(key string, value []byte, ttl time.Duration) {
	if key[0] == kindReturns || key[0] == kindJob {
		c.returns.Add(1)
	}
	c.SharedState.Put(key, value, ttl)
}

// TestSharedReturnsGathered: job starts and the returns of those jobs go
// to the shared state a few hundred per record, not one write each, and
// another replica learns every one of them; returns of jobs no replica
// started (most of a master's) stay with the replica that handled them.
func TestSharedReturnsGathered(t *testing.T) {
	newGuard := sharedGuards(t)
	o := Options{Settle: time.Minute, JobTimeout: time.Minute}
	a, b := newGuard(o), newGuard(o)
	counter := &countingState{SharedState: b.sh.st()}
	b.sh.state.Store(&stateRef{counter})
	const n = 1200
	now := time.Now()
	for i := range n {
		b.Returned(fmt.Sprintf("other%d", i), "web1", OutcomeOK, now)
	}
	b.FlushShared()
	if got := counter.returns.Load(); got != 0 {
		t.Fatalf("%d records for %d returns of jobs nobody started, want none", got, n)
	}
	for i := range n {
		b.Started("ev", Reaction{"revert.sls", "revert"}, fmt.Sprintf("job%d", i), []string{fmt.Sprintf("m%d", i)}, now)
	}
	for i := range n {
		b.Returned(fmt.Sprintf("job%d", i), fmt.Sprintf("m%d", i), OutcomeOK, now)
	}
	eventually(t, "replica a learns every job and return", func() bool {
		if a.counts().jobs < n {
			return false
		}
		for _, i := range []int{0, n / 2, n - 1} {
			if _, phase, _ := beaconHeld(a, fmt.Sprintf("m%d", i)); phase != "settling" {
				return false
			}
		}
		return true
	})
	if got := counter.returns.Load(); got < 2*n/returnsMax || got > 2*n/10 {
		t.Fatalf("%d records for %d job starts and %d returns; want them gathered (%d at most per record)", got, n, n, returnsMax)
	}
	if early := a.counts().early; early != 0 {
		t.Errorf("replica a keeps %d early returns: returns of jobs nobody started reached it", early)
	}
}

// guardCounts is how much a guard remembers, by concern.
type guardCounts struct {
	entries, jobs, early, throttles, expected, deadlines int
}

// counts returns what g remembers.
func (g *Guard) counts() guardCounts {
	var c guardCounts
	g.jobs.mu.Lock()
	c.entries, c.jobs, c.early, c.deadlines = len(g.jobs.entries), len(g.jobs.byJID), len(g.jobs.early), len(g.jobs.deadlines.h)
	g.jobs.mu.Unlock()
	g.throttles.mu.Lock()
	c.throttles, c.deadlines = len(g.throttles.counts), c.deadlines+len(g.throttles.deadlines.h)
	g.throttles.mu.Unlock()
	g.hops.mu.Lock()
	for _, l := range g.hops.expected {
		c.expected += len(l)
	}
	c.deadlines += len(g.hops.deadlines.h)
	g.hops.mu.Unlock()
	return c
}

// beaconHeld reports whether the revert reaction is held back from a
// beacon of minion now, with the jid and the phase.
func beaconHeld(g *Guard, minion string) (jid, phase string, ok bool) {
	return beaconHeldAt(g, minion, time.Now())
}

// beaconHeldAt is beaconHeld for a beacon at.
func beaconHeldAt(g *Guard, minion string, at time.Time) (jid, phase string, ok bool) {
	h, ok := g.Held(Reaction{"revert.sls", "revert"}, ModeBeacons, EventOf("salt/beacon/"+minion+"/inotify//etc/important_file", minion, at))
	return h.JID, h.Phase, ok
}

// TestAttachSharedLate: a replica that started without the bucket counts
// alone, and once attached shares what the others hold and writes what
// it does from then on.
func TestAttachSharedLate(t *testing.T) {
	srv, _ := natstest.Start(t)
	st, watch := natstest.SharedState(t, srv)
	a := New(Options{Shared: st})
	watch(a.ApplyShared)
	a.Started("ev-1", Reaction{"revert.sls", "revert"}, "jid1", []string{"web1"}, time.Now())

	late := New(Options{})
	if _, _, held := beaconHeld(late, "web1"); held {
		t.Fatal("a replica without shared state knows another's job")
	}
	if !late.Throttle("r0", "web2", 1, time.Hour, time.Now()) {
		t.Fatal("the alone replica refused the first reaction")
	}
	st2, watch2 := natstest.SharedState(t, srv)
	late.AttachShared(st2)
	watch2(late.ApplyShared)
	eventually(t, "the other replica's job on the late one", func() bool { _, _, held := beaconHeld(late, "web1"); return held })
	late.Started("ev-2", Reaction{"revert.sls", "revert"}, "jid2", []string{"web3"}, time.Now())
	eventually(t, "the late replica's job on the other", func() bool { _, _, held := beaconHeld(a, "web3"); return held })
	if !late.Throttle("r0", "web4", 1, time.Hour, time.Now()) || a.Throttle("r0", "web4", 1, time.Hour, time.Now()) {
		t.Error("a throttle taken on the attached replica is not shared")
	}
}

// TestSharedReturnOfReplacedJob: a job whose entries a newer job of the
// same reaction replaced still has its returns shared, with their
// outcome, and another replica's follower gets them; a return of a job
// nobody started does not reach it.
func TestSharedReturnOfReplacedJob(t *testing.T) {
	newGuard := sharedGuards(t)
	o := Options{Settle: time.Second, JobTimeout: time.Minute}
	a, b := newGuard(o), newGuard(o)
	var mu sync.Mutex
	var got []string
	a.FollowReturns(func(jid, minion string, out Outcome, _ time.Time) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %d", jid, minion, out))
		mu.Unlock()
	})
	now := time.Now()
	r := Reaction{"revert.sls", "revert"}
	a.Started("ev1", r, "J1", []string{"web1"}, now)
	a.Started("ev2", r, "J2", []string{"web1"}, now.Add(time.Millisecond))
	// A last job of another reaction, whose return b shares after the
	// others: once a follows it, a has all b shared before.
	a.Started("ev9", Reaction{"mark.sls", "mark"}, "J9", []string{"web9"}, now)
	eventually(t, "b learns J2", func() bool { jid, _, ok := beaconHeld(b, "web1"); return ok && jid == "J2" })
	eventually(t, "b learns J9", func() bool { return knowsJob(b, "J9") })
	b.Returned("other", "web1", OutcomeFailed, now)
	b.Returned("J1", "web1", OutcomeFailed, now)
	b.Returned("J2", "web1", OutcomeOK, now)
	b.Returned("J9", "web9", OutcomeOK, now)
	eventually(t, "a follows J9's return", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && strings.HasPrefix(got[len(got)-1], "J9 ")
	})
	mu.Lock()
	defer mu.Unlock()
	if s := fmt.Sprint(got); s != "[J1 web1 2 J2 web1 1 J9 web9 1]" {
		t.Fatalf("a followed %s, want J1 failed, J2 ok and J9 ok, not the unknown job", s)
	}
}

// TestProgressReadFromServer: a pending retry one replica recorded, once
// SyncShared returns, is found by another replica that never watched the
// bucket (its watch lagging behind the event the record came with), and
// not once it is cleared or out of time.
func TestProgressReadFromServer(t *testing.T) {
	srv, _ := natstest.Start(t)
	stA, watchA := natstest.SharedState(t, srv)
	a := New(Options{Shared: stA})
	watchA(a.ApplyShared)
	stB, _ := natstest.SharedState(t, srv)
	b := New(Options{Shared: stB}) // no watch: only the server can tell it
	ctx := context.Background()
	now := time.Now()

	a.SetProgress("retry/7/ab/r0/deploy", []byte(`{"attempt":1}`), time.Minute, now)
	a.SetProgress("retry/8/ab/r0/deploy", []byte(`{"attempt":2}`), 2*time.Second, now)
	if err := a.SyncShared(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, key string
		at        time.Time
		want      string
	}{
		{"recorded by the other replica", "retry/7/ab/r0/deploy", now, `{"attempt":1}`},
		{"never recorded", "retry/9/ab/r0/deploy", now, ""},
		{"past its time", "retry/8/ab/r0/deploy", now.Add(3 * time.Second), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok, err := b.Progress(ctx, c.key, c.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := map[bool]string{true: string(v)}[ok]; got != c.want {
				t.Fatalf("got %q (found %v), want %q", got, ok, c.want)
			}
		})
	}
	a.ClearProgress("retry/7/ab/r0/deploy")
	if err := a.SyncShared(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.Progress(ctx, "retry/7/ab/r0/deploy", now); ok || err != nil {
		t.Fatalf("a cleared record was found: %q, %v", v, err)
	}
}

// TestProgressServerDown: a replica that cannot ask the shared state says
// so rather than report no pending retry in silence.
func TestProgressServerDown(t *testing.T) {
	g := New(Options{Shared: &failingState{}})
	if _, ok, err := g.Progress(context.Background(), "retry/1/ab/r0/deploy", time.Now()); ok || err == nil {
		t.Fatalf("found %v, err %v; want an error", ok, err)
	}
	if err := g.SyncShared(context.Background()); err == nil {
		t.Fatal("SyncShared on a failing state returned no error")
	}
}
