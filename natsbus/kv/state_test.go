package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/natsbus/kv"
)

// TestStateNeedsJetStream: a server without JetStream answers at once
// that it cannot keep the shared state.
func TestStateNeedsJetStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := kv.Open(ctx, c, kv.StateOptions{}); !errors.Is(err, kv.ErrStateUnsupported) {
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
	_, c := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := kv.Open(ctx, c, kv.StateOptions{Resend: func(key string) bool { return key[0] == 'j' }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JetStream().DeleteStream(ctx, "KV_REACTORD_GUARD"); err != nil {
		t.Fatal(err)
	}
	s.Put("j.a", []byte("v1"), time.Minute)
	s.Put("j.b", []byte("old"), time.Minute)
	s.Put("j.b", []byte("new"), time.Minute)
	s.Put("x.c", []byte("dropped"), time.Minute)
	// The writes failed and both j keys were sent again (and failed
	// again): the bucket comes back while they are being resent.
	wait.For(t, 10*time.Second, func() error {
		if n := s.Resent(); n < 2 {
			return fmt.Errorf("%d writes sent again", n)
		}
		return nil
	})
	again, err := kv.Open(ctx, c, kv.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"j.a": "v1", "j.b": "new"}
	wait.For(t, 10*time.Second, func() error {
		got, err := again.Scan(ctx, "")
		if err != nil || string(got["j.a"]) != "v1" || string(got["j.b"]) != "new" {
			return fmt.Errorf("bucket %q (%v)", got, err)
		}
		return nil
	})
	// Once every write is confirmed none is sent again: nothing older
	// can come after.
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := again.Scan(ctx, "")
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

// TestCopiesClaim: the first copy of an emission claims it, another
// message within the window is a copy, the claiming message itself is
// not (a redelivery), and a stamp further away is a genuine repeat.
func TestCopiesClaim(t *testing.T) {
	_, c := natstest.Start(t)
	ctx := context.Background()
	k, err := kv.OpenCopies(ctx, c, kv.CopiesOptions{Window: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name  string
		stamp time.Time
		seq   uint64
		dup   bool
	}{
		{"first copy", t0, 1, false},
		{"other master's copy", t0.Add(40 * time.Millisecond), 2, true},
		{"redelivery of the first", t0, 1, false},
		{"copy stamped earlier", t0.Add(-time.Second), 3, true},
		{"genuine repeat", t0.Add(10 * time.Second), 4, false},
		{"its copy", t0.Add(10*time.Second + time.Millisecond), 5, true},
		{"late copy of the first", t0.Add(30 * time.Millisecond), 6, true},
	} {
		dup, err := k.Claim(ctx, "k1", step.stamp, step.seq)
		if err != nil || dup != step.dup {
			t.Errorf("%s: dup %v (%v), want %v", step.name, dup, err, step.dup)
		}
	}
	if dup, err := k.Claim(ctx, "k2", t0, 2); err != nil || dup {
		t.Errorf("other key: dup %v (%v)", dup, err)
	}
}
