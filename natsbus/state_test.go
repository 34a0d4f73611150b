package natsbus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStateNeedsJetStream: a server without JetStream answers at once
// that it cannot keep the shared state.
func TestStateNeedsJetStream(t *testing.T) {
	srv, err := StartEmbedded(ServerOptions{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	c, err := Connect(ConnOptions{URL: srv.ClientURL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.State(ctx, StateOptions{}); !errors.Is(err, ErrStateUnsupported) {
		t.Fatalf("err %v, want ErrStateUnsupported", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}
