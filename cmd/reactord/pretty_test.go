package main

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestEventsPrettyReplays records live events in the default output of
// `reactord events` (salt-run state.event pretty=True, one event over
// several lines) and feeds what it printed to `replay` and to
// `fire --events` (issue 10 #9).
func TestEventsPrettyReplays(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	const body = `{"tag": "salt/minion/web7/start", "data": {"id": "web7", "cmd": "_minion_event", "s": "a } b { \" ] c", "l": [1, {"k": [2, {}]}], "e": {}}}`
	events := goRun(t, "events", "--nats", srv.ClientURL(), "--count", "2", "salt/minion/*/start")
	stop := make(chan struct{})
	go func() {
		for {
			_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web7/start", Body: []byte(body)}, natsbus.Core)
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
	if n := strings.Count(string(recorded), "\n"); n < 10 || !strings.HasPrefix(string(recorded), "salt/minion/web7/start\t{\n") {
		t.Fatalf("not the multi-line pretty format:\n%s", recorded)
	}

	// replay reads it: two events, two reactions.
	code, rout, rerr := runCmd(t, string(recorded), "replay", "-c", exampleConf, "-")
	if code != exitOK || strings.Count(rout, `"tgt":"web7"`) != 2 || !strings.Contains(rerr, `"events":2,`) {
		t.Fatalf("replay: exit %d\n%s\n%s", code, rout, rerr)
	}
	// check --events reads it too.
	if code, _, cerr := runCmd(t, "", "check", "-c", exampleConf, "--events", writeFiles(t, map[string]string{"ev": string(recorded)})+"/ev"); code != exitOK {
		t.Fatalf("check --events: exit %d\n%s", code, cerr)
	}
	// An unclosed record is an error naming its first line; the events
	// after it are still read.
	broken := "salt/minion/web1/start\t{\n    \"id\": \"web1\",\n" + string(recorded)
	code, rout, rerr = runCmd(t, broken, "replay", "-c", exampleConf, "-")
	if code != exitFound || !strings.HasPrefix(rerr, "line 1: ") || strings.Count(rout, `"tgt":"web7"`) != 2 {
		t.Fatalf("replay of an unclosed record: exit %d\n%s\n%s", code, rout, rerr)
	}

	// fire --file publishes the same events again.
	got := refire(t, c, srv.ClientURL(), "--events", recorded, 2)
	var want any
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		var v any
		if err := json.Unmarshal([]byte(g), &v); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("fired %s, published %s", g, body)
		}
	}
}
