// Package natstest starts what tests of the packages built on natsbus
// need: an embedded NATS server with JetStream and a connection to it.
package natstest

import (
	"testing"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// Start runs an embedded server on a free port with JetStream under a
// temporary directory, connects to it, and stops both when the test ends.
func Start(t testing.TB) (*embedded.Server, *natsbus.Conn) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
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
