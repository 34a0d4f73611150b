package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
		{func(o *BridgeOptions) { o.NATS.URL = "" }, "--nats must not be empty"},
		{func(o *BridgeOptions) { o.SaltAPI.TokenFile = "/nonexistent/token" }, "--saltapi-token-file"},
	} {
		o := bridgeOptions(t)
		c.set(&o)
		if _, err := NewBridge(context.Background(), o); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBridge: %v, want a configuration error with %q", err, c.want)
		}
	}
}
