package natsbus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus/embedded"
)

// TestStateNeedsJetStream: a server without JetStream answers at once
// that it cannot keep the shared state.
func TestStateNeedsJetStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1"})
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

// TestStateResendsFailedWrites: writes made while the bucket does not
// answer (here: its stream is gone, as on a cluster electing its leader)
// are sent again, for the keys Resend names, once it answers: the last
// write of each key, never an older one after it; other keys' failed
// writes are dropped.
func TestStateResendsFailedWrites(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.State(ctx, StateOptions{Resend: func(key string) bool { return key[0] == 'j' }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.js.DeleteStream(ctx, "KV_REACTORD_GUARD"); err != nil {
		t.Fatal(err)
	}
	s.Put("j.a", []byte("v1"), time.Minute)
	s.Put("j.b", []byte("old"), time.Minute)
	s.Put("j.b", []byte("new"), time.Minute)
	s.Put("x.c", []byte("dropped"), time.Minute)
	time.Sleep(1500 * time.Millisecond)
	again, err := c.State(ctx, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"j.a": "v1", "j.b": "new"}
	var got map[string][]byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got, err = again.Scan(ctx, "")
		if err == nil && string(got["j.a"]) == "v1" && string(got["j.b"]) == "new" {
			break
		}
	}
	time.Sleep(1500 * time.Millisecond) // one more resend round: nothing older comes after
	got, err = again.Scan(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || string(got["j.a"]) != want["j.a"] || string(got["j.b"]) != want["j.b"] {
		t.Errorf("bucket %q, want %q", got, want)
	}
	if n := s.Resent(); n < 2 {
		t.Errorf("%d writes sent again, want at least 2", n)
	}
}
