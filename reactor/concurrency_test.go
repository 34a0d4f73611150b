package reactor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
)

// recDriver answers every dispatch with a new jid and records its chunk
// (the rule options' tests).
type recDriver struct {
	mu     sync.Mutex
	chunks []*event.Chunk
}

func (r *recDriver) Name() string              { return "rec" }
func (r *recDriver) Supports(string) bool      { return true }
func (*recDriver) Close(context.Context) error { return nil }

func (r *recDriver) Do(_ context.Context, a actions.Action) (actions.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, a.Chunk)
	return actions.Result{JID: fmt.Sprintf("2026%016d", len(r.chunks))}, nil
}

// targets lists each dispatch as "fun tgt_type:tgt".
func (r *recDriver) targets() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		out = append(out, fmt.Sprintf("%s %s:%s", c.Str("fun"), c.Str("tgt_type"), c.Str("tgt")))
	}
	return fmt.Sprint(out)
}

// field lists a key of each dispatch's chunk.
func (r *recDriver) field(k string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		out = append(out, c.Str(k))
	}
	return out
}

// json lists each dispatch's chunk as JSON.
func (r *recDriver) json() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		b, _ := json.Marshal(c)
		out = append(out, string(b))
	}
	return out
}

// optionsReactor starts a reactor for eng with drv on lanes, with a loop
// guard (settle 1s, job timeout 1m), inside the test's bubble.
func optionsReactor(t *testing.T, eng *engine.Engine, drv actions.Driver, lanes int) (*Reactor, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(eng, Options{Driver: drv, Lanes: lanes, Block: true, Metrics: m, Guard: guard.New(guard.Options{Settle: time.Second, JobTimeout: time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	return d, m
}

// settled keeps each delivery's outcome by a name.
type settled struct {
	mu sync.Mutex
	m  map[string]Outcome
}

func (s *settled) by(name string) func(Outcome) {
	return func(o Outcome) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.m == nil {
			s.m = map[string]Outcome{}
		}
		s.m[name] = o
	}
}

func (s *settled) of(name string) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name]
}

// minionStart submits salt/minion/<id>/start, redeliverable, settled
// into s under id, and waits for the reactor to be idle.
func minionStart(d *Reactor, s *settled, id string) {
	d.Submit(context.Background(), Delivery{Body: []byte(`{"tag": "salt/minion/` + id + `/start", "data": {"id": "` + id + `"}}`), Redelivers: true, Settle: s.by(id)})
	synctest.Wait()
}

// TestConcurrencyQueuesInOrder: a rule with concurrency 2 (one key for the
// whole estate) runs two highstates at once; the other starts wait,
// unacknowledged, and react in the order they came as jobs return or
// time out; at a stop the events still queued go back for redelivery.
func TestConcurrencyQueuesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/minion/*/start':\n      sls: hs.sls\n      concurrency: 2\n      key: '\"estate\"'\n",
			map[string]string{"hs.sls": "#!gotmpl|yaml\nhs_{{ .data.id }}:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"})
		drv := &recDriver{}
		d, m := optionsReactor(t, eng, drv, 2)
		ctx := context.Background()
		var st settled
		submit := func(id string) { minionStart(d, &st, id) }
		ret := func(jid, id string) {
			d.Submit(ctx, Delivery{Body: jobRet(jid, id)})
			synctest.Wait()
		}
		dispatched := func() string { return fmt.Sprint(drv.field("tgt")) }
		settled := st.of

		for i := 1; i <= 5; i++ {
			submit(fmt.Sprintf("web%d", i))
		}
		if got := dispatched(); got != "[web1 web2]" {
			t.Fatalf("dispatched %s, want web1 and web2 only", got)
		}
		if v := testutil.ToFloat64(m.ConcurrencyQueued); v != 3 {
			t.Errorf("reactord_concurrency_queued = %v, want 3", v)
		}
		if settled("web3") != 0 || settled("web1") != Ack {
			t.Errorf("web3 settled %v (want held), web1 %v (want Ack)", settled("web3"), settled("web1"))
		}
		ret("2026"+fmt.Sprintf("%016d", 2), "web2") // web2's job returns first
		if got := dispatched(); got != "[web1 web2 web3]" {
			t.Fatalf("after web2 returned: dispatched %s, want web3 next", got)
		}
		ret("2026"+fmt.Sprintf("%016d", 1), "web1")
		if got := dispatched(); got != "[web1 web2 web3 web4]" {
			t.Fatalf("after web1 returned: dispatched %s, want web4 next", got)
		}
		// web3's and web4's jobs never return: after the job timeout their
		// slots go to web5 (and the next).
		pass(61 * time.Second)
		if got := dispatched(); got != "[web1 web2 web3 web4 web5]" {
			t.Fatalf("after the job timeout: dispatched %s, want web5", got)
		}
		if settled("web5") != Ack || testutil.ToFloat64(m.ConcurrencyQueued) != 0 {
			t.Errorf("web5 settled %v, queued %v", settled("web5"), testutil.ToFloat64(m.ConcurrencyQueued))
		}
		// Two more while two are in flight wait; a stop leaves them for
		// redelivery.
		submit("web6")
		submit("web7")
		submit("web8")
		if got := dispatched(); got != "[web1 web2 web3 web4 web5 web6]" {
			t.Fatalf("dispatched %s, want web6 (one slot was free)", got)
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if settled("web7") != Retry || settled("web8") != Retry {
			t.Errorf("queued at the stop: web7 %v, web8 %v, want Retry", settled("web7"), settled("web8"))
		}
	})
}

// sameJIDDriver answers every dispatch with one jid, the way the exec and
// saltapi drivers give reactions merged into one job the same jid, and
// the dispatch's own target as its minions.
type sameJIDDriver struct{ recDriver }

func (s *sameJIDDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	_, _ = s.recDriver.Do(ctx, a)
	return actions.Result{JID: "20260000000000000001", Minions: []string{a.Chunk.Str("tgt")}}, nil
}

// TestConcurrencySharedJobAndEarlyReturns: reactions sharing one jid each
// keep their own place until their own minion returned; a return handled
// before the dispatch that started its job counts.
func TestConcurrencySharedJobAndEarlyReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/minion/*/start':\n      sls: hs.sls\n      concurrency: 1\n",
			map[string]string{"hs.sls": "#!gotmpl|yaml\nhs_{{ .data.id }}:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"})
		drv := &sameJIDDriver{}
		d, _ := optionsReactor(t, eng, drv, 2)
		var st settled
		ret := func(id string) {
			d.Submit(context.Background(), Delivery{Body: jobRet("20260000000000000001", id)})
			synctest.Wait()
		}
		for _, id := range []string{"web1", "web2", "web1", "web2"} {
			minionStart(d, &st, id)
		}
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web2]" {
			t.Fatalf("dispatched %s, want web1 and web2 (one place per minion)", got)
		}
		ret("web2")
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web2 web2]" {
			t.Fatalf("after web2 returned: %s, want web2's second start", got)
		}
		ret("web1")
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web2 web2 web1]" {
			t.Fatalf("after web1 returned: %s, want web1's second start (its place was not lost to the shared jid)", got)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/minion/*/start':\n      sls: hs.sls\n      concurrency: 1\n      key: '\"all\"'\n",
			map[string]string{"hs.sls": "#!gotmpl|yaml\nhs_{{ .data.id }}:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"})
		drv := &recDriver{}
		d, _ := optionsReactor(t, eng, drv, 2)
		var st settled
		// The return of the job web1's start is about to start comes first.
		d.Submit(context.Background(), Delivery{Body: jobRet(fmt.Sprintf("2026%016d", 1), "web1")})
		synctest.Wait()
		minionStart(d, &st, "web1")
		minionStart(d, &st, "web2")
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web2]" {
			t.Fatalf("dispatched %s: web1's job had returned already, so web2 must not wait", got)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
