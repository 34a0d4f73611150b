package natsbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// quietRetries is a Publisher that retries 3 times and logs nothing.
func quietRetries(t *testing.T, c *Conn, o PublisherOptions) *Publisher {
	t.Helper()
	o.Retries, o.Logger = 3, slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := c.NewPublisher(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPublisherRetries: an event nobody stored (no stream yet: no
// responders) is republished (by the client, or by the publisher) and
// acknowledged once the stream exists; one that never finds a stream fails
// after 3 retries, with the error.
func TestPublisherRetries(t *testing.T) {
	_, c := startServer(t)
	ctx := context.Background()
	p := quietRetries(t, c, PublisherOptions{MaxBatch: 4})
	if err := p.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: []byte(`{"tag":"salt/minion/web1/start","data":{}}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil { // the server answered "no responders"
		t.Fatal(err)
	}
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	st := p.Stats()
	if st.Acked != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 1 {
		t.Fatalf("stream holds %d (%v)", n, err)
	}

	c.prefix = "nostream."
	p = quietRetries(t, c, PublisherOptions{MaxBatch: 4})
	if err := p.Publish(ctx, Msg{Tag: "x", Body: []byte(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	st = p.Stats()
	if st.Acked != 0 || st.Failed != 1 || st.Retried != 3 || len(st.Errors) != 1 || !(errors.Is(st.Errors[0], jetstream.ErrNoStreamResponse) || errors.Is(st.Errors[0], nats.ErrNoResponders)) {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Publish(ctx, Msg{Tag: "x", Body: nil}, nil); err == nil {
		t.Error("Publish after Close succeeded")
	}
}

// TestPublisherRetriesFor: with RetryFor, an event that gets no
// acknowledgement (no stream answers, as while a stream elects a leader)
// is sent again past Retries until the stream answers, and stored once;
// without it, it fails after its one try.
func TestPublisherRetriesFor(t *testing.T) {
	_, c := startServer(t)
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	once, err := c.NewPublisher(ctx, PublisherOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := once.Publish(ctx, Msg{Tag: "a/b", Body: []byte(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	once.Close(ctx)
	if st := once.Stats(); st.Failed != 1 || st.Retried != 0 {
		t.Fatalf("without RetryFor: stats %+v, want one failure and no retry", st)
	}

	p, err := c.NewPublisher(ctx, PublisherOptions{RetryFor: 20 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan error, 1)
	if err := p.Publish(ctx, Msg{Tag: "a/b", Body: []byte(`{}`), Meta: Meta{MsgID: "one"}}, func(err error) { settled <- err }); err != nil {
		t.Fatal(err)
	}
	// The stream appears once the event was sent again past the 4 tries
	// Retries 3 would have allowed.
	checkFor(t, 15*time.Second, func() error {
		if n := p.Stats().Retried; n < 4 {
			return fmt.Errorf("retried %d times", n)
		}
		return nil
	})
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-settled; err != nil {
		t.Fatalf("the event failed: %v", err)
	}
	p.Close(ctx)
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 1 {
		t.Fatalf("stream holds %d (%v), want 1", n, err)
	}
}

// TestPublisherEventMode: a Publisher with How Event publishes with core
// NATS while no stream captures the events (done says whether a
// subscriber received each, before Publish returns, and nothing of
// JetStream is set up), and to the stream, with the events' ids, once one
// does. Conn.Publish with Confirmed confirms a core publish by a round
// trip.
func TestPublisherEventMode(t *testing.T) {
	srv, c := startServer(t)
	ctx := t.Context()
	p, err := c.NewPublisher(ctx, PublisherOptions{How: Event, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	body := []byte(`{"tag":"a/b","data":{}}`)
	var got error
	if err := p.Publish(ctx, Msg{Tag: "a/b", Body: body}, func(err error) { got = err }); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got, ErrNoSubscriber) || p.Atomic() {
		t.Fatalf("no stream, no subscriber: done got %v (atomic %t), want ErrNoSubscriber and no JetStream side", got, p.Atomic())
	}
	sub, err := Connect(ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	var received atomic.Int64
	if _, err := sub.SubscribeQueue("", "reactord", func(*Message) { received.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got = errors.New("done not called")
	if err := p.Publish(ctx, Msg{Tag: "a/b", Body: body}, func(err error) { got = err }); err != nil || got != nil {
		t.Fatalf("with a subscriber: %v, done got %v", err, got)
	}
	if err := c.Publish(ctx, Msg{Tag: "a/b", Body: body}, Confirmed); err != nil {
		t.Fatalf("Confirmed: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		if n := received.Load(); n != 2 {
			return fmt.Errorf("%d received, want 2", n)
		}
		return nil
	})

	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	c.forgetStream() // not wait for the cached answer to age
	settled := make(chan error, 2)
	for range 2 { // the same id twice: stored once
		if err := p.Publish(ctx, Msg{Tag: "a/b", Body: body, Meta: Meta{MsgID: "same"}}, func(err error) { settled <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-settled; err != nil {
			t.Fatalf("to the stream: %v", err)
		}
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 1 {
		t.Fatalf("stream holds %d (%v), want 1", n, err)
	}
	if st := p.Stats(); st.Acked != 3 || st.Failed != 1 {
		t.Fatalf("stats %+v, want 3 acknowledged (one delivered, two stored as one) and 1 failed", st)
	}
}
