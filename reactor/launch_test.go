package reactor

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/guard"
)

// slowDriver plays a driver that takes a while to answer (the exec
// driver's salt-run: seconds): each call gets its jid from the inner
// driver when it begins, in the order the calls begin, and returns after
// the delay of its reaction type. It records when each call began and
// ended, and the most calls it had in flight at once.
type slowDriver struct {
	*saltDriver
	delay map[string]time.Duration // by state; "" for the others
	// says makes the driver say its request was written (actions.Sent),
	// as the master and salt-api drivers do, sayAfter after the call
	// began (its wait for a socket or a place in salt-api's queue).
	says     bool
	sayAfter time.Duration

	mu      sync.Mutex
	began   []time.Time
	ended   map[string]time.Time // by the call's "n" argument
	order   []string             // "n" arguments, as the calls began
	busy    int
	maxBusy int
}

func (s *slowDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	res, err := s.saltDriver.Do(ctx, a)
	n := fmt.Sprint(a.Chunk.Str("__id__"), "/", nArg(a))
	s.mu.Lock()
	s.began = append(s.began, time.Now())
	s.order = append(s.order, n)
	s.busy++
	s.maxBusy = max(s.maxBusy, s.busy)
	s.mu.Unlock()
	d, ok := s.delay[a.Chunk.Str("state")]
	if !ok {
		d = s.delay[""]
	}
	if s.says {
		// Written sayAfter after it began; the answer d after that.
		time.AfterFunc(s.sayAfter, func() { actions.Sent(ctx) })
		d += s.sayAfter
	}
	time.Sleep(d)
	s.mu.Lock()
	s.busy--
	if s.ended == nil {
		s.ended = map[string]time.Time{}
	}
	s.ended[n] = time.Now()
	s.mu.Unlock()
	return res, err
}

// SaysSent: the driver says when each request was written, with says.
func (s *slowDriver) SaysSent(string) bool { return s.says }

// nArg is the reaction's "n" keyword argument (the event's number in
// the tests' bursts), "" when it has none.
func nArg(a actions.Action) string {
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return ""
	}
	if v, ok := call.Kwarg.Get("n"); ok {
		return fmt.Sprint(v)
	}
	if v, ok := a.Chunk.Get("n"); ok { // a wheel's keyword argument
		return fmt.Sprint(v)
	}
	return ""
}

// slowReactor starts a reactor of one lane (every minion's events in
// order on it) with inFlight calls per lane, dispatching through drv.
func slowReactor(t *testing.T, conf string, files map[string]string, drv actions.Driver, inFlight int, onDone func(Delivery)) (*Reactor, *Metrics) {
	t.Helper()
	return slowReactorAfter(t, conf, files, drv, inFlight, 0, onDone)
}

// slowReactorAfter is slowReactor with Options.HandOverAfter set.
func slowReactorAfter(t *testing.T, conf string, files map[string]string, drv actions.Driver, inFlight int, after time.Duration, onDone func(Delivery)) (*Reactor, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(engineWith(t, conf, files), Options{Driver: drv, Lanes: 1, QueueSize: 256, Block: true, InFlight: inFlight, HandOverAfter: after, Metrics: m,
		Guard: guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute}), OnDone: onDone})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	return d, m
}

const burstSLS = "step:\n  local.cmd.run:\n    - tgt: {{ .data.id }}\n    - args:\n      - cmd: 'true'\n      - n: {{ .data.n }}\n"

// TestLaneDispatchesInFlight: a burst of one minion's events through a
// driver that takes a second a call completes in about an eighth of the
// time one call at a time takes, the calls beginning in the events'
// order, at most eight at once; each event is acknowledged once its call
// returned, none twice. With --in-flight 1 the lane waits for each call.
// A driver that answers in 10 ms, under the 50 ms hand-over, is waited
// for call by call; with --hand-over-after 0 its calls overlap too, eight
// at a time, and with 2 ms each is handed over 2 ms after it began. A
// driver that says when its request was written is handed over then,
// whatever the wait: its calls overlap, eight at a time, and begin (are
// sent) strictly in the events' order; one whose requests take 60 ms to
// be written (waiting for a socket) is waited for past the 50 ms, so the
// next call begins only once the one before it was written.
func TestLaneDispatchesInFlight(t *testing.T) {
	const n = 32
	for _, c := range []struct {
		inFlight      int
		says          bool
		sayAfter      time.Duration
		delay, after  time.Duration
		least, most   time.Duration
		wantMax       int
		wantHandedOff float64
	}{
		{inFlight: 1, delay: time.Second, least: n * time.Second, most: n * time.Second, wantMax: 1},
		// Four rounds of eight calls, each begun 50 ms after the one before
		// it in its round.
		{inFlight: 8, delay: time.Second, least: n / 8 * time.Second, most: n/8*time.Second + 8*DefaultHandOverAfter, wantMax: 8, wantHandedOff: n},
		// A fast driver: each call waited for, none handed over.
		{inFlight: 8, delay: 10 * time.Millisecond, least: n * 10 * time.Millisecond, most: n * 10 * time.Millisecond, wantMax: 1},
		// At once: four rounds of eight calls begun together.
		{inFlight: 8, delay: 10 * time.Millisecond, after: -1, least: n / 8 * 10 * time.Millisecond, most: n / 8 * 10 * time.Millisecond, wantMax: 8, wantHandedOff: n},
		// After 2 ms: a call of 9 ms begins every 2 ms, five in flight at once.
		{inFlight: 8, delay: 9 * time.Millisecond, after: 2 * time.Millisecond, least: (n-1)*2*time.Millisecond + 9*time.Millisecond, most: (n-1)*2*time.Millisecond + 9*time.Millisecond, wantMax: 5, wantHandedOff: n},
		// Said sent: handed over as each request leaves, with the default
		// wait: four rounds of eight, in order.
		{inFlight: 8, says: true, delay: 10 * time.Millisecond, least: n / 8 * 10 * time.Millisecond, most: n / 8 * 10 * time.Millisecond, wantMax: 8, wantHandedOff: n},
		{inFlight: 8, says: true, delay: time.Second, least: n / 8 * time.Second, most: n / 8 * time.Second, wantMax: 8, wantHandedOff: n},
		// Written 60 ms after it began, then 10 ms to its answer: each
		// call waited for until written, two in flight at most.
		{inFlight: 8, says: true, sayAfter: 60 * time.Millisecond, delay: 10 * time.Millisecond, least: n*60*time.Millisecond + 10*time.Millisecond, most: n*60*time.Millisecond + 10*time.Millisecond, wantMax: 2, wantHandedOff: n},
		// Said sent with --in-flight 1: still one call at a time.
		{inFlight: 1, says: true, delay: 10 * time.Millisecond, least: n * 10 * time.Millisecond, most: n * 10 * time.Millisecond, wantMax: 1},
	} {
		t.Run(fmt.Sprintf("in-flight %d, call %v, hand over after %v, says sent %v", c.inFlight, c.delay, c.after, c.says), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &slowDriver{saltDriver: &saltDriver{}, delay: map[string]time.Duration{"": c.delay}, says: c.says, sayAfter: c.sayAfter}
				var mu sync.Mutex
				acked := map[string]time.Time{}
				d, m := slowReactorAfter(t, "reactor:\n  - 'myco/step': step.sls\n", map[string]string{"step.sls": burstSLS}, drv, c.inFlight, c.after, nil)
				start := time.Now()
				for i := range n {
					name := fmt.Sprint("step/", i)
					d.Submit(context.Background(), Delivery{Body: fmt.Appendf(nil, `{"tag": "myco/step", "data": {"id": "web1", "n": %d}}`, i), Redelivers: true,
						Settle: func(o Outcome) {
							mu.Lock()
							defer mu.Unlock()
							if _, twice := acked[name]; twice || o != Ack {
								t.Errorf("%s settled %v (twice: %v)", name, o, twice)
							}
							acked[name] = time.Now()
						}})
				}
				if err := d.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				if took < c.least || took > c.most {
					t.Errorf("the burst took %v, want %v to %v", took, c.least, c.most)
				}
				var want []string
				for i := range n {
					want = append(want, fmt.Sprint("step/", i))
				}
				got := drv.order
				if c.after < 0 {
					// At once: each call's goroutine starts in order, but
					// two in flight may reach the driver in either order.
					got = slices.Clone(got)
					slices.SortFunc(got, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
				}
				if !slices.Equal(got, want) {
					t.Errorf("calls began in the order %v, want %v", drv.order, want)
				}
				if drv.maxBusy != c.wantMax {
					t.Errorf("%d calls in flight at most, want %d", drv.maxBusy, c.wantMax)
				}
				for _, name := range want {
					if at, ok := acked[name]; !ok || at.Before(drv.ended[name]) {
						t.Errorf("%s acknowledged at %v, its call ended at %v", name, at.Sub(start), drv.ended[name].Sub(start))
					}
				}
				if got := testutil.ToFloat64(m.HandedOver); got != c.wantHandedOff {
					t.Errorf("reactord_dispatches_handed_over_total = %v, want %v", got, c.wantHandedOff)
				}
			})
		})
	}
}

// TestStartNotBehindAuths: a new minion's run of salt/auth events each
// start a slow key.accept wheel (seconds through salt-run); its start
// event, behind them on its lane, has its highstate dispatched while the
// wheels still run, not after all of them.
func TestStartNotBehindAuths(t *testing.T) {
	const auths = 18
	conf := "reactor:\n  - 'salt/auth': accept.sls\n  - 'salt/minion/*/start': highstate.sls\n"
	files := map[string]string{
		"accept.sls":    "accept:\n  wheel.key.accept:\n    - match: {{ .data.id }}\n    - n: {{ .data.n }}\n",
		"highstate.sls": scenarioHigh,
	}
	for _, c := range []struct {
		inFlight int
		most     time.Duration // when the highstate's call began, at the latest
	}{
		{inFlight: 1, most: auths * 2 * time.Second},
		// 18 wheels of 2 s, 8 at a time: the start's call begins in the
		// third round.
		{inFlight: 8, most: 2*2*time.Second + 4*DefaultHandOverAfter},
	} {
		t.Run(fmt.Sprintf("in-flight %d", c.inFlight), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &slowDriver{saltDriver: &saltDriver{}, delay: map[string]time.Duration{"wheel": 2 * time.Second, "": time.Second}}
				d, _ := slowReactor(t, conf, files, drv, c.inFlight, nil)
				start := time.Now()
				for i := range auths {
					d.Submit(context.Background(), Delivery{Body: fmt.Appendf(nil, `{"tag": "salt/auth", "data": {"id": "web1", "act": "pend", "result": true, "n": %d}}`, i)})
				}
				d.Submit(context.Background(), Delivery{Body: []byte(`{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}`)})
				if err := d.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				i := slices.Index(drv.order, "highstate/")
				if i != auths {
					t.Fatalf("calls %v: want the highstate's after the %d wheels", drv.order, auths)
				}
				if at := drv.began[i].Sub(start); at > c.most || (c.inFlight == 1 && at < c.most) {
					t.Errorf("the highstate's call began after %v, want %v at most", at, c.most)
				}
				if c.inFlight > 1 && !drv.began[i].Before(drv.ended[fmt.Sprint("accept/", auths-1)]) {
					t.Errorf("the highstate's call began after the last wheel ended")
				}
			})
		})
	}
}

// TestGuardJudgesDuringDispatch: an event that is a consequence of a
// reaction whose call is still in flight — its beacon, the minion's
// restart, its job's return, the event it fires — is judged as
// when the lane waited for each call: held back, or counted toward the
// hop limit.
func TestGuardJudgesDuringDispatch(t *testing.T) {
	ms := 100 * time.Millisecond
	cases := []struct {
		name  string
		conf  string
		steps []step
		want  map[string]int
		held  map[string]float64
	}{
		{name: "the revert's own beacon", conf: "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file': revert.sls\n",
			steps: []step{beaconStep(0, "web1"), beaconStep(ms, "web1"), beaconStep(0, "web2")},
			want:  map[string]int{"revert": 2}, held: map[string]float64{"loop_guard_beacon": 1}},
		{name: "the minion restarted by its highstate", conf: "reactor:\n  - 'salt/minion/*/start': highstate.sls\n",
			steps: []step{startStep(0, "web1"), startStep(ms, "web1")},
			want:  map[string]int{"highstate": 1}, held: map[string]float64{"loop_guard_minion_start": 1}},
		{name: "its local job's own return", conf: "reactor:\n  - 'salt/job/*/ret/*': step.sls\n",
			steps: []step{retStep(0, "900", "web1", true), retStep(ms, j1, "web1", true)},
			want:  map[string]int{"step": 1}, held: map[string]float64{"loop_guard_job": 1}},
		{name: "the event it fires, to the hop limit", conf: "reactor:\n  - 'myco/loop': loop.sls\n",
			steps: []step{{0, "myco/loop", `{"id": "web1"}`}, {ms, "myco/loop", `{"id": "web1"}`}, {ms, "myco/loop", `{"id": "web1"}`},
				{ms, "myco/loop", `{"id": "web1"}`}, {ms, "myco/loop", `{"id": "web1"}`}},
			want: map[string]int{"again": 4}, held: map[string]float64{"hop_limit": 1}},
	}
	for _, c := range cases {
		for _, inFlight := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s, in-flight %d", c.name, inFlight), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					drv := &slowDriver{saltDriver: &saltDriver{}, delay: map[string]time.Duration{"": time.Second}}
					m := NewMetrics(prometheus.NewRegistry())
					d, err := New(scenarioEngine(t, c.conf), Options{Driver: drv, Lanes: 1, Block: true, InFlight: inFlight, Metrics: m,
						Guard: guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute})})
					if err != nil {
						t.Fatal(err)
					}
					d.Start(context.Background())
					for _, s := range c.steps {
						time.Sleep(s.after)
						d.Submit(context.Background(), Delivery{Body: s.body()})
					}
					if err := d.Stop(context.Background()); err != nil {
						t.Fatal(err)
					}
					scenario{want: c.want, held: c.held}.check(t, drv.saltDriver, []*Metrics{m})
					if ho := testutil.ToFloat64(m.HandedOver); (inFlight > 1) != (ho > 0) {
						t.Errorf("%v calls handed over with --in-flight %d", ho, inFlight)
					}
				})
			})
		}
	}
}

// TestLoopGuardScenariosSlowDriver runs the loop guard's matrix with a
// driver that takes 300 ms to answer, so that the lanes hand their calls
// over and a consequence often arrives while its cause's call is in
// flight: every scenario's counts are unchanged.
func TestLoopGuardScenariosSlowDriver(t *testing.T) {
	for _, c := range loopGuardScenarios {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &slowDriver{saltDriver: &saltDriver{noJID: c.noJID}, delay: map[string]time.Duration{"": 300 * time.Millisecond}}
				m := c.run(t, drv, drv.saltDriver)
				if got := testutil.ToFloat64(m.HandedOver); got != float64(len(drv.began)) {
					t.Errorf("%v calls handed over of %d", got, len(drv.began))
				}
			})
		})
	}
}

// BenchmarkLaneFastDriver measures what the hand-over costs a driver that
// answers at once (every call stays on its lane): one lane, events of one
// minion, with --in-flight 1 and 8.
func BenchmarkLaneFastDriver(b *testing.B) {
	for _, inFlight := range []int{1, 8} {
		b.Run(fmt.Sprintf("in-flight-%d", inFlight), func(b *testing.B) {
			eng := scenarioEngine(b, "reactor:\n  - 'myco/step': step.sls\n")
			var done sync.WaitGroup
			d, err := New(eng, Options{Driver: &saltDriver{}, Lanes: 1, QueueSize: 1024, Block: true, InFlight: inFlight,
				OnDone: func(Delivery) { done.Done() }})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			d.Start(ctx)
			body := []byte(`{"tag": "myco/step", "data": {"id": "web1"}}`)
			b.ResetTimer()
			for range b.N {
				done.Add(1)
				d.Submit(ctx, Delivery{Body: body})
			}
			done.Wait()
			b.StopTimer()
			if err := d.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestDefaultInFlight: a driver that answers at once keeps one call at a
// time per lane (handing its calls over would cost more than it saves);
// one that waits for Salt, or a router with such a driver, gets
// DefaultInFlight.
func TestDefaultInFlight(t *testing.T) {
	for _, c := range []struct {
		name string
		drv  actions.Driver
		want int
	}{
		{"dryrun", actions.NewDryRun(io.Discard), 1},
		{"null", actions.Null{}, 1},
		{"router of quick drivers", actions.Router{Primary: actions.Null{}, Fallback: actions.NewDryRun(io.Discard)}, 1},
		{"router with a slow fallback", actions.Router{Primary: actions.Null{}, Fallback: waitsForSalt{}}, DefaultInFlight},
		{"a driver that waits for Salt", waitsForSalt{}, DefaultInFlight},
	} {
		if got := defaultInFlight(c.drv); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// waitsForSalt stands for a driver that waits for Salt (no AnswersAtOnce).
type waitsForSalt struct{ actions.Null }

func (waitsForSalt) AnswersAtOnce() bool { return false }

// recordingJournal is a poison journal in memory: what each place holds.
type recordingJournal struct {
	mu     sync.Mutex
	places map[int]uint64
}

func (j *recordingJournal) Begin(place int, seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.places[place] = seq
}

func (j *recordingJournal) End(place int, seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.places, place)
}

func (j *recordingJournal) Crashes(uint64) (int, bool) { return 0, false }
func (j *recordingJournal) Parked(uint64)              {}

// inHand lists the events the journal holds, as a crash would find them.
func (j *recordingJournal) inHand() []uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []uint64
	for _, seq := range j.places {
		out = append(out, seq)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestJournalHoldsHandedOverCalls: an event whose driver call was handed
// over stays in the poison journal until the call returns, so that a
// crash in the call counts against it; the lane's own place goes to the
// events after it meanwhile.
func TestJournalHoldsHandedOverCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := &slowDriver{saltDriver: &saltDriver{}, delay: map[string]time.Duration{"": time.Second}}
		j := &recordingJournal{places: map[int]uint64{}}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(engineWith(t, "reactor:\n  - 'myco/step': step.sls\n", map[string]string{"step.sls": burstSLS}), Options{Driver: drv, Lanes: 1, QueueSize: 16, Block: true, InFlight: 8, Metrics: m,
			Guard: guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute}), Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		d.Start(context.Background())
		for i := range 3 {
			d.Submit(context.Background(), Delivery{Body: fmt.Appendf(nil, `{"tag": "myco/step", "data": {"id": "web1", "n": %d}}`, i), Seq: uint64(i + 1), Redelivers: true, Settle: func(Outcome) {}})
		}
		time.Sleep(500 * time.Millisecond) // the three calls handed over, all running
		synctest.Wait()
		if got := j.inHand(); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Errorf("in the journal while their calls run: %v, want [1 2 3]", got)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := j.inHand(); len(got) != 0 {
			t.Errorf("in the journal after the calls returned: %v, want none", got)
		}
	})
}

// TestGuardJudgesDuringRetry: a rule's retry (retry.go's again, run from
// its backoff's timer, not a lane) is a dispatch in flight too. The
// revert's retry on web1 takes a second to answer; the beacon its job
// causes on web1 half-way through waits for the retry's jid and is held
// back as that job's own, instead of being judged against the first job,
// which had returned, and reverting again.
func TestGuardJudgesDuringRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conf := "reactor:\n  - 'salt/beacon/*/inotify//etc/important_file':\n      sls: revert.sls\n      retry: {attempts: 1, backoff: 10s}\n"
		drv := &slowDriver{saltDriver: &saltDriver{}, delay: map[string]time.Duration{"": time.Second}}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(scenarioEngine(t, conf), Options{Driver: drv, Lanes: 1, Block: true, InFlight: 8, Metrics: m,
			Guard: guard.New(guard.Options{Settle: guard.DefaultSettle, JobTimeout: 5 * time.Minute})})
		if err != nil {
			t.Fatal(err)
		}
		d.Start(context.Background())
		steps := []step{
			beaconStep(0, "web1"),                             // the revert: j1, answered at 1 s
			retStep(1500*time.Millisecond, j1, "web1", false), // fails: retried at 11.5 s, answered at 12.5 s
			beaconStep(10500*time.Millisecond, "web1"),        // 12 s: the retry's own change, its jid not back yet
		}
		for _, s := range steps {
			time.Sleep(s.after)
			d.Submit(context.Background(), Delivery{Body: s.body(), Redelivers: true})
		}
		time.Sleep(2 * time.Second)
		if got := testutil.ToFloat64(m.Retries.WithLabelValues("retried")); got != 1 {
			t.Fatalf("retried %v, want 1 (calls %v)", got, drv.calls)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		scenario{want: map[string]int{"revert": 2}, held: map[string]float64{"loop_guard_beacon": 1}}.check(t, drv.saltDriver, []*Metrics{m})
	})
}
