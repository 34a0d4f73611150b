package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestHealthzNotes: /healthz shows the parts' notes after its verdict,
// healthy or not (the master driver's engine: how runners go now), and
// leaves out the empty ones.
func TestHealthzNotes(t *testing.T) {
	l := newLifecycle()
	defer l.stop(context.Background())
	var failing error
	l.addHealth("driver", func() error { return failing })
	l.addNote(func() string {
		return "driver master+exec: the reactord Salt engine answers at /run/salt/master/reactord.ipc"
	})
	l.addNote(func() string { return "" })
	addr, err := l.serveHTTP("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.markReady()
	get := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	note := "driver master+exec: the reactord Salt engine answers at /run/salt/master/reactord.ipc\n"
	if code, body := get(); code != http.StatusOK || body != "ok\n"+note {
		t.Errorf("healthy: %d %q", code, body)
	}
	failing = errors.New("driver master: the master's request server does not answer")
	if code, body := get(); code != http.StatusServiceUnavailable || body != failing.Error()+"\n"+note+"\n" {
		t.Errorf("failing: %d %q", code, body)
	}
}
