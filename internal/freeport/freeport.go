// Package freeport hands tests TCP ports on 127.0.0.1 that nothing listens
// on, never the same one twice in a test process: the kernel may hand a
// port just closed out again, and two roles (a daemon's --listen and
// --http, a master's publish and return ports) must not share one.
package freeport

import (
	"net"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Port returns a free port not handed out before in this process.
func Port(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
}
