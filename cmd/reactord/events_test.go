package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestEventsOutJSONReplays records live events with `events --out json`
// and feeds what it printed to `replay` and to `fire --file` (issue 10 #9).
func TestEventsOutJSONReplays(t *testing.T) {
	srv, c := natsServer(t)
	cmd := exec.Command(binPath, "events", "--nats", srv.ClientURL(), "--out", "json", "--count", "2", "salt/minion/*/start")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	stop := make(chan struct{})
	go func() {
		for {
			_ = c.Publish("salt/auth", []byte(`{"tag": "salt/auth", "data": {"id": "x"}}`), natsbus.Meta{})
			_ = c.Publish("salt/minion/web7/start", []byte(`{"tag": "salt/minion/web7/start", "data": {"id": "web7", "cmd": "_minion_event", "n": 12345678901234567, "s": "<a&b>"}}`), natsbus.Meta{})
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	recorded, err := io.ReadAll(out)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(recorded), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", recorded)
	}
	for _, l := range lines {
		var ev struct {
			Tag  string         `json:"tag"`
			Data map[string]any `json:"data"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&ev); err != nil || ev.Tag != "salt/minion/web7/start" || ev.Data["id"] != "web7" ||
			ev.Data["n"] != json.Number("12345678901234567") || ev.Data["s"] != "<a&b>" {
			t.Fatalf("line %q is not the event as {\"tag\",\"data\"} (%v)", l, err)
		}
	}

	// replay reads it.
	rp := exec.Command(binPath, "replay", "-c", exampleConf, "-")
	rp.Stdin = bytes.NewReader(recorded)
	var rout, rerr bytes.Buffer
	rp.Stdout, rp.Stderr = &rout, &rerr
	if err := rp.Run(); err != nil {
		t.Fatalf("replay: %v\n%s", err, rerr.String())
	}
	if n := strings.Count(rout.String(), `"tgt":"web7"`) + strings.Count(rout.String(), `"tgt": "web7"`); n != 2 {
		t.Errorf("replay printed %d reactions for web7, want 2:\n%s\n%s", n, rout.String(), rerr.String())
	}

	// fire --file publishes it again, unchanged.
	got := refire(t, c, srv.ClientURL(), "--file", recorded, 2)
	for i, g := range got {
		if g != lines[i] {
			t.Errorf("fired %s, recorded %s", g, lines[i])
		}
	}
}

// refire runs reactord fire with flag ("--file" or "--events") on the
// recorded events and returns the bodies of the n events fire published,
// in order, once they were all seen on the bus.
func refire(t *testing.T, c *natsbus.Conn, url, flag string, recorded []byte, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	sub, err := c.Subscribe("", func(m *natsbus.Message) {
		if m.Meta.Origin == "reactord-fire" {
			mu.Lock()
			got = append(got, string(m.Body))
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	fire := exec.Command(binPath, "fire", "--nats", url, flag, "-")
	fire.Stdin = bytes.NewReader(recorded)
	if b, err := fire.CombinedOutput(); err != nil || !strings.Contains(string(b), fmt.Sprintf("published %d event(s)", n)) {
		t.Fatalf("fire %s: %v\n%s", flag, err, b)
	}
	checkFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != n {
			return errFmt("fired events not seen yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), got...)
}
