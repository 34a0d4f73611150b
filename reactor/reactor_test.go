package reactor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
)

// gateDriver records dispatches and can hold them until released.
type gateDriver struct {
	mu    sync.Mutex
	order []string
	keys  []string
	gate  chan struct{}
}

func (g *gateDriver) Name() string              { return "gate" }
func (g *gateDriver) Supports(string) bool      { return true }
func (*gateDriver) Close(context.Context) error { return nil }

func (g *gateDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return actions.Result{}, ctx.Err()
		}
	}
	g.mu.Lock()
	g.order = append(g.order, a.Tag)
	g.keys = append(g.keys, a.Key)
	g.mu.Unlock()
	return actions.Result{JID: "1"}, nil
}

func daemonEngine(t *testing.T) *engine.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.sls"), []byte("r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "reactor.conf"), []byte("reactor:\n  - 'ev/*': r.sls\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return engine.MustNew(cfg, engine.Options{})
}

func body(tag, id string) []byte {
	return []byte(`{"tag": "` + tag + `", "data": {"id": "` + id + `"}}`)
}

func TestReactorOrdersPerMinion(t *testing.T) {
	drv := &gateDriver{}
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 4, Block: true, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	for i := range 200 {
		for _, m := range []string{"a", "b", "c"} {
			d.Submit(ctx, Delivery{Body: body(fmt.Sprintf("ev/%s/%03d", m, i), m)})
		}
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	last := map[byte]string{}
	for _, tag := range drv.order {
		m := tag[3]
		if tag <= last[m] {
			t.Fatalf("minion %c out of order: %s after %s", m, tag, last[m])
		}
		last[m] = tag
	}
	if len(drv.order) != 600 {
		t.Fatalf("%d dispatched", len(drv.order))
	}
}

func TestReactorOverflowIsCounted(t *testing.T) {
	drv := &gateDriver{gate: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 1, QueueSize: 2, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	accepted := 0
	var mu sync.Mutex
	outcomes := map[Outcome]int{}
	settle := func(o Outcome) { mu.Lock(); outcomes[o]++; mu.Unlock() }
	for i := range 10 {
		if d.Submit(ctx, Delivery{Body: body(fmt.Sprintf("ev/%d", i), "a"), Settle: settle}) {
			accepted++
		}
	}
	if got := testutil.ToFloat64(m.Dropped.WithLabelValues(DropLaneFull)); int(got) != 10-accepted || accepted == 10 {
		t.Fatalf("accepted %d, overflow %v", accepted, got)
	}
	close(drv.gate)
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(drv.order) != accepted {
		t.Fatalf("dispatched %d of %d accepted", len(drv.order), accepted)
	}
	// After the stop Submit refuses: that delivery is settled too.
	if d.Submit(ctx, Delivery{Body: body("ev/late", "a"), Settle: settle}) {
		t.Fatal("Submit accepted an event after Stop")
	}
	// Each delivery is settled once: the accepted ones acknowledged, the
	// refused ones (lane full, stopped) left for a retry.
	if want := fmt.Sprint(map[Outcome]int{Ack: accepted, Retry: 11 - accepted}); fmt.Sprint(outcomes) != want {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
}

func TestReactorStopDeadline(t *testing.T) {
	drv := &gateDriver{gate: make(chan struct{})}
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 1, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.Start(runCtx)
	d.Submit(runCtx, Delivery{Body: body("ev/1", "a")})
	ctx, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if err := d.Stop(ctx); err == nil {
		t.Fatal("Stop returned before the in-flight event finished")
	}
	close(drv.gate)
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestReactorHopLimitAndReactorUser(t *testing.T) {
	drv := &gateDriver{}
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(daemonEngine(t), Options{Driver: drv, Metrics: m, MaxHops: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("ev/1", "a"), Hop: 4})
	d.Submit(ctx, Delivery{Body: body("ev/2", "a"), Hop: 3})
	d.Submit(ctx, Delivery{Body: []byte(`{"tag": "ev/3", "data": {"user": "Reactor"}}`)})
	d.Submit(ctx, Delivery{Body: []byte(`not json`)})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(drv.order) != 1 || drv.order[0] != "ev/2" {
		t.Fatalf("dispatched %v", drv.order)
	}
	if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("hop_limit")); v != 1 {
		t.Fatalf("hop_limit suppressions = %v", v)
	}
	if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("reactor_user")); v != 1 {
		t.Fatalf("reactor_user suppressions = %v", v)
	}
	if v := testutil.ToFloat64(m.Malformed); v != 1 {
		t.Fatalf("malformed = %v", v)
	}
}

// TestReactorReactionKeys: a reaction's Key is the event's message id, its
// file and its id, the same for each delivery of the event; an event
// without a message id gives none.
func TestReactorReactionKeys(t *testing.T) {
	drv := &gateDriver{}
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 1, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	for _, dl := range []Delivery{{Body: body("ev/1", "a"), MsgID: "m-1"}, {Body: body("ev/1", "a"), MsgID: "m-1"}, {Body: body("ev/2", "a")}} {
		if !d.Submit(ctx, dl) {
			t.Fatalf("%s refused", dl.Body)
		}
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	k := drv.keys
	if len(k) != 3 || !strings.HasPrefix(k[0], "m-1/") || !strings.HasSuffix(k[0], "r.sls/r") || k[1] != k[0] || k[2] != "" {
		t.Errorf("keys %q (events %q), want m-1/<file>/r twice, then none", k, drv.order)
	}
}

// TestReactorDropsMasterCopies: an event Copy calls another master's copy
// is acknowledged without reacting and counted as master_copy; one Copy
// cannot tell about is left for redelivery (JetStream) (issue 12).
func TestReactorDropsMasterCopies(t *testing.T) {
	drv := &gateDriver{}
	m := NewMetrics(prometheus.NewRegistry())
	copyOf := func(_ context.Context, tag string, _ []byte, seq uint64) (bool, error) {
		switch seq {
		case 2:
			return true, nil
		case 3:
			return false, fmt.Errorf("no key-value bucket")
		}
		return false, nil
	}
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 1, Metrics: m, Copy: copyOf})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	var mu sync.Mutex
	var acked, naked []uint64
	for seq := uint64(1); seq <= 3; seq++ {
		d.Submit(ctx, Delivery{Body: body("ev/1", "web1"), Seq: seq, Redelivers: true, Settle: func(o Outcome) {
			mu.Lock()
			defer mu.Unlock()
			switch o {
			case Ack:
				acked = append(acked, seq)
			case Retry:
				naked = append(naked, seq)
			}
		}})
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(drv.order) != 1 || fmt.Sprint(acked, naked) != "[1 2] [3]" {
		t.Fatalf("%d dispatched, acked %v, refused %v; want 1, [1 2], [3]", len(drv.order), acked, naked)
	}
	if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("master_copy")); v != 1 {
		t.Fatalf("master_copy suppressions = %v", v)
	}
}

// TestReactorLeavesMovedEvents: an event whose partition moved to another
// replica while it waited in its lane (Delivery.Moved) is not handled,
// neither acknowledged nor refused, and counted; the others are handled.
func TestReactorLeavesMovedEvents(t *testing.T) {
	drv := &gateDriver{}
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 2, Block: true, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	var settled sync.Map
	for i, moved := range []bool{false, true, false, true} {
		tag := fmt.Sprintf("ev/%d", i)
		d.Submit(ctx, Delivery{Body: body(tag, "web1"), Owned: func() bool { return !moved }, Redelivers: true,
			Settle: func(o Outcome) {
				if _, twice := settled.LoadOrStore(tag, []string{"", "ack", "retry", "leave"}[o]); twice {
					t.Errorf("%s settled twice", tag)
				}
			}})
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(drv.order) != "[ev/0 ev/2]" {
		t.Fatalf("dispatched %v, want [ev/0 ev/2]", drv.order)
	}
	for i, want := range []string{"ack", "leave", "ack", "leave"} {
		got, _ := settled.Load(fmt.Sprintf("ev/%d", i))
		if s, _ := got.(string); s != want {
			t.Errorf("ev/%d settled %q, want %q", i, s, want)
		}
	}
	if got := testutil.ToFloat64(m.Suppressed.WithLabelValues(SuppressPartitionMoved)); got != 2 {
		t.Fatalf("partition_moved suppressions %v, want 2", got)
	}
}

// pass lets d of a synctest bubble's fake time pass, then waits until
// every goroutine of the bubble is blocked: timers due by then have fired
// and what they started is done. It is the tests' one way to move time:
// the sleep takes no real time in the bubble.
func pass(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
