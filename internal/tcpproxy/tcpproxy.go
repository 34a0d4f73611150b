// Package tcpproxy is a TCP proxy for tests that break connections on
// purpose: cut every connection through it, swallow what clients send,
// refuse new connections at the TCP handshake (a server that is down) or
// right after it (a server that accepts and hangs up).
package tcpproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards the connections made to Addr to a target address.
type Proxy struct {
	target string
	addr   string
	refuse atomic.Bool

	mu    sync.Mutex
	ln    net.Listener // nil while Down
	links []*link
}

// link is one client connection through the proxy.
type link struct {
	client, server net.Conn
	swallow        atomic.Bool
}

// Start listens on a free port of 127.0.0.1 and forwards to target until
// the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Down)
	return p
}

// Listen is Start outside a test (reactord-bench soak's network cuts):
// the caller calls Down when done.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln}
	go p.accept(ln)
	return p, nil
}

// Addr is the host:port clients connect to.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		l := &link{client: client, server: server}
		p.mu.Lock()
		if p.refuse.Load() || p.ln != ln { // refused or cut down while dialling
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			continue
		}
		p.links = append(p.links, l)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
		go l.forward()
	}
}

// forward copies what the client sends to the server, or drops it once
// the link swallows.
func (l *link) forward() {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 && !l.swallow.Load() {
			if _, werr := l.server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = l.server.Close()
}

// Swallow drops from now on what clients send on their current
// connections; new connections pass.
func (p *Proxy) Swallow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.swallow.Store(true)
	}
}

// Cut closes every connection through the proxy; new ones are taken.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		_ = l.client.Close()
		_ = l.server.Close()
	}
	p.links = nil
}

// Refuse makes the proxy accept new connections and close them at once
// (on), or forward them again (off).
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Down cuts every connection and stops listening: a new connection is
// refused at the TCP handshake, as by a stopped server.
func (p *Proxy) Down() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.Cut()
}

// Up listens again on Addr after Down, trying for up to 5 s while the
// port is still held.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.ln = ln
			go p.accept(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tcpproxy: listening again on %s: %w", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
