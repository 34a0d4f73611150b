package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDedupeWindowFlag: --dedupe-window sets the duplicate window of the
// stream the daemon creates, and changes it on the existing stream at the
// next start.
func TestDedupeWindowFlag(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	conf := copyExampleConfig(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	window := func() time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "REACTORD_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.Duplicates
	}
	for _, w := range []time.Duration{7 * time.Second, 45 * time.Second} {
		p := startDaemon(t, "-c", conf, "--dry-run", "--nats", srv.ClientURL(), "--jetstream", "--dedupe-window", w.String())
		if got := window(); got != w {
			t.Errorf("--dedupe-window %v: stream window %v", w, got)
		}
		p.terminate()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatal("no exit after SIGTERM")
		}
	}
}
