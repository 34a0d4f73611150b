package reactor

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/store"
)

// follower records what the recorder hands a Follower.
type follower struct {
	mu         sync.Mutex
	decided    []Decision
	events     []Event
	configured int
	stopped    int
}

func (f *follower) Decided(d Decision) { f.mu.Lock(); f.decided = append(f.decided, d); f.mu.Unlock() }
func (f *follower) Event(e Event)      { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }
func (f *follower) Configured(*engine.Engine) {
	f.mu.Lock()
	f.configured++
	f.mu.Unlock()
}
func (f *follower) Tick(time.Time) {}
func (f *follower) Stop()          { f.mu.Lock(); f.stopped++; f.mu.Unlock() }

// TestListenersHearEachDecision: a listener of Options.Listeners hears
// each decision once, with its ledger stage and its event's identity; a
// Follower also hears each event, each engine and the stop.
func TestListenersHearEachDecision(t *testing.T) {
	eng := engineWith(t, "reactor:\n  - 'ev/*': r.sls\n  - 'drop/*': missing.sls\n",
		map[string]string{"r.sls": "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"})
	f := &follower{}
	d, err := New(eng, Options{Driver: &failDriver{}, Lanes: 2, Block: true, MaxHops: 3, Listeners: []Listener{f},
		Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(eng); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("ev/ok", "web1")})
	d.Submit(ctx, Delivery{Body: body("ev/fail", "web2")})
	d.Submit(ctx, Delivery{Body: body("ev/loop", "web3"), Hop: 4})
	d.Submit(ctx, Delivery{Body: body("drop/x", "web4")})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]struct {
		reason Reason
		stage  string
		chunk  bool
	}{
		"ev/ok":   {Dispatched, store.StageDispatched, true},
		"ev/fail": {Failed, store.StageFailed, true},
		"ev/loop": {HopLimit, store.StageSuppressed, false},
		"drop/x":  {FileFailed, store.StageFailed, false},
	}
	if len(f.decided) != len(want) {
		t.Fatalf("%d decisions heard, want %d: %+v", len(f.decided), len(want), f.decided)
	}
	for _, dc := range f.decided {
		w, ok := want[dc.Event.Tag]
		if !ok {
			t.Errorf("decision about %q heard", dc.Event.Tag)
			continue
		}
		if dc.Reason != w.reason || dc.Stage != w.stage || (dc.Chunk != nil) != w.chunk {
			t.Errorf("%s: reason %q stage %q chunk %v, want %q %q %v", dc.Event.Tag, dc.Reason, dc.Stage, dc.Chunk != nil, w.reason, w.stage, w.chunk)
		}
		if !eventIDPattern.MatchString(dc.Event.ID) || dc.Event.Minion == "" || dc.Event.Received.IsZero() {
			t.Errorf("%s: event identity %+v", dc.Event.Tag, dc.Event)
		}
		delete(want, dc.Event.Tag)
	}
	var tags []string
	for _, e := range f.events {
		tags = append(tags, e.Tag)
	}
	slices.Sort(tags)
	if !slices.Equal(tags, []string{"drop/x", "ev/fail", "ev/loop", "ev/ok"}) {
		t.Errorf("events heard %v, want each of the four once", tags)
	}
	if f.configured != 2 || f.stopped != 1 {
		t.Errorf("configured %d times, stopped %d; want 2 (New, Reload) and 1", f.configured, f.stopped)
	}
}
