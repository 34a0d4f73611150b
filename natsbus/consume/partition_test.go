package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/ordercheck"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// orderLog records, per key, the counters handled in the order they were
// handled, and catches two events of one key handled at once.
type orderLog struct {
	mu      sync.Mutex
	seen    map[string][]int
	active  map[string]int
	overlap int
}

func newOrderLog() *orderLog {
	return &orderLog{seen: map[string][]int{}, active: map[string]int{}}
}

// check returns the distinct events handled, the duplicates, and the
// events handled before an earlier one of their key (out of order).
func (l *orderLog) check() (distinct, dups, outOfOrder int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ordercheck.Count(l.seen)
}

// replica is a test replica: a connection, a partitioned consumption, and
// lanes (one goroutine per lane, keys hashed onto them) that handle and
// acknowledge each event as the daemon does.
type replica struct {
	c     *natsbus.Conn
	p     *Partitioned
	dead  atomic.Bool
	lanes []chan *natsbus.Message
	// unplanned counts lost leases and resyncs: the changes that may
	// run events twice.
	unplanned atomic.Int64
}

func testKey(body []byte) string {
	var v struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Key
}

func startReplica(t *testing.T, url, name string, log *orderLog) *replica {
	t.Helper()
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: url, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r := &replica{c: c}
	for range 4 {
		ch := make(chan *natsbus.Message, 256)
		r.lanes = append(r.lanes, ch)
		go func() {
			for m := range ch {
				if r.dead.Load() || m.Moved() {
					continue // a dead process handles nothing more; a moved event is the new owner's
				}
				var v struct {
					Key string `json:"key"`
					N   int    `json:"n"`
				}
				_ = json.Unmarshal(m.Body, &v)
				log.mu.Lock()
				log.active[v.Key]++
				if log.active[v.Key] > 1 {
					log.overlap++
				}
				log.mu.Unlock()
				runtime.Gosched() // handling: another event of the key handled now would overlap
				log.mu.Lock()
				log.active[v.Key]--
				log.seen[v.Key] = append(log.seen[v.Key], v.N)
				log.mu.Unlock()
				_ = m.Ack()
			}
		}()
	}
	p, err := NewPartitioned(context.Background(), c, PartitionOptions{
		StreamOptions: natsbus.StreamOptions{AckWait: 5 * time.Second, MaxAckPending: 4096},
		Partitions:    6, Replica: name, LeaseTTL: 2 * time.Second,
		OnChange: func(change string, _ int) {
			if change == "lost" || change == "resync" {
				r.unplanned.Add(1)
			}
		},
	}, func(m *natsbus.Message) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(testKey(m.Body)))
		r.lanes[h.Sum32()%uint32(len(r.lanes))] <- m
	})
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	return r
}

// TestPartitionedOrderAcrossReplicas: two replicas share six partitions;
// events of 40 keys arrive steadily. The second replica joins while the
// first holds every partition (they balance, handing partitions over
// without duplicates), then the first dies (its connection closed, no
// hand-over): the second takes its partitions over within a lease's time
// plus a second, and every key's events are handled once each, in order,
// never two at once, the only duplicates being those in flight at the
// death.
func TestPartitionedOrderAcrossReplicas(t *testing.T) {
	srv, pub := natstest.Start(t)
	log := newOrderLog()
	a := startReplica(t, srv.ClientURL(), "a", log)
	checkPartitions(t, a, 6)
	checkPlain(t, a)

	const keys, each = 40, 60
	published := publishSteadily(t, pub, keys, each)
	waitHandled := func(want int) {
		t.Helper()
		wait.For(t, 30*time.Second, func() error {
			if d, _, _ := log.check(); d < want {
				return fmt.Errorf("%d of %d events handled", d, want)
			}
			return nil
		})
	}
	waitHandled(keys * each / 4)
	b := startReplica(t, srv.ClientURL(), "b", log)
	checkPartitions(t, b, 3)
	checkPartitions(t, a, 3)
	_, dupsBefore, _ := log.check()
	unplanned := a.unplanned.Load() + b.unplanned.Load()
	waitHandled(keys * each / 2)

	// a dies: it handles nothing more and never hands over.
	a.dead.Store(true)
	a.p.Stop()
	a.c.NATS().Close()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		a.p.Release(ctx) // a dead process ends nothing; here its goroutines are joined for the tests after
	})
	killed := time.Now()
	checkPartitions(t, b, 6)
	took := time.Since(killed)
	<-published
	waitHandled(keys * each)
	// Every event acknowledged (the stream keeps an event until each
	// consumer did): no copy of one can come any more. The replicas
	// purged them (the stream is trimmed to what all its consumers
	// acknowledged), not the server one by one.
	waitStreamEmpty(t, b.c)
	if a.p.Trimmed()+b.p.Trimmed() == 0 {
		t.Fatal("the stream emptied, but no replica purged an event from it")
	}
	distinct, dups, ooo := log.check()
	t.Logf("%d keys × %d events: %d handled, %d duplicates (%d before the death), %d out of order, %d at once; b took a's partitions %v after its death; b's resyncs %d, redeliveries passed over %d",
		keys, each, distinct, dups, dupsBefore, ooo, log.overlap, took.Round(time.Millisecond), b.p.Resyncs(), b.p.Ignored())
	if distinct != keys*each || ooo != 0 || log.overlap != 0 {
		t.Fatalf("handled %d of %d, %d out of order, %d at once", distinct, keys*each, ooo, log.overlap)
	}
	if dupsBefore != 0 && unplanned == 0 {
		t.Fatalf("%d duplicates from a hand-over between live replicas, want 0", dupsBefore)
	}
	if unplanned > 0 {
		t.Logf("%d leases lost or partitions resynced before the death (a loaded machine: renewals late)", unplanned)
	}
	if took > 2*time.Second+1500*time.Millisecond {
		t.Fatalf("takeover took %v", took)
	}
	checkPlain(t, b)
	// Each partition's consumer received its own events only: the
	// deliveries of all seven add up to the events and those redelivered
	// after the death (what a held unacknowledged: up to its lanes'
	// buffers on a loaded machine), not to twice or seven times them.
	if delivered := a.p.Received() + b.p.Received(); delivered < keys*each || delivered >= 2*keys*each {
		t.Fatalf("the partition consumers delivered %d events in all for %d published", delivered, keys*each)
	}
	b.p.Release(context.Background())
}

// publishSteadily publishes each events of keys keys, a round of one
// event per key every 25ms, without waiting for each acknowledgement,
// and closes the returned channel once all are acknowledged.
func publishSteadily(t *testing.T, pub *natsbus.Conn, keys, each int) <-chan struct{} {
	published := make(chan struct{})
	go func() {
		defer close(published)
		p, err := pub.NewPublisher(context.Background(), natsbus.PublisherOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Error(err)
			return
		}
		defer func() {
			p.Close(context.Background())
			if st := p.Stats(); st.Failed > 0 {
				t.Errorf("%d events not acknowledged: %v", st.Failed, st.Errors)
			}
		}()
		tick := time.NewTicker(25 * time.Millisecond) // events arrive steadily, during the hand-overs and the death
		defer tick.Stop()
		for n := range each {
			for k := range keys {
				body := fmt.Sprintf(`{"key": "k%d", "n": %d}`, k, n)
				m := natsbus.Msg{Tag: "myco/ev", Body: []byte(body), Meta: natsbus.Meta{Key: fmt.Sprintf("k%d", k)}}
				if err := p.Publish(context.Background(), m, nil); err != nil {
					t.Error(err)
					return
				}
			}
			<-tick.C
		}
	}()
	return published
}

// checkPlain waits until r holds the plain lane.
func checkPlain(t *testing.T, r *replica) {
	t.Helper()
	wait.For(t, 10*time.Second, func() error {
		if !r.p.HoldsPlain() {
			return errors.New("the replica does not hold the plain lane")
		}
		return nil
	})
}

// checkPartitions waits until r holds n partitions.
func checkPartitions(t *testing.T, r *replica, n int) {
	t.Helper()
	wait.For(t, 15*time.Second, func() error {
		if got := r.p.Owned(); len(got) != n {
			return fmt.Errorf("replica holds partitions %v, want %d of them", got, n)
		}
		return nil
	})
}

// TestPartitionsResumeWhereTheReactorLeftOff: switching from the shared
// consumer to partitions, and then to another number of partitions,
// starts after what was acknowledged; nothing runs twice, nothing is
// skipped, events published on core NATS (no key in the subject) included.
func TestPartitionsResumeWhereTheReactorLeftOff(t *testing.T) {
	_, c := natstest.Start(t)
	ctx := context.Background()
	h := &numbered{t: t, c: c}
	// A stream made for partitions (trimmed to what all its consumers
	// acknowledged); the shared consumer reads it first.
	if err := c.EnsureStream(ctx, natsbus.StreamOptions{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	k, err := New(ctx, c, natsbus.StreamOptions{}, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	h.publish(10)
	if got := h.take(10); len(got) != 10 {
		t.Fatalf("shared consumer handled %v", got)
	}
	k.Close()
	// Back to 2 partitions after 3: the consumers of 2 were deleted when
	// 3 started (else they would run again what 3 handled, which the
	// stream kept for them).
	for _, n := range []int{2, 3, 2} {
		resumeWithPartitions(t, h, n)
	}
	// Back to the shared consumer: the partition consumers left on the
	// stream are reported, since the stream keeps events for them.
	var logBuf syncbuf.Buffer
	k, err = New(ctx, c, natsbus.StreamOptions{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	if out := logBuf.String(); !strings.Contains(out, "consumers=reactord-2-0,reactord-2-1") || !strings.Contains(out, "consumers=reactord-plain") {
		t.Fatalf("the shared consumer did not report the partition consumers left on the stream; log:\n%s", out)
	}
	// The shared consumer's stream (trimmed to its acknowledgement
	// floor; a work queue before, or on nats-server 2.9) is not for
	// partitions: they refuse it with what to do.
	for _, create := range []func() error{
		func() error { return c.EnsureStream(ctx, natsbus.StreamOptions{}) },
		func() error {
			_, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{c.Prefix() + ">"}, Retention: jetstream.WorkQueuePolicy})
			return err
		},
	} {
		if err := c.JetStream().DeleteStream(ctx, "REACTORD_EVENTS"); err != nil {
			t.Fatal(err)
		}
		// Created again at once, a create may fail while nats-server still
		// removes the deleted stream (see recreateGrace).
		wait.For(t, 10*time.Second, create)
		if _, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: 2}, h.handle); !errors.Is(err, natsbus.ErrWorkQueueStream) {
			t.Fatalf("partitions on the shared consumer's stream: %v, want ErrWorkQueueStream", err)
		}
	}
}

// resumeWithPartitions publishes four keyed events and one on core NATS,
// starts n partitions, and checks that they handle those five only, and
// that only their consumers remain on the stream, which keeps nothing.
func resumeWithPartitions(t *testing.T, h *numbered, n int) {
	t.Helper()
	ctx := context.Background()
	h.publish(4)
	// One on core NATS, as an older bridge publishes: no key in its
	// subject, so the plain lane reads it.
	if err := h.c.Publish(context.Background(), natsbus.Msg{Tag: "myco/ev", Body: fmt.Appendf(nil, `{"key": "k%d", "n": %d}`, h.next%7, h.next)}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
	h.next++
	p, err := NewPartitioned(ctx, h.c, PartitionOptions{Partitions: n, LeaseTTL: 2 * time.Second}, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	got := h.take(5)
	p.Stop()
	p.Release(ctx)
	slices.Sort(got)
	if next := h.next; !slices.Equal(got, []int{next - 5, next - 4, next - 3, next - 2, next - 1}) {
		t.Fatalf("%d partitions handled %v, want the last five of %d", n, got, next)
	}
	// Only this number's consumers remain, and the stream keeps
	// nothing they all acknowledged.
	names := slices.Sorted(maps.Keys(streamConsumers(t, h.c)))
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("reactord-%d-%d", n, i))
	}
	want = append(want, "reactord-plain")
	if !slices.Equal(names, want) {
		t.Fatalf("after %d partitions the stream's consumers are %v, want %v", n, names, want)
	}
	waitStreamEmpty(t, h.c)
}

// numbered publishes events numbered in order, keyed by seven keys, and
// records the numbers of those its handler handles (and acknowledges).
type numbered struct {
	t    *testing.T
	c    *natsbus.Conn
	mu   sync.Mutex
	got  []int
	next int
}

func (h *numbered) handle(m *natsbus.Message) {
	var v struct {
		N int `json:"n"`
	}
	_ = json.Unmarshal(m.Body, &v)
	h.mu.Lock()
	h.got = append(h.got, v.N)
	h.mu.Unlock()
	_ = m.Ack()
}

// publish publishes k events to the stream, each on its key's subject.
func (h *numbered) publish(k int) {
	h.t.Helper()
	for range k {
		key := fmt.Sprintf("k%d", h.next%7)
		if err := h.c.Publish(context.Background(), natsbus.Msg{Tag: "myco/ev", Body: fmt.Appendf(nil, `{"key": %q, "n": %d}`, key, h.next), Meta: natsbus.Meta{Key: key}}, natsbus.Stored); err != nil {
			h.t.Fatal(err)
		}
		h.next++
	}
}

// take waits until want events were handled and the stream holds none
// (each acknowledged: no copy of one can come any more), and returns
// those handled since the last take.
func (h *numbered) take(want int) []int {
	h.t.Helper()
	wait.For(h.t, 10*time.Second, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.got) < want {
			return fmt.Errorf("%d of %d events handled", len(h.got), want)
		}
		return nil
	})
	waitStreamEmpty(h.t, h.c)
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.got
	h.got = nil
	return out
}

// streamConsumers lists the consumers of REACTORD_EVENTS.
func streamConsumers(t *testing.T, c *natsbus.Conn) map[string]bool {
	t.Helper()
	s, err := c.JetStream().Stream(context.Background(), "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	l := s.ListConsumers(context.Background())
	for info := range l.Info() {
		out[info.Name] = true
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitStreamEmpty waits up to 5s for REACTORD_EVENTS to hold no message.
func waitStreamEmpty(t *testing.T, c *natsbus.Conn) {
	t.Helper()
	var n uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		var err error
		if n, err = c.StreamMessages(context.Background(), "REACTORD_EVENTS"); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
		}
	}
	s, _ := c.JetStream().Stream(context.Background(), "REACTORD_EVENTS")
	info, _ := s.Info(context.Background(), jetstream.WithSubjectFilter(">"))
	l := s.ListConsumers(context.Background())
	for ci := range l.Info() {
		t.Logf("consumer %s filter %q floor %d delivered %d pending %d ackpending %d", ci.Name, ci.Config.FilterSubject, ci.AckFloor.Stream, ci.Delivered.Stream, ci.NumPending, ci.NumAckPending)
	}
	t.Fatalf("the stream still holds %d events its consumers acknowledged: %v (first %d)", n, info.State.Subjects, info.State.FirstSeq)
}

// TestChangingPartitionsDrainsTheFormerOnes: 3 → 6 → 3 partitions, each
// change made while the former number's partitions still hold events (the
// replicas stopped before handling them, and more were published while
// none ran): the new number's two replicas, the second started while the
// first drains, drain them first, then their own; every event is handled
// once, each key's in order, and only the new number's consumers and the
// plain lane's remain.
func TestChangingPartitionsDrainsTheFormerOnes(t *testing.T) {
	_, c := natstest.Start(t)
	ctx := context.Background()
	d := &draining{t: t, c: c, log: newOrderLog()}
	// The consumers of 3 partitions, so that the stream keeps events for
	// them (it is trimmed to what all its consumers acknowledged).
	p0, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: 3, LeaseTTL: 2 * time.Second}, d.handle)
	if err != nil {
		t.Fatal(err)
	}
	p0.Stop()
	p0.Release(ctx)
	var drained atomic.Int64
	for step, n := range []int{3, 6, 3} {
		d.publish(60)                     // while no replica runs: the former number's subjects
		d.limit.Store(int64(d.next + 30)) // all of them, then half of this number's
		p, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: n, LeaseTTL: 2 * time.Second,
			OnChange: func(change string, _ int) {
				if change == "drained" {
					drained.Add(1)
				}
			}}, d.handle)
		if err != nil {
			t.Fatal(err)
		}
		// A second replica joins while the first drains: it must keep
		// this number's consumers (and their events) and share the drain.
		p2, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: n, LeaseTTL: 2 * time.Second}, d.handle)
		if err != nil {
			t.Fatal(err)
		}
		d.publish(60) // this number's subjects
		d.waitHandled(d.limit.Load())
		// Release acknowledges what was handled and waits for the server
		// to confirm it; the events not handled wait for the next number.
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		p.Stop()
		p2.Stop()
		p.Release(rctx)
		p2.Release(rctx)
		cancel()
		if step > 0 && drained.Load() == 0 {
			t.Fatalf("%d partitions: no former partition reported drained", n)
		}
		drained.Store(0)
	}
	// The last number handles everything.
	d.limit.Store(int64(d.next))
	p, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: 3, LeaseTTL: 2 * time.Second}, d.handle)
	if err != nil {
		t.Fatal(err)
	}
	d.waitHandled(int64(d.next))
	// Every event acknowledged: no copy of one can come any more.
	waitStreamEmpty(t, c)
	p.Stop()
	p.Release(ctx)
	distinct, dups, ooo := d.log.check()
	if distinct != d.next || dups != 0 || ooo != 0 {
		t.Fatalf("%d events: %d handled, %d twice, %d out of order", d.next, distinct, dups, ooo)
	}
	names := slices.Sorted(maps.Keys(streamConsumers(t, c)))
	if want := []string{"reactord-3-0", "reactord-3-1", "reactord-3-2", "reactord-plain"}; !slices.Equal(names, want) {
		t.Fatalf("consumers left: %v, want %v", names, want)
	}
}

// draining publishes events of twelve keys, numbered per key, and
// handles them (in an orderLog) up to a limit: those after it are left
// unacknowledged, as by a replica stopping.
type draining struct {
	t              *testing.T
	c              *natsbus.Conn
	log            *orderLog
	limit, handled atomic.Int64
	next           int
}

func (d *draining) handle(m *natsbus.Message) {
	if d.handled.Load() >= d.limit.Load() {
		return // stopping: left unacknowledged, for the next owner
	}
	d.handled.Add(1)
	var v struct {
		Key string `json:"key"`
		N   int    `json:"n"`
	}
	_ = json.Unmarshal(m.Body, &v)
	d.log.mu.Lock()
	d.log.seen[v.Key] = append(d.log.seen[v.Key], v.N)
	d.log.mu.Unlock()
	_ = m.Ack()
}

// publish publishes k events to the stream, each on its key's subject.
func (d *draining) publish(k int) {
	d.t.Helper()
	const keys = 12
	for range k {
		key := fmt.Sprintf("web%d", d.next%keys)
		if err := d.c.Publish(context.Background(), natsbus.Msg{Tag: "myco/ev", Body: fmt.Appendf(nil, `{"key": %q, "n": %d}`, key, d.next/keys), Meta: natsbus.Meta{Key: key}}, natsbus.Stored); err != nil {
			d.t.Fatal(err)
		}
		d.next++
	}
}

// waitHandled waits until want events were handled.
func (d *draining) waitHandled(want int64) {
	d.t.Helper()
	wait.For(d.t, 20*time.Second, func() error {
		if n := d.handled.Load(); n < want {
			return fmt.Errorf("%d of %d events handled", n, want)
		}
		return nil
	})
}
