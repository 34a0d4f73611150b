package natsbus

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAckedPublisherRetries: an event nobody stored (no stream yet: no
// responders) is republished (by the client, or by the publisher) and
// acknowledged once the stream exists; one that never finds a stream fails
// after 3 retries, with the error.
func TestAckedPublisherRetries(t *testing.T) {
	_, c := startServer(t)
	ctx := context.Background()
	p, err := c.NewAckedPublisher(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish("salt/minion/web1/start", []byte(`{"tag":"salt/minion/web1/start","data":{}}`), Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil { // the server answered "no responders"
		t.Fatal(err)
	}
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	st := p.Wait(ctx)
	if st.Acked != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 1 {
		t.Fatalf("stream holds %d (%v)", n, err)
	}

	c.prefix = "nostream."
	p, err = c.NewAckedPublisher(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish("x", []byte(`{}`), Meta{}); err != nil {
		t.Fatal(err)
	}
	st = p.Wait(ctx)
	if st.Acked != 0 || st.Failed != 1 || st.Retried != ackedRetries || len(st.Errors) != 1 || !(errors.Is(st.Errors[0], jetstream.ErrNoStreamResponse) || errors.Is(st.Errors[0], nats.ErrNoResponders)) {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Publish("x", nil, Meta{}); err == nil {
		t.Error("Publish after Wait succeeded")
	}
}
