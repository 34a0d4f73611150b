package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/natsbus/embedded"
)

// saltFrame packs one event as a Salt master writes it to
// master_event_pub.ipc: {"head": {}, "body": tag + "\n\n" + msgpack(data)}.
func saltFrame(t *testing.T, tag string, data map[string]any) []byte {
	t.Helper()
	packed, err := msgpack.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return bridge.SaltFrame(tag, packed)
}

// fakeMasterSocket listens where a master's event publisher would and
// writes frames to every subscriber, holding them until the first one
// connects (a master publishing before then would lose them, and the tests
// fire once they started a bridge); it returns the sock_dir.
func fakeMasterSocket(t *testing.T, frames <-chan []byte) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "master_event_pub.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	// Frames wait for the first subscriber: a test fires once it started
	// the bridge, which may not have connected yet (a loaded machine).
	first := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if conns == nil {
				close(first)
			}
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	go func() {
		<-first
		for f := range frames {
			mu.Lock()
			for _, c := range conns {
				_, _ = c.Write(f)
			}
			mu.Unlock()
		}
	}()
	return dir
}

// TestBridgesDispatchOnce runs the real daemon (core mode, then
// JetStream), a bridge process (the native socket bridge, then the salt-api
// one) and checks that every event fired on the master is dispatched
// exactly once.
func TestBridgesDispatchOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		jetstream bool
		native    bool
	}{
		{"core/native", false, true},
		{"jetstream/native", true, true},
		{"core/salt-api", false, false},
		{"jetstream/salt-api", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := natsServer(t)
			conf := copyExampleConfig(t)
			dargs := []string{"-c", conf, "--dry-run", "--nats", srv.ClientURL()}
			if tc.jetstream {
				dargs = append(dargs, "--jetstream")
			}
			daemon := startDaemon(t, dargs...)
			const n = 10
			frames := make(chan []byte, n)
			sse := make(chan string, n)
			var bargs []string
			if tc.native {
				bargs = []string{"bridge", "--sock-dir", fakeMasterSocket(t, frames), "--nats", srv.ClientURL()}
			} else {
				api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/events" || r.Header.Get("X-Auth-Token") != "tok" {
						http.Error(w, "no", http.StatusUnauthorized)
						return
					}
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprint(w, "retry: 400\n")
					w.(http.Flusher).Flush()
					for {
						select {
						case ev := <-sse:
							fmt.Fprint(w, ev)
							w.(http.Flusher).Flush()
						case <-r.Context().Done():
							return
						}
					}
				}))
				t.Cleanup(api.Close)
				bargs = []string{"bridge", "--saltapi-url", api.URL, "--saltapi-token", "tok", "--nats", srv.ClientURL()}
			}
			br := startDaemon(t, bargs...)
			for i := range n {
				id := fmt.Sprintf("web%d", i)
				tag := "salt/minion/" + id + "/start"
				data := map[string]any{"id": id, "cmd": "_minion_event", "_stamp": "2026-11-23T10:00:00.000000"}
				if tc.native {
					frames <- saltFrame(t, tag, data)
				} else {
					raw, _ := json.Marshal(map[string]any{"tag": tag, "data": data})
					sse <- fmt.Sprintf("tag: %s\ndata: %s\n\n", tag, raw)
				}
			}
			seen := map[string]int{}
			lines := make(chan string)
			go func() {
				for {
					l, err := daemon.stdout.ReadString('\n')
					if err != nil {
						close(lines)
						return
					}
					lines <- l
				}
			}()
			deadline := time.After(15 * time.Second)
			settle := time.After(time.Hour)
		read:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						break read
					}
					var v struct{ Tag string }
					if err := json.Unmarshal([]byte(l), &v); err != nil {
						t.Fatalf("line %q: %v", l, err)
					}
					seen[v.Tag]++
					if len(seen) == n {
						settle = time.After(1500 * time.Millisecond)
					}
				case <-settle:
					break read
				case <-deadline:
					break read
				}
			}
			if len(seen) != n {
				t.Errorf("%d of %d events dispatched", len(seen), n)
			}
			for tag, c := range seen {
				if c != 1 {
					t.Errorf("%s dispatched %d times", tag, c)
				}
			}
			if logs := daemon.logs(); strings.Contains(logs, "level=ERROR") {
				t.Errorf("daemon logged errors:\n%s", logs)
			}
			resp, err := http.Get("http://" + br.http + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{
				fmt.Sprintf("reactord_bridge_events_received_total %d", n),
				fmt.Sprintf("reactord_bridge_events_published_total %d", n),
				"reactord_bridge_events_dropped_total 0",
				"reactord_bridge_source_connected 1",
				"reactord_nats_connected 1",
			} {
				if !strings.Contains(string(metrics), want) {
					t.Errorf("bridge /metrics lacks %q", want)
				}
			}
		})
	}
}

// TestBridgeHoldsEventsAcrossDaemonRestart: the core-mode daemon restarts
// while the native bridge runs, with its embedded NATS server (which goes
// down with it) and on an external server (which stays up, so a plain core
// publish would reach nobody and vanish); events the master publishes
// meanwhile are held by the bridge and dispatched once the daemon is back:
// every event exactly once.
func TestBridgeHoldsEventsAcrossDaemonRestart(t *testing.T) {
	t.Parallel()
	for _, external := range []bool{false, true} {
		t.Run(map[bool]string{false: "embedded", true: "external"}[external], func(t *testing.T) {
			t.Parallel()
			testBridgeAcrossRestart(t, external)
		})
	}
}

func testBridgeAcrossRestart(t *testing.T, external bool) {
	conf := copyExampleConfig(t)
	listen := freeAddr(t)
	url := "nats://" + listen
	data := t.TempDir()
	dargs := []string{"-c", conf, "--dry-run", "--listen", listen, "--data-dir", data}
	// The embedded server wants its token.
	bargs := []string{"--nats-token-file", filepath.Join(data, "nats.token")}
	if external {
		srv, _ := natsServer(t)
		url = srv.ClientURL()
		dargs = []string{"-c", conf, "--dry-run", "--nats", url}
		bargs = nil
	}
	daemon := startDaemon(t, dargs...)
	frames := make(chan []byte, 32)
	br := startDaemon(t, append([]string{"bridge", "--sock-dir", fakeMasterSocket(t, frames), "--nats", url}, bargs...)...)
	bridgeCount := func(name string) float64 {
		var v float64
		fmt.Sscan(metricValue(t, scrape(t, br), name), &v)
		return v
	}
	fire := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("web%d", i)
			frames <- saltFrame(t, "salt/minion/"+id+"/start", map[string]any{"id": id, "cmd": "_minion_event"})
		}
	}
	seen := map[string]int{}
	read := func(p *proc, n int) {
		t.Helper()
		lines := make(chan string, n)
		go func() {
			for range n {
				l, err := p.stdout.ReadString('\n')
				if err != nil {
					return
				}
				lines <- l
			}
		}()
		for range n {
			select {
			case l := <-lines:
				var v struct{ Tag string }
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				seen[v.Tag]++
			case <-time.After(20 * time.Second):
				t.Fatalf("only %d distinct events dispatched: %v", len(seen), seen)
			}
		}
	}
	fire(0, 5)
	read(daemon, 5)
	daemon.terminate()
	select {
	case <-daemon.done:
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop")
	}
	fire(5, 10) // while the daemon (and its NATS server) is down
	checkFor(t, 10*time.Second, func() error {
		if n := bridgeCount("reactord_bridge_events_received_total"); n < 10 {
			return fmt.Errorf("the bridge received %v events", n)
		}
		return nil
	})
	daemon2 := startDaemon(t, dargs...)
	fire(10, 15)
	read(daemon2, 10)
	// Nothing more comes: the bridge published each event once and,
	// with JetStream, the stream has nothing left to deliver again.
	checkFor(t, 10*time.Second, func() error {
		if n := bridgeCount("reactord_bridge_events_published_total"); n < 15 {
			return fmt.Errorf("the bridge published %v events", n)
		}
		return nil
	})
	if !external {
		token := strings.TrimSpace(readFile(t, filepath.Join(data, "nats.token")))
		waitSettled(t, "nats://"+token+"@"+listen, 10*time.Second)
	}
	if n := bridgeCount("reactord_bridge_events_published_total"); n != 15 {
		t.Errorf("the bridge published %v events, want 15", n)
	}
	if got := metricValue(t, scrape(t, daemon2), `reactord_actions_total{driver="dryrun",state="dispatched"}`); got != "10" {
		t.Errorf("the restarted daemon dispatched %s reactions, want 10", got)
	}
	if len(seen) != 15 {
		t.Errorf("%d distinct events dispatched, want 15: %v", len(seen), seen)
	}
	for tag, c := range seen {
		if c != 1 {
			t.Errorf("%s dispatched %d times", tag, c)
		}
	}
}

// TestDaemonNATSOutageIsVisible: when the external NATS server goes away
// the daemon logs it, /healthz answers 503 and reactord_nats_connected is
// 0; when it is back, the daemon logs how long it was down and is healthy
// again.
func TestDaemonNATSOutageIsVisible(t *testing.T) {
	t.Parallel()
	listen := freeAddr(t)
	srv, err := embedded.Start(embedded.Options{Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	daemon := startDaemon(t, "-c", copyExampleConfig(t), "--dry-run", "--nats", srv.ClientURL())
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + daemon.http + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	srv.Shutdown()
	checkFor(t, 10*time.Second, func() error {
		if code, body := get("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "NATS disconnected") {
			return fmt.Errorf("healthz %d %q", code, body)
		}
		if _, m := get("/metrics"); !strings.Contains(m, "reactord_nats_connected 0") {
			return errors.New("reactord_nats_connected is not 0")
		}
		if !strings.Contains(daemon.logs(), "NATS connection lost; reconnecting") {
			return errors.New("no disconnection logged")
		}
		return nil
	})
	srv2, err := embedded.Start(embedded.Options{Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv2.Shutdown)
	checkFor(t, 15*time.Second, func() error {
		if code, body := get("/healthz"); code != http.StatusOK {
			return fmt.Errorf("healthz %d %q", code, body)
		}
		if !strings.Contains(daemon.logs(), "NATS connection back") || !strings.Contains(daemon.logs(), "outage=") {
			return errors.New("no reconnection with its outage logged")
		}
		return nil
	})
	if _, m := get("/metrics"); !strings.Contains(m, "reactord_nats_connected 1") {
		t.Error("reactord_nats_connected is not 1 after the reconnection")
	}
}
