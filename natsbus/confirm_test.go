package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/tcpproxy"
)

// waitDisconnected waits until c noticed that its connection is gone.
func waitDisconnected(t *testing.T, c *Conn) {
	t.Helper()
	checkFor(t, 5*time.Second, func() error {
		if c.Connected() {
			return errors.New("the client has not noticed the cut")
		}
		return nil
	})
}

// receipts counts what proxiedPublisher's subscriber received, and keeps
// the last body.
type receipts struct {
	n    atomic.Int64
	last atomic.Value // string
}

// Load is how many events were received.
func (r *receipts) Load() int64 { return r.n.Load() }

// proxiedPublisher starts a server with a subscriber on the event
// subjects, counting what it receives, and connects a publisher to it
// through a proxy.
func proxiedPublisher(t *testing.T) (*Conn, *tcpproxy.Proxy, *receipts) {
	t.Helper()
	srv, _ := startServer(t)
	sub, err := Connect(ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	received := new(receipts)
	if _, err := sub.SubscribeQueue("", "reactord", func(m *Message) { received.n.Add(1); received.last.Store(string(m.Body)) }); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.Start(t, srv.Addr())
	pub, err := Connect(ConnOptions{URL: "nats://" + proxy.Addr(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	return pub, proxy, received
}

// TestPublishDeliveredLostInReconnect: a core publish written to a
// connection that dies before the server read it, confirmed by a flush
// whose PING went out on the next connection (the flush succeeds there),
// is reported as failed with ErrReconnected: the subscriber never got it.
// A plain flush would have taken it for delivered, and the bridge would
// have dropped the event from its spool.
func TestPublishDeliveredLostInReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub, proxy, received := proxiedPublisher(t)
	body := []byte(`{"tag":"salt/minion/web1/start","data":{}}`)
	if err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: body}, Delivered); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		if n := received.Load(); n != 1 {
			return fmt.Errorf("%d received, want 1", n)
		}
		return nil
	})

	// The publish goes into a connection that swallows it; right after
	// it, before its Mark is taken and before the flush, the connection
	// dies and the client notices (so the flush's PING goes out on the
	// next connection, and a Mark taken after the publish would see the
	// client reconnecting).
	proxy.Swallow()
	pub.afterPublish = func() { proxy.Cut(); waitDisconnected(t, pub) }
	err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: body}, Delivered)
	pub.afterPublish = nil
	if !errors.Is(err, ErrReconnected) {
		t.Errorf("a publish lost with its connection: err = %v, want ErrReconnected", err)
	}
	if !pub.Connected() {
		t.Error("the flush returned before the client was connected again")
	}
	// The lost publish never arrives; the next one does, as the only one.
	if err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: body}, Delivered); err != nil {
		t.Fatalf("after the reconnection: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		if n := received.Load(); n != 2 {
			return fmt.Errorf("%d received, want 2", n)
		}
		return nil
	})
	// A last publish on the new connection: the subscriber gets events
	// in the order the server took them, and the lost one, had it reached
	// the server, came before (on the connection that died first).
	last := []byte(`{"tag":"salt/minion/web1/start","data":{"last":true}}`)
	if err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: last}, Confirmed); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		if got, _ := received.last.Load().(string); got != string(last) {
			return errors.New("the last publish has not arrived")
		}
		return nil
	})
	if n := received.Load(); n != 3 {
		t.Errorf("%d received, want 3: the publish reported lost arrived", n)
	}
}

// TestFlushSinceConfirmsTheReconnectBuffer: a publish made while the
// client reconnects (the server refuses connections) waits in its
// reconnect buffer and goes out first on the next connection: FlushSince
// confirms it there, whether its round trip started during the outage or
// after it. Publishes that span the outage (a Mark taken before it, or
// merged with one) are not confirmed, nor, after a second outage, one
// buffered in the first.
func TestFlushSinceConfirmsTheReconnectBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub, proxy, received := proxiedPublisher(t)
	subject := Subject(pub.prefix, "salt/minion/web1/start")
	body := []byte(`{"tag":"salt/minion/web1/start","data":{}}`)
	publishMarked := func() (Mark, error) {
		return pub.Marked(func() error { return pub.Publish(ctx, Msg{Subject: subject, Body: body}, Core) })
	}
	series := pub.Mark()
	before, err := publishMarked()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.FlushSince(ctx, before); err != nil {
		t.Fatalf("a publish on a live connection: %v", err)
	}

	proxy.Down()
	waitDisconnected(t, pub)
	mark, err := publishMarked()
	if err != nil {
		t.Fatal(err)
	}
	confirmed := make(chan error, 1)
	go func() { confirmed <- pub.FlushSince(ctx, mark) }()
	select {
	case err := <-confirmed:
		t.Fatalf("FlushSince returned while the client could not reconnect: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// Another publish in the same outage, confirmed only once the client
	// is connected again.
	later, err := publishMarked()
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	if err := <-confirmed; err != nil {
		t.Errorf("a publish from the reconnect buffer, confirmed while reconnecting: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		if !pub.Connected() {
			return errors.New("not connected again")
		}
		return nil
	})
	if err := pub.FlushSince(ctx, later); err != nil {
		t.Errorf("a publish from the reconnect buffer, confirmed after the reconnection: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		if n := received.Load(); n != 3 {
			return fmt.Errorf("%d received, want 3", n)
		}
		return nil
	})
	if err := pub.FlushSince(ctx, series); !errors.Is(err, ErrReconnected) {
		t.Errorf("a series that spans the outage: %v, want ErrReconnected", err)
	}
	if err := pub.FlushSince(ctx, before.Merge(later)); !errors.Is(err, ErrReconnected) {
		t.Errorf("a publish before the outage with one during it: %v, want ErrReconnected", err)
	}
	now, err := publishMarked()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.FlushSince(ctx, now.Merge(Mark{})); err != nil {
		t.Errorf("a publish on the new connection: %v", err)
	}

	// The next outage: a publish buffered in the last one is no longer
	// confirmed (it went out on a connection that died since).
	proxy.Down()
	waitDisconnected(t, pub)
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		if !pub.Connected() {
			return errors.New("not connected again")
		}
		return nil
	})
	if err := pub.FlushSince(ctx, later); !errors.Is(err, ErrReconnected) {
		t.Errorf("a publish buffered in the previous outage: %v, want ErrReconnected", err)
	}
}
