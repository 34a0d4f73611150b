package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// bridgeOptions are a bridge's defaults publishing to an embedded server
// of the test's own, from a sock_dir where no master runs.
func bridgeOptions(t *testing.T) BridgeOptions {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	o := DefaultBridgeOptions()
	o.NATS.URL, o.SockDir, o.DataDir, o.HTTP = srv.ClientURL(), t.TempDir(), t.TempDir(), "127.0.0.1:0"
	return o
}

// TestBridgeLifecycle: the bridge is built of parts as the daemon is: its
// /healthz names the part that fails (no master to read here), Run stops
// every part when its context ends, and Stop is safe again afterwards.
func TestBridgeLifecycle(t *testing.T) {
	b, err := NewBridge(context.Background(), bridgeOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	<-b.Ready()
	resp, err := http.Get("http://" + b.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "not reading the event source") {
		t.Fatalf("/healthz %d %q, want 503 naming the event source", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := http.Get("http://" + b.HTTPAddr() + "/healthz"); err == nil {
		t.Error("the HTTP endpoints still answer after Run returned")
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// TestBridgeStartRefused: a setting or a part that cannot start fails
// NewBridge with a configuration error naming it.
func TestBridgeStartRefused(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		set  func(o *BridgeOptions)
		want string
	}{
		{func(o *BridgeOptions) { o.HTTP = busy.Addr().String() }, "--http"},
		{func(o *BridgeOptions) { o.NATS.TokenFile = "/nonexistent/token" }, "--nats-token-file"},
		{func(o *BridgeOptions) { o.SaltAPI.TokenFile = "/nonexistent/token" }, "--saltapi-token-file"},
	} {
		o := bridgeOptions(t)
		c.set(&o)
		if _, err := NewBridge(context.Background(), o); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBridge: %v, want a configuration error with %q", err, c.want)
		}
	}
}

// TestNATSFind: a client without --nats takes $NATS_URL, else the address
// a local daemon's embedded server recorded in its data directory, and
// says which; with neither it finds nothing.
func TestNATSFind(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("NATS_URL", "")
	// recorded holds the address of a server that answers (a listener
	// here), stale one nothing listens on any more.
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	recorded, stale := t.TempDir(), t.TempDir()
	if err := natsbus.RecordAddr(recorded, live.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := natsbus.RecordAddr(stale, gone.Addr().String()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url, env string
		dirs           []string
		want, where    string
	}{
		{name: "flag", url: "nats://n1:4222", env: "nats://env:4222", dirs: []string{recorded}, want: "nats://n1:4222", where: "--nats"},
		{name: "environment", env: "nats://env:4222", dirs: []string{recorded}, want: "nats://env:4222", where: "$NATS_URL"},
		{name: "recorded", dirs: []string{recorded}, want: "nats://" + live.Addr().String(), where: filepath.Join(recorded, natsbus.AddrFileName)},
		{name: "answering before stale", dirs: []string{stale, recorded}, want: "nats://" + live.Addr().String(), where: filepath.Join(recorded, natsbus.AddrFileName)},
		{name: "only stale", dirs: []string{stale}, want: "nats://" + gone.Addr().String(), where: filepath.Join(stale, natsbus.AddrFileName) + " (nothing answers there)"},
		{name: "nothing", dirs: []string{t.TempDir()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NATS_URL", c.env)
			if addr, _ := natsbus.LocalAddr(natsbus.SystemDataDir); c.want == "" && addr != "" {
				t.Skipf("the packaged daemon on this machine recorded %s in %s", addr, natsbus.SystemDataDir)
			}
			n := NATSOptions{URL: c.url}
			where, ok := n.Find(c.dirs...)
			if n.URL != c.want || where != c.where || ok != (c.want != "") {
				t.Errorf("Find: URL %q from %q (%v), want %q from %q", n.URL, where, ok, c.want, c.where)
			}
		})
	}
}
