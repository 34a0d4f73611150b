package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/reactord/reactord/natsbus/embedded"
)

// TestPublishEventIntoCoreDaemon is the bridge publishing into the default
// daemon: JetStream is enabled on the server but no stream captures the
// events, and the daemon's queue subscription receives them. Each event must
// arrive exactly once and promptly (a JetStream publish would be received by
// that subscription, never answered, and retried). Once a stream exists, the
// same call goes to JetStream with its message id (a repeat is de-duplicated).
func TestPublishEventIntoCoreDaemon(t *testing.T) {
	srv, pub := startServer(t)
	sub, err := Connect(ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	var mu sync.Mutex
	got := map[string]int{}
	if _, err := sub.SubscribeQueue("", "reactord", func(m *Message) {
		mu.Lock()
		got[string(m.Body)]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 50
	start := time.Now()
	for i := range n {
		body := fmt.Sprintf(`{"tag":"salt/minion/web%d/start","data":{}}`, i)
		if err := pub.Publish(ctx, Msg{Tag: fmt.Sprintf("salt/minion/web%d/start", i), Body: []byte(body), Meta: Meta{MsgID: fmt.Sprint(i)}}, Event); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("%d publishes took %v: something waited for an answer", n, d)
	}
	checkFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != n {
			return fmt.Errorf("%d distinct events received", len(got))
		}
		return nil
	})
	// A last event from the same connection comes after any copy of the
	// earlier ones (one publisher's messages reach a subscriber in order,
	// and the handler takes them one at a time): once it is in, every
	// copy is counted.
	const last = `{"tag":"last","data":{}}`
	if err := pub.Publish(context.Background(), Msg{Tag: "last", Body: []byte(last)}, Core); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got[last] == 0 {
			return errors.New("the last event not received")
		}
		return nil
	})
	mu.Lock()
	delete(got, last)
	for body, c := range got {
		if c != 1 {
			t.Errorf("%s received %d times", body, c)
		}
	}
	mu.Unlock()
	if s := pub.EventStream(ctx); s != "" {
		t.Fatalf("EventStream = %q with no stream", s)
	}

	// Now the JetStream daemon's stream exists.
	if err := pub.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	pub.forgetStream()
	if s := pub.EventStream(ctx); s != "REACTORD_EVENTS" {
		t.Fatalf("EventStream = %q, want REACTORD_EVENTS", s)
	}
	for range 2 {
		if err := pub.Publish(ctx, Msg{Tag: "a/b", Body: []byte(`{"tag":"a/b","data":{}}`), Meta: Meta{MsgID: "same-id"}}, Event); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := pub.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || m != 1 {
		t.Errorf("stream holds %d messages (%v), want 1: the repeat is a duplicate", m, err)
	}
}

// TestMaxPayload: the embedded server's limit defaults to 8 MiB, is
// configurable, and the client learns it.
func TestMaxPayload(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{0, embedded.DefaultMaxPayload}, {2 << 20, 2 << 20}} {
		srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", MaxPayload: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Connect(ConnOptions{URL: srv.ClientURL()})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.MaxPayload(); got != tc.want {
			t.Errorf("MaxPayload set %d: client sees %d, want %d", tc.set, got, tc.want)
		}
		big := make([]byte, tc.want+1)
		if err := c.Publish(context.Background(), Msg{Tag: "x", Body: big}, Core); err == nil {
			t.Errorf("a %d-byte message was accepted over the %d limit", len(big), tc.want)
		}
		c.Close()
		srv.Shutdown()
	}
}

// TestPublishDelivered: with no subscriber the publish reports
// ErrNoSubscriber at once; with one, it succeeds and the subscriber gets
// the event once.
func TestPublishDelivered(t *testing.T) {
	srv, pub := startServer(t)
	ctx := context.Background()
	start := time.Now()
	if err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: []byte(`{"tag":"salt/minion/web1/start","data":{}}`)}, Delivered); !errors.Is(err, ErrNoSubscriber) {
		t.Fatalf("no subscriber: err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the no-subscriber answer took %v", d)
	}
	sub, err := Connect(ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	var mu sync.Mutex
	n := 0
	if _, err := sub.SubscribeQueue("", "reactord", func(*Message) { mu.Lock(); n++; mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush(ctx)
	for range 20 {
		if err := pub.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: []byte(`{"tag":"salt/minion/web1/start","data":{}}`)}, Delivered); err != nil {
			t.Fatalf("with a subscriber: %v", err)
		}
	}
	checkFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if n != 20 {
			return fmt.Errorf("%d received", n)
		}
		return nil
	})
}

// TestPublishDeliveredConcurrent: publishes under way at once each get
// their own answer (no lock serialises their round trips): those on a
// subject someone subscribes to succeed, the others report
// ErrNoSubscriber.
func TestPublishDeliveredConcurrent(t *testing.T) {
	srv, pub := startServer(t)
	ctx := context.Background()
	sub, err := Connect(ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	const n = 64
	var received sync.WaitGroup
	for i := range n / 2 {
		received.Add(1)
		var once sync.Once
		if _, err := sub.NATS().Subscribe(Subject(pub.Prefix(), fmt.Sprintf("yes/%d", i)), func(*nats.Msg) { once.Do(received.Done) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		tag := fmt.Sprintf("yes/%d", i/2)
		if i%2 == 1 {
			tag = fmt.Sprintf("no/%d", i/2)
		}
		wg.Go(func() {
			for range 5 {
				err := pub.Publish(ctx, Msg{Tag: tag, Body: []byte(`{}`)}, Delivered)
				if want := i%2 == 1; errors.Is(err, ErrNoSubscriber) != want || (!want && err != nil) {
					t.Errorf("%s: err = %v, want ErrNoSubscriber %v", tag, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	received.Wait()
}
