package natsbus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureStreamDuplicateWindow: the window is set on creation, changed on
// an existing stream when given and different, and left alone when not.
func TestEnsureStreamDuplicateWindow(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	window := func() time.Duration {
		t.Helper()
		s, err := c.js.Stream(ctx, "REACTORD_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.Duplicates
	}
	for _, step := range []struct {
		set, want time.Duration
	}{
		{10 * time.Second, 10 * time.Second}, // created with it
		{0, 10 * time.Second},                // not given: kept
		{30 * time.Second, 30 * time.Second}, // changed
		{30 * time.Second, 30 * time.Second}, // unchanged: no update needed
		{2 * time.Minute, 2 * time.Minute},
	} {
		if err := c.EnsureStream(ctx, StreamOptions{Duplicates: step.set}); err != nil {
			t.Fatalf("EnsureStream(Duplicates %v): %v", step.set, err)
		}
		if got := window(); got != step.want {
			t.Errorf("after EnsureStream(Duplicates %v): window %v, want %v", step.set, got, step.want)
		}
	}
	// A window longer than the stream's MaxAge is refused by the server,
	// and said so.
	if err := c.EnsureStream(ctx, StreamOptions{Duplicates: 48 * time.Hour}); err == nil {
		t.Error("a window beyond the stream's max age was accepted")
	} else {
		t.Logf("refused as expected: %v", err)
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}, true},
		{fmt.Errorf("creating stream REACTORD_EVENTS: %w", &jetstream.APIError{Code: 400, ErrorCode: 10005}), true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, false},
		{jetstream.ErrJetStreamNotEnabled, false},
		{jetstream.ErrJetStreamNotEnabledForAccount, false},
		{&jetstream.APIError{Code: 503, ErrorCode: 10076, Description: "jetstream not enabled"}, false},
		{fmt.Errorf("creating stream X: %w", &jetstream.APIError{Code: 503, ErrorCode: 10039, Description: "jetstream not enabled for account"}), false},
		{context.DeadlineExceeded, true},
		{nats.ErrNoResponders, true},
		{errors.New("permission denied"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
