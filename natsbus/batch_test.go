package natsbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/wait"
)

// collector gathers the done calls of a Publisher's events.
type collector struct {
	mu   sync.Mutex
	errs []error
	wg   sync.WaitGroup
}

func (c *collector) done() func(error) {
	c.wg.Add(1)
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			c.mu.Lock()
			if err != nil {
				c.errs = append(c.errs, err)
			}
			c.mu.Unlock()
			c.wg.Done()
		})
	}
}

func envelope(tag string) []byte { return []byte(`{"tag":"` + tag + `","data":{"id":"web1"}}`) }

// streamPublisher starts a server with the event stream and returns a
// connection to it and a Publisher into the stream, closed when the
// test ends.
func streamPublisher(t *testing.T, o PublisherOptions) (*Conn, *Publisher) {
	t.Helper()
	_, c := startServer(t)
	if err := c.EnsureStream(t.Context(), StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewPublisher(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return c, p
}

// publishEach publishes n events on x/y, with the ids prefix0 …
// prefix(n-1), and waits for every acknowledgement; an event that fails
// fails the test.
func publishEach(t *testing.T, p *Publisher, n int, prefix string) {
	t.Helper()
	var col collector
	for i := range n {
		if err := p.Publish(context.Background(), Msg{Tag: "x/y", Body: envelope("x/y"), Meta: Meta{MsgID: prefix + strconv.Itoa(i)}}, col.done()); err != nil {
			t.Fatal(err)
		}
	}
	col.wg.Wait()
	if len(col.errs) > 0 {
		t.Fatalf("%d events failed: %v", len(col.errs), col.errs[0])
	}
}

// TestBatchPublisherBatchesAndDedupes: events published at once go as
// atomic batches and each is acknowledged; an id given twice in a batch,
// and ids the stream stored already (republished after their batch was
// acknowledged), are stored once, the refused batch settled one message
// at a time.
func TestBatchPublisherBatchesAndDedupes(t *testing.T) {
	// MinAtomic 2: a small batch (group commit sends what is open as soon
	// as nothing is in flight) is still atomic.
	c, p := streamPublisher(t, PublisherOptions{MaxBatch: 50, MinAtomic: 2})
	ctx := t.Context()
	if !p.Atomic() {
		t.Fatal("the embedded server has atomic batches, the publisher does not use them")
	}
	var col collector
	for i := range 500 {
		id := "id-" + strconv.Itoa(i)
		if err := p.Publish(context.Background(), Msg{Tag: "salt/minion/web1/start", Body: envelope("salt/minion/web1/start"), Meta: Meta{MsgID: id}}, col.done()); err != nil {
			t.Fatal(err)
		}
		if i%100 == 7 { // the same id again, in the same open batch
			if err := p.Publish(context.Background(), Msg{Tag: "salt/minion/web1/start", Body: envelope("salt/minion/web1/start"), Meta: Meta{MsgID: id}}, col.done()); err != nil {
				t.Fatal(err)
			}
		}
	}
	col.wg.Wait()
	// Ids the stream has, in one batch with new ones: every slot taken
	// while they are published, so that they gather in one open batch.
	for range cap(p.b.slots) {
		p.b.slots <- struct{}{}
	}
	for i := 490; i < 510; i++ {
		if err := p.Publish(context.Background(), Msg{Tag: "salt/minion/web1/start", Body: envelope("salt/minion/web1/start"), Meta: Meta{MsgID: "id-" + strconv.Itoa(i)}}, col.done()); err != nil {
			t.Fatal(err)
		}
	}
	for range cap(p.b.slots) {
		<-p.b.slots
	}
	p.b.wake()
	p.Close(ctx)
	col.wg.Wait()
	if len(col.errs) > 0 {
		t.Fatalf("%d events failed: %v", len(col.errs), col.errs[0])
	}
	n, err := c.StreamMessages(ctx, "REACTORD_EVENTS")
	if err != nil || n != 510 {
		t.Fatalf("the stream holds %d messages (%v), want 510", n, err)
	}
	st := p.Stats()
	// An id given again after its batch left is refused with its batch,
	// which then goes one message at a time: up to five such batches.
	if st.Batches < 5 || st.Batched < 200 || st.Fallbacks < 1 {
		t.Fatalf("stats %+v: want at least 5 batches holding 200 events, and the batch with stored ids refused", st)
	}
	t.Logf("stats %+v", st)
}

// TestBatchPublisherLoneEvent: a lone event is published on its own at
// once (no batch is in flight to wait for), and is acknowledged no more
// than 2 ms later than a plain acknowledged publish (medians of 30).
func TestBatchPublisherLoneEvent(t *testing.T) {
	c, p := streamPublisher(t, PublisherOptions{})
	ctx := t.Context()
	const rounds = 30
	var plain, batched []time.Duration
	for i := range rounds {
		start := time.Now()
		if err := c.Publish(ctx, Msg{Tag: "lone/plain", Body: envelope("lone/plain"), Meta: Meta{MsgID: "plain-" + strconv.Itoa(i)}}, Stored); err != nil {
			t.Fatal(err)
		}
		plain = append(plain, time.Since(start))
		start = time.Now()
		ch := make(chan error, 1)
		if err := p.Publish(context.Background(), Msg{Tag: "lone/batched", Body: envelope("lone/batched"), Meta: Meta{MsgID: "batched-" + strconv.Itoa(i)}}, func(err error) { ch <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		batched = append(batched, time.Since(start))
	}
	slices.Sort(plain)
	slices.Sort(batched)
	mp, mb := plain[rounds/2], batched[rounds/2]
	t.Logf("median acknowledged publish: plain %v, through the batch publisher %v", mp, mb)
	if mb > mp+2*time.Millisecond {
		t.Errorf("a lone event takes %v through the batch publisher, %v more than a plain publish (%v)", mb, mb-mp, mp)
	}
	if st := p.Stats(); st.Single != rounds || st.Batches != 0 {
		t.Errorf("stats %+v: want every lone event published on its own", st)
	}
}

// TestBatchPublisherSmallBatches: a few events at once go one at a time
// (fewer than MinAtomic: the server's staging of an atomic batch would
// cost more than their flushes); a burst goes in atomic batches.
func TestBatchPublisherSmallBatches(t *testing.T) {
	_, p := streamPublisher(t, PublisherOptions{})
	for round := range 5 {
		publishEach(t, p, DefaultBatchMinAtomic-1, fmt.Sprint("few-", round, "-"))
	}
	if st := p.Stats(); st.Batches != 0 || st.Single != 5*(DefaultBatchMinAtomic-1) {
		t.Fatalf("stats %+v: want every event of the small groups published alone", st)
	}
	publishEach(t, p, 2000, "burst-")
	if st := p.Stats(); st.Batches == 0 || st.Batched < 1000 {
		t.Fatalf("stats %+v: want most of a burst of 2000 in atomic batches", st)
	}
	t.Logf("stats %+v", p.Stats())
}

// TestBatchPublisherConnectionClosed: an event waiting for its
// acknowledgement fails at once with the connection closed when the
// connection closes for good, not after the acknowledgement timeout: in an
// atomic batch, and published alone (a group smaller than MinAtomic; CI
// once sent the first event of the atomic case alone, and nats.go leaves
// such a publish to its timeout when the connection closes).
func TestBatchPublisherConnectionClosed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		minAtomic int
	}{
		{"atomic", 2},
		{"one at a time", 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := startServer(t)
			c, err := Connect(ConnOptions{URL: srv.ClientURL(), Name: "closing"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			ctx := t.Context()
			// No stream: a plain subscriber takes the subjects and never
			// answers, so the acknowledgements never come.
			var relayed atomic.Int64
			sink, err := c.nc.Subscribe(c.prefix+">", func(*nats.Msg) { relayed.Add(1) })
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Unsubscribe()
			p, err := c.NewPublisher(ctx, PublisherOptions{MinAtomic: tc.minAtomic})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Atomic() {
				t.Fatal("the embedded server has atomic batches, the publisher does not use them")
			}
			var mu sync.Mutex
			var errs []error
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Add(1)
				if err := p.Publish(context.Background(), Msg{Tag: "x/y", Body: envelope("x/y"), Meta: Meta{MsgID: "c-" + strconv.Itoa(i)}}, func(err error) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					wg.Done()
				}); err != nil {
					t.Fatal(err)
				}
			}
			p.Flush()
			checkFor(t, 5*time.Second, func() error { // the events are on the wire
				if n := relayed.Load(); n != 20 {
					return fmt.Errorf("the server relayed %d of 20 events", n)
				}
				return nil
			})
			start := time.Now()
			c.nc.Close()
			wg.Wait()
			if took := time.Since(start); took > DefaultAckTimeout/2 {
				t.Fatalf("the events settled %v after the connection closed", took)
			}
			for _, err := range errs {
				if !errors.Is(err, nats.ErrConnectionClosed) {
					t.Fatalf("an event settled with %v, want the connection closed", err)
				}
			}
			st := p.Stats()
			if tc.minAtomic > 20 && st.Single != 20 {
				t.Fatalf("stats %+v: want every event published alone", st)
			}
		})
	}
}

// TestBatchPublisherManyPublishers: 60 publishers at once on one stream,
// more than nats-server's 50 open atomic batches per stream: each has at
// most one batch open on the server at a time (its batches are written
// one after another and committed as they end), and a batch the server
// would refuse for the limit goes one message at a time; every event is
// stored once, none fails. (Here the limit was not reached: the log line
// says how many batches were refused.)
func TestBatchPublisherManyPublishers(t *testing.T) {
	srv, c := startServer(t)
	ctx := t.Context()
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	const pubs, each = 60, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var total PublisherStats
	for k := range pubs {
		pc, err := Connect(ConnOptions{URL: srv.ClientURL(), Name: fmt.Sprint("pub-", k)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pc.Close)
		p, err := pc.NewPublisher(ctx, PublisherOptions{MaxBatch: 20, MinAtomic: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var col collector
			for i := range each {
				if err := p.Publish(context.Background(), Msg{Tag: "x/y", Body: envelope("x/y"), Meta: Meta{MsgID: fmt.Sprint("p", k, "-", i)}}, col.done()); err != nil {
					t.Error(err)
					return
				}
			}
			p.Close(ctx)
			col.wg.Wait()
			st := p.Stats()
			mu.Lock()
			errs = append(errs, col.errs...)
			total.Batches += st.Batches
			total.Batched += st.Batched
			total.Fallbacks += st.Fallbacks
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d events failed: %v", len(errs), errs[0])
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != pubs*each {
		t.Fatalf("the stream holds %d messages (%v), want %d", n, err, pubs*each)
	}
	if total.Batches == 0 {
		t.Fatalf("stats %+v: no atomic batch", total)
	}
	t.Logf("%d publishers: %d atomic batches holding %d events, %d refused and sent one message at a time", pubs, total.Batches, total.Batched, total.Fallbacks)
}

// TestBatchPublisherKeepsOrder: with several batches in flight, the stream
// stores events in the order they were published — in atomic batches, and
// one message at a time on a stream without them (once the publisher
// knows: the batches refused before are re-sent after those written
// meanwhile, the order the doc comment of send gives).
func TestBatchPublisherKeepsOrder(t *testing.T) {
	for _, atomicBatches := range []bool{true, false} {
		t.Run(fmt.Sprint("atomic=", atomicBatches), func(t *testing.T) {
			_, c := startServer(t)
			ctx := t.Context()
			cfg := jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{c.prefix + ">"},
				Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, AllowAtomicPublish: atomicBatches}
			s, err := c.JetStream().CreateStream(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Small batches, so that many are sent while others wait.
			p, err := c.NewPublisher(ctx, PublisherOptions{MaxBatch: 8, MinAtomic: 2, InFlight: 4})
			if err != nil {
				t.Fatal(err)
			}
			first := uint64(0)
			if !atomicBatches {
				// The first batch, refused, tells the publisher.
				publishEach(t, p, 100, "warm-")
				first = 100
			}
			const n = 3000
			publishEach(t, p, n, "id-")
			p.Close(ctx)
			if p.Atomic() != atomicBatches {
				t.Fatalf("atomic %t, want %t", p.Atomic(), atomicBatches)
			}
			for seq := first + 1; seq <= first+n; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if err != nil {
					t.Fatal(err)
				}
				if id := m.Header.Get(HeaderMsgID); id != "id-"+strconv.Itoa(int(seq-first-1)) {
					t.Fatalf("sequence %d holds %s (stats %+v)", seq, id, p.Stats())
				}
			}
			t.Logf("stats %+v", p.Stats())
		})
	}
}

// TestBatchPublisherStreamWithoutAtomic: on a stream that does not allow
// atomic batches (made by hand), the first batch is refused, its events
// and all later ones are published one at a time, and all are stored.
func TestBatchPublisherStreamWithoutAtomic(t *testing.T) {
	_, c := startServer(t)
	ctx := t.Context()
	if _, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{c.prefix + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	// MinAtomic 2: any batch of two or more is sent atomic, and refused.
	p, err := c.NewPublisher(ctx, PublisherOptions{MinAtomic: 2})
	if err != nil {
		t.Fatal(err)
	}
	var col collector
	for range 300 {
		if err := p.Publish(context.Background(), Msg{Tag: "x/y", Body: envelope("x/y")}, col.done()); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	col.wg.Wait()
	if len(col.errs) > 0 {
		t.Fatalf("%d events failed: %v", len(col.errs), col.errs[0])
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 300 {
		t.Fatalf("the stream holds %d messages (%v), want 300", n, err)
	}
	if p.Atomic() || p.Stats().Fallbacks < 1 || p.Stats().Single != 300 {
		t.Fatalf("atomic %t, stats %+v: want the first batch refused and every event published alone", p.Atomic(), p.Stats())
	}
	// EnsureStream allows atomic batches on it.
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil || !s.CachedInfo().Config.AllowAtomicPublish {
		t.Fatalf("after EnsureStream the stream does not allow atomic batches (%v)", err)
	}
}

// TestBatchPublisherOnServers: on each nats-server release at hand
// ($REACTORD_TEST_NATS_SERVERS), the publisher uses atomic batches exactly
// from 2.12.0 (older ones: one message at a time) and every event is
// stored once.
func TestBatchPublisherOnServers(t *testing.T) {
	bins := strings.Fields(os.Getenv("REACTORD_TEST_NATS_SERVERS"))
	if len(bins) == 0 {
		t.Skip("$REACTORD_TEST_NATS_SERVERS unset (nats-server binaries of other releases)")
	}
	for _, bin := range bins {
		t.Run(bin, func(t *testing.T) {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Port(t)))
			_, port, _ := net.SplitHostPort(addr)
			cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			var c *Conn
			wait.For(t, 15*time.Second, func() (err error) {
				c, err = Connect(ConnOptions{URL: "nats://" + addr, Name: "batch"})
				return err
			})
			t.Cleanup(c.Close)
			ctx := t.Context()
			wait.For(t, 15*time.Second, func() error {
				if has, why := c.JetStreamEnabled(ctx); !has {
					return errors.New(why)
				}
				return nil
			})
			if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
				t.Fatal(err)
			}
			sv, err := c.ServerVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.NewPublisher(ctx, PublisherOptions{MinAtomic: 2})
			if err != nil {
				t.Fatal(err)
			}
			var col collector
			for i := range 400 {
				if err := p.Publish(context.Background(), Msg{Tag: "a/b", Body: envelope("a/b"), Meta: Meta{MsgID: fmt.Sprint("m", i%350)}}, col.done()); err != nil {
					t.Fatal(err)
				}
			}
			p.Close(ctx)
			col.wg.Wait()
			if len(col.errs) > 0 {
				t.Fatalf("%d events failed: %v", len(col.errs), col.errs[0])
			}
			if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 350 {
				t.Fatalf("the stream holds %d messages (%v), want 350", n, err)
			}
			want := !sv.Version.Less(AtomicBatchMin)
			if p.Atomic() != want || (want && p.Stats().Batches == 0) || (!want && p.Stats().Single != 400) {
				t.Fatalf("nats-server %s: atomic %t, stats %+v", sv.Version, p.Atomic(), p.Stats())
			}
			t.Logf("nats-server %s: atomic %t, stats %+v", sv.Version, p.Atomic(), p.Stats())
		})
	}
}

// TestOrderedPublisherHaltsAfterAFailure: an Ordered publisher whose
// event fails (no stream yet: no responders) fails every later event
// unsent, so none can be stored before the failed one is sent again;
// after Resume, events are stored again, in order.
func TestOrderedPublisherHaltsAfterAFailure(t *testing.T) {
	_, c := startServer(t)
	ctx := t.Context()
	p, err := c.NewPublisher(ctx, PublisherOptions{Ordered: true, AckTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	publish := func(n int) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			if err := p.Publish(ctx, Msg{Tag: "x/y", Body: envelope("x/y")}, func(err error) { errs[i] = err; wg.Done() }); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		return errs
	}
	if errs := publish(1); errs[0] == nil {
		t.Fatal("an event with no stream to take it was acknowledged")
	}
	for i, err := range publish(5) {
		if err == nil || !strings.Contains(err.Error(), "not sent after an earlier event failed") {
			t.Errorf("event %d after the failure: %v, want it failed unsent", i, err)
		}
	}
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	for i, err := range publish(40) {
		if err != nil {
			t.Fatalf("event %d after Resume: %v", i, err)
		}
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 40 {
		t.Fatalf("the stream holds %d messages (%v), want the 40 published after Resume", n, err)
	}
}

// TestOrderedFallbackSendsInTurn: an Ordered publisher whose atomic
// batch the stream refuses (it lacks allow_atomic) sends the batch's
// events one at a time, so that when one fails (its subject has no
// stream: no responders) none after it is stored ahead of it; the
// events before it are stored, in order.
func TestOrderedFallbackSendsInTurn(t *testing.T) {
	_, c := startServer(t)
	ctx := t.Context()
	if _, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{c.prefix + ">"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewPublisher(ctx, PublisherOptions{Ordered: true, Linger: 200 * time.Millisecond, AckTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if !p.Atomic() {
		t.Skip("the embedded server has no atomic batches: an ordered batch holds one event, and nothing falls back")
	}
	const n, bad = 10, 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		m := Msg{Tag: fmt.Sprintf("x/%d", i), Body: envelope(fmt.Sprintf("x/%d", i))}
		if i == bad {
			m = Msg{Subject: "elsewhere.x", Body: envelope("x")}
		}
		wg.Add(1)
		if err := p.Publish(ctx, m, func(err error) { errs[i] = err; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if p.Stats().Batches != 0 {
		t.Fatalf("stats %+v: the batch was stored atomically, though the stream lacks allow_atomic", p.Stats())
	}
	for i, err := range errs {
		switch {
		case i < bad && err != nil:
			t.Errorf("event %d, before the failure: %v", i, err)
		case i == bad && err == nil:
			t.Errorf("event %d, with no stream to take it, was acknowledged", i)
		case i > bad && (err == nil || !strings.Contains(err.Error(), "not sent after an earlier event failed")):
			t.Errorf("event %d, after the failure: %v, want it failed unsent", i, err)
		}
	}
	if got, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || got != bad {
		t.Fatalf("the stream holds %d messages (%v), want the %d before the failure", got, err, bad)
	}
}
