package natsbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
