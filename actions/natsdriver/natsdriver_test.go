package natsdriver

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/tcpproxy"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// TestDriverPublishesAndConfirms: each reaction arrives on
// <prefix><state> with the hop and cause headers, in order, and the
// background flushes confirm every one without a round trip per reaction.
func TestDriverPublishesAndConfirms(t *testing.T) {
	_, c := natstest.Start(t)
	exec, err := natsbus.Connect(natsbus.ConnOptions{URL: c.NATS().ConnectedUrl(), Name: "executor"})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	var mu sync.Mutex
	var got []string
	var metas []natsbus.Meta
	sub, err := exec.SubscribeRaw("test.exec.>", func(subject string, body []byte, m natsbus.Meta) {
		mu.Lock()
		got = append(got, subject+" "+string(body))
		metas = append(metas, m)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	_ = exec.Flush(context.Background())

	d := New(c, "test.exec.", "reactord-test")
	const n = 500
	for i := range n {
		ch := benchChunk()
		ch.Set("order", int64(i))
		if _, err := d.Do(context.Background(), actions.Action{Tag: "salt/minion/web1/start", Chunk: ch, Hop: 1}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 5*time.Second, func() error {
		if s := d.Stats(); s.Confirmed != n {
			return fmt.Errorf("stats %+v", s)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != n {
			return fmt.Errorf("executor got %d of %d", len(got), n)
		}
		return nil
	})
	s := d.Stats()
	if s.Published != n || s.Unconfirmed != 0 || s.Flushes < 1 || s.Flushes >= n {
		t.Errorf("stats %+v: want %d confirmed in fewer flushes", s, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, g := range got {
		if !strings.HasPrefix(g, "test.exec.local {\"tag\":\"salt/minion/web1/start\",\"chunk\":{") || !strings.Contains(g, fmt.Sprintf(`"order":%d}`, i)) {
			t.Fatalf("reaction %d: %s", i, g)
		}
		if m := metas[i]; m.Hop != 2 || m.Cause != "salt/minion/web1/start" || m.Origin != "reactord-test" {
			t.Fatalf("reaction %d meta %+v", i, m)
		}
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// proxiedDriver starts a server (with the event stream: JetStream mode)
// and an executor counting the reactions it gets, and returns a driver
// connected to the server through a proxy.
func proxiedDriver(t *testing.T, stream bool) (*Driver, *tcpproxy.Proxy, *atomic.Int64) {
	t.Helper()
	srv, exec := natstest.Start(t)
	if stream {
		if err := exec.EnsureStream(context.Background(), natsbus.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := new(atomic.Int64)
	sub, err := exec.SubscribeRaw("test.exec.>", func(string, []byte, natsbus.Meta) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Stop)
	_ = exec.Flush(context.Background())
	proxy := tcpproxy.Start(t, srv.Addr())
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: "nats://" + proxy.Addr(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	d := New(c, "test.exec.", "reactord-test")
	t.Cleanup(func() { _ = d.Close(context.Background()); c.Close() })
	return d, proxy, got
}

// down takes the proxy down and waits until d's connection noticed.
func down(t *testing.T, d *Driver, proxy *tcpproxy.Proxy) {
	t.Helper()
	proxy.Down()
	wait.For(t, 5*time.Second, func() error {
		if d.conn.Connected() {
			return fmt.Errorf("the client has not noticed the outage")
		}
		return nil
	})
}

// TestDriverConfirmsAcrossAnOutage: in core NATS mode, reactions handed
// over while the server cannot be reached wait in the connection's
// reconnect buffer and go out on the next connection: the driver counts
// them confirmed once it is back (natsbus.FlushSince), and the executor
// gets each once.
func TestDriverConfirmsAcrossAnOutage(t *testing.T) {
	d, proxy, got := proxiedDriver(t, false)
	do := func() {
		t.Helper()
		if _, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()}); err != nil {
			t.Fatal(err)
		}
	}
	confirmed := func(n int64) {
		t.Helper()
		wait.For(t, 10*time.Second, func() error {
			if s := d.Stats(); s.Confirmed != n || s.Unconfirmed != 0 {
				return fmt.Errorf("stats %+v, want %d confirmed", s, n)
			}
			if g := got.Load(); g != n {
				return fmt.Errorf("the executor got %d, want %d", g, n)
			}
			return nil
		})
	}
	do()
	confirmed(1)
	down(t, d, proxy)
	for range 3 {
		do()
	}
	time.Sleep(300 * time.Millisecond) // the flush waits for the connection
	if s := d.Stats(); s.Confirmed != 1 || s.Unconfirmed != 0 {
		t.Errorf("during the outage: stats %+v, want 1 confirmed and none unconfirmed", s)
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	confirmed(4)
	do()
	confirmed(5)
}

// TestDriverWaitsAcrossAnOutage: in JetStream mode a reaction handed over
// while the server cannot be reached waits in the reconnect buffer, and Do
// returns once the next connection confirmed it: no error, so the event is
// not redelivered and the executor gets the reaction once.
func TestDriverWaitsAcrossAnOutage(t *testing.T) {
	d, proxy, got := proxiedDriver(t, true)
	do := func() error {
		_, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()})
		return err
	}
	if err := do(); err != nil {
		t.Fatal(err)
	}
	down(t, d, proxy)
	done := make(chan error, 1)
	go func() { done <- do() }()
	select {
	case err := <-done:
		t.Fatalf("Do returned during the outage: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Do across the outage: %v", err)
	}
	wait.For(t, 5*time.Second, func() error {
		if g := got.Load(); g != 2 {
			return fmt.Errorf("the executor got %d, want 2", g)
		}
		return nil
	})
	if s := d.Stats(); s.Published != 2 || s.Confirmed != 2 {
		t.Errorf("stats %+v, want 2 published and confirmed", s)
	}
}

// TestDriverCountsUnconfirmed: against a server that stops answering (no
// JetStream stream: core NATS mode), Do still returns at once, and the flush that times out counts the
// reactions as unconfirmed and logs them; on a closed connection Do fails
// with a retryable error.
func TestDriverCountsUnconfirmed(t *testing.T) {
	url := muteServer(t)
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: url, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var buf syncbuf.Buffer
	d := New(c, "", "reactord-test")
	d.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	d.FlushTimeout = 300 * time.Millisecond
	var start time.Time
	for i := range 3 {
		if i == 1 { // the first Do asked whether a stream exists: no answer
			start = time.Now()
		}
		if _, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()}); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Errorf("Do waited %v for the server", el)
	}
	// The count comes first, then the log line (settle): wait for both.
	wait.For(t, 5*time.Second, func() error {
		if s := d.Stats(); s.Unconfirmed != 3 || s.Confirmed != 0 {
			return fmt.Errorf("stats %+v", s)
		}
		if l := buf.String(); !strings.Contains(l, "not confirmed") || !strings.Contains(l, "reactions_since_last_line=") {
			return fmt.Errorf("log: %s", l)
		}
		return nil
	})
	if err := d.Close(context.Background()); err != nil {
		t.Errorf("close with nothing pending: %v", err)
	}
	c.Close()
	_, err = d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()})
	if err == nil || !actions.IsRetryable(err) {
		t.Errorf("Do on a closed connection: %v", err)
	}
}

// muteServer is a NATS server that accepts a client and then answers
// nothing more: publishes go nowhere and flushes never return.
func muteServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				fmt.Fprintf(conn, "INFO {\"server_id\":\"mute\",\"version\":\"2.10.0\",\"proto\":1,\"headers\":true,\"max_payload\":1048576}\r\n")
				r := bufio.NewReader(conn)
				answered := false
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "PING") && !answered {
						answered = true // the PING of the handshake, only
						fmt.Fprintf(conn, "PONG\r\n")
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// TestDriverWaitsInJetStreamMode: when a stream captures the event
// subjects, Do returns only once a flush confirmed its reaction (an event
// is acknowledged after its reactions reached the server); a closed
// connection is Do's retryable error.
func TestDriverWaitsInJetStreamMode(t *testing.T) {
	_, c := natstest.Start(t)
	if err := c.EnsureStream(context.Background(), natsbus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	d := New(c, "test.exec.", "reactord-test")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := d.Stats(); s.Published != 400 || s.Confirmed != 400 || s.Unconfirmed != 0 || s.Flushes != 400 {
		t.Errorf("stats %+v", s)
	}
	c.Close()
	if _, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()}); err == nil || !actions.IsRetryable(err) {
		t.Errorf("Do on a closed connection: %v", err)
	}
	_ = d.Close(context.Background())
}

// TestDriverStoresWhereAStreamCaptures: when a JetStream stream captures
// a reaction's subject, Do publishes it to the stream and returns once the
// stream acknowledged it, with the action's Key as the message id: the
// same reaction of a redelivered event is stored once, another reaction
// is stored, and a subject no stream captures still goes out with core
// NATS.
func TestDriverStoresWhereAStreamCaptures(t *testing.T) {
	_, c := natstest.Start(t)
	ctx := context.Background()
	js, err := jetstream.New(c.NATS())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EXEC", Subjects: []string{"test.exec.local"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	var runner atomic.Int64
	sub, err := c.SubscribeRaw("test.exec.runner", func(string, []byte, natsbus.Meta) { runner.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	d := New(c, "test.exec.", "reactord-test")
	defer d.Close(ctx)
	do := func(state, key string) {
		t.Helper()
		ch := benchChunk()
		ch.Set("state", state)
		if _, err := d.Do(ctx, actions.Action{Tag: "salt/minion/web1/start", Chunk: ch, Hop: 1, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	do("local", "ev-1/start.sls/highstate")
	do("local", "ev-1/start.sls/highstate") // the event delivered again
	do("local", "ev-2/start.sls/highstate")
	do("local", "") // no message id: stored, never dropped
	do("runner", "ev-1/start.sls/highstate")
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Errorf("the stream holds %d reactions, want 3 (one duplicate dropped)", info.State.Msgs)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(natsbus.HeaderMsgID); got != "ev-1/start.sls/highstate" {
		t.Errorf("message id %q", got)
	}
	if got := m.Header.Get(natsbus.HeaderHop); got != "2" {
		t.Errorf("hop %q, want 2", got)
	}
	if !strings.Contains(string(m.Data), `"tgt":"web1"`) {
		t.Errorf("body %s", m.Data)
	}
	wait.For(t, 5*time.Second, func() error {
		if n := runner.Load(); n != 1 {
			return fmt.Errorf("%d runner reactions over core NATS, want 1", n)
		}
		return nil
	})
	if st := d.Stats(); st.Published != 5 || st.Confirmed < 4 {
		t.Errorf("stats %+v", st)
	}
}

// TestDurableDriverNeverGuesses: for a daemon that consumes JetStream
// (Durable), a server that has not said whether a stream stores the
// reaction's subject (here: it answers nothing) makes Do fail with a
// retryable error, so the event is redelivered, instead of publishing the
// reaction with core NATS, where a stream without a leader would not store
// it while the event is acknowledged. The next Do asks the server again.
func TestDurableDriverNeverGuesses(t *testing.T) {
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: muteServer(t), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	d := New(c, "", "reactord-test")
	d.Durable, d.FlushTimeout = true, 300*time.Millisecond
	for i := range 2 {
		_, err := d.Do(context.Background(), actions.Action{Tag: "t", Chunk: benchChunk()})
		if err == nil || !actions.IsRetryable(err) || !strings.Contains(err.Error(), "has not said") {
			t.Fatalf("Do %d against a server that does not answer: %v, want a retryable error", i+1, err)
		}
	}
	if s := d.Stats(); s.Published != 0 {
		t.Errorf("stats %+v: published with no answer from the server", s)
	}
}
