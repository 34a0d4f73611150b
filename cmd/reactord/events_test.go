package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestEventsOutJSONReplays records live events with `events --out json`
// and feeds what it printed to `replay` and to `fire --file` (issue 10 #9).
func TestEventsOutJSONReplays(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	events := goRun(t, "events", "--nats", srv.ClientURL(), "--out", "json", "--count", "2", "salt/minion/*/start")
	stop := make(chan struct{})
	go func() {
		for {
			_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/auth", Body: []byte(`{"tag": "salt/auth", "data": {"id": "x"}}`)}, natsbus.Core)
			_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web7/start", Body: []byte(`{"tag": "salt/minion/web7/start", "data": {"id": "web7", "cmd": "_minion_event", "n": 12345678901234567, "s": "<a&b>"}}`)}, natsbus.Core)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	recorded, err := io.ReadAll(events.stdout)
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
	code, rout, rerr := runCmd(t, string(recorded), "replay", "-c", exampleConf, "-")
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s", code, rerr)
	}
	if n := strings.Count(rout, `"tgt":"web7"`) + strings.Count(rout, `"tgt": "web7"`); n != 2 {
		t.Errorf("replay printed %d reactions for web7, want 2:\n%s\n%s", n, rout, rerr)
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
	if code, out, errOut := runCmd(t, string(recorded), "fire", "--nats", url, flag, "-"); code != exitOK || !strings.Contains(out+errOut, fmt.Sprintf("published %d event(s)", n)) {
		t.Fatalf("fire %s: exit %d\n%s%s", flag, code, out, errOut)
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
