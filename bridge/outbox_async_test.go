package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestSpoolHandsOutUntilReleased: next hands items out in order across
// memory and disk without removing them; release removes the oldest;
// rewind hands the rest out again; close keeps what was handed out and
// not released, for the next run.
func TestSpoolHandsOutUntilReleased(t *testing.T) {
	dir := t.TempDir()
	it := func(i int) item {
		return item{tag: fmt.Sprintf("t/%d", i), body: []byte(strings.Repeat("b", 100)), msgID: fmt.Sprint(i)}
	}
	s, err := newSpool(dir, 3*it(0).size(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // 3 in memory, 5 on disk
		if _, err := s.push(it(i)); err != nil {
			t.Fatal(err)
		}
	}
	take := func(n int) []string {
		var ids []string
		for range n {
			got, ok := s.next()
			if !ok {
				break
			}
			ids = append(ids, got.msgID)
		}
		return ids
	}
	if got := strings.Join(take(5), ","); got != "0,1,2,3,4" {
		t.Fatalf("handed out %s", got)
	}
	if mem, disk, _ := s.len(); mem != 3 || disk != 5 {
		t.Fatalf("held %d in memory, %d on disk: handing out removed some", mem, disk)
	}
	if err := s.release(4); err != nil { // 0-2 from memory, 3 from disk
		t.Fatal(err)
	}
	if mem, disk, _ := s.len(); mem != 0 || disk != 4 {
		t.Fatalf("held %d in memory, %d on disk after releasing 4", mem, disk)
	}
	s.rewind()
	if got := strings.Join(take(2), ","); got != "4,5" {
		t.Fatalf("after rewind handed out %s", got)
	}
	// Stop with 4 and 5 handed out: all four stay for the next run.
	if lost, err := s.close(); lost != 0 || err != nil {
		t.Fatalf("close: lost %d, %v", lost, err)
	}
	s, err = newSpool(dir, 3*it(0).size(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s.restored != 4 {
		t.Fatalf("the next run found %d events, want 4", s.restored)
	}
	if got := strings.Join(take(10), ","); got != "4,5,6,7" {
		t.Fatalf("the next run handed out %s", got)
	}
	if err := s.release(4); err != nil {
		t.Fatal(err)
	}
	if mem, disk, _ := s.len(); mem != 0 || disk != 0 {
		t.Fatalf("held %d in memory, %d on disk after releasing all", mem, disk)
	}
	s.close()
}

// asyncEnv is an embedded NATS server (each write flushed, as the
// daemon's), its event stream, and a natsbus connection: the outbox's
// BulkPublisher.
func asyncEnv(t *testing.T) (*natsbus.Conn, jetstream.Stream) {
	t.Helper()
	_, c, s := asyncServer(t)
	return c, s
}

func asyncServer(t *testing.T) (*embedded.Server, *natsbus.Conn, jetstream.Stream) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "outbox", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStream(t.Context(), natsbus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(t.Context(), "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, s
}

func streamMsgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestOutboxPublishesInBatches: through natsbus.Conn the outbox publishes
// a burst in atomic batches, every event once (an id offered twice is
// stored once), and empties its spool.
func TestOutboxPublishesInBatches(t *testing.T) {
	c, s := asyncEnv(t)
	o, err := NewOutbox(OutboxConfig{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, c)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		tag := fmt.Sprintf("salt/minion/m%d/start", i%50)
		o.Offer(tag, []byte(`{"tag":"`+tag+`","data":{"n":`+fmt.Sprint(i)+`}}`), fmt.Sprint("id-", i%2900))
	}
	ctx, cancel := context.WithCancel(t.Context())
	stop := runOutbox(ctx, o)
	// Past the wait, the checks below say what is missing.
	_ = wait.PollEvery(30*time.Second, 10*time.Millisecond, func() error {
		if o.Stats().Published.Load() < n {
			return errors.New("not yet")
		}
		return nil
	})
	cancel()
	stop()
	if got := o.Stats().Published.Load(); got != n {
		t.Fatalf("published %d of %d (errors %d)", got, n, o.Stats().PublishErrors.Load())
	}
	if got := streamMsgs(t, s); got != 2900 {
		t.Fatalf("the stream holds %d, want 2900 (100 ids offered twice)", got)
	}
	if mem, disk, _ := o.Pending(); mem+disk != 0 {
		t.Fatalf("%d in memory, %d on disk still held", mem, disk)
	}
}

// TestOutboxReleasesOnlyOnAcknowledgement: while no stream takes events
// (deleted), they stay in the spool; stopping keeps them on disk for the
// next run, which publishes them, in order, once the stream is back.
func TestOutboxReleasesOnlyOnAcknowledgement(t *testing.T) {
	srv, c, _ := asyncServer(t)
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	o, err := NewOutbox(OutboxConfig{Dir: dir, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: quiet}, c)
	if err != nil {
		t.Fatal(err)
	}
	c.EventStream(ctx) // known to exist (for a few seconds): the first events go to the batches
	if err := c.JetStream().DeleteStream(ctx, "REACTORD_EVENTS"); err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := range n {
		o.Offer("a/b", []byte(`{"tag":"a/b","data":{"n":`+fmt.Sprint(i)+`}}`), fmt.Sprint("id-", i))
	}
	rctx, cancel := context.WithCancel(ctx)
	stop := runOutbox(rctx, o)
	// Past the wait, the checks below say what is missing.
	_ = wait.PollEvery(20*time.Second, 10*time.Millisecond, func() error {
		if o.Stats().PublishErrors.Load() < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if got := o.Stats().Published.Load(); got != 0 {
		t.Fatalf("published %d with no stream", got)
	}
	if mem, disk, _ := o.Pending(); mem+disk != n {
		t.Fatalf("%d in memory and %d on disk held, want %d", mem, disk, n)
	}
	if o.Healthy() {
		t.Error("the outbox reports healthy while nothing takes its events")
	}
	cancel()
	stop() // Close: what is held goes to disk

	// A new connection (the bridge's next run): the first one remembers
	// for a few seconds that no stream exists.
	c, err = natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "outbox2", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStream(ctx, natsbus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	o, err = NewOutbox(OutboxConfig{Dir: dir, Logger: quiet}, c)
	if err != nil {
		t.Fatal(err)
	}
	if mem, disk, _ := o.Pending(); mem+disk != n {
		t.Fatalf("the next run found %d in memory and %d on disk, want %d", mem, disk, n)
	}
	rctx, cancel = context.WithCancel(ctx)
	stop = runOutbox(rctx, o)
	// Past the wait, the checks below say what is missing.
	_ = wait.PollEvery(20*time.Second, 10*time.Millisecond, func() error {
		if o.Stats().Published.Load() < n {
			return errors.New("not yet")
		}
		return nil
	})
	cancel()
	stop()
	if got := streamMsgs(t, s); got != n {
		t.Fatalf("the stream holds %d, want %d", got, n)
	}
	// In order: the stream's sequence follows the ids.
	for seq := uint64(1); seq <= n; seq += 37 {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get("Nats-Msg-Id"); id != fmt.Sprint("id-", seq-1) {
			t.Fatalf("sequence %d holds %s", seq, id)
		}
	}
}
