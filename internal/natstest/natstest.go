// Package natstest starts what tests of the packages built on natsbus
// need: an embedded NATS server with JetStream and a connection to it.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/natsbus/kv"
)

// Start runs an embedded server on a free port with JetStream under a
// temporary directory, connects to it, and stops both when the test ends.
func Start(t testing.TB) (*embedded.Server, *natsbus.Conn) {
	t.Helper()
	return StartIn(t, t.TempDir())
}

// StartIn is Start with JetStream's store in dir (a small file system, to
// fill it).
func StartIn(t testing.TB, dir string) (*embedded.Server, *natsbus.Conn) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

// SharedState opens the shared-state bucket on srv with a connection of
// its own, as one replica of the daemon does; watch hands every change of
// the bucket (other replicas' too) to apply, after loading what it holds.
func SharedState(t testing.TB, srv *embedded.Server) (st *kv.State, watch func(apply func(key string, value []byte, deleted bool))) {
	t.Helper()
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "replica"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err = kv.Open(ctx, c, kv.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	return st, func(apply func(key string, value []byte, deleted bool)) {
		t.Helper()
		run, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Watch(ctx, run, func(e kv.StateEntry) { apply(e.Key, e.Value, e.Deleted) }); err != nil {
			t.Fatal(err)
		}
	}
}
