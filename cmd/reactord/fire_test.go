package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestFireFileCutsOversizedEvents: a job return over the server's max
// payload is published with its return cut and reported with its line; a
// malformed line is reported; the lines after both are still published.
func TestFireFileCutsOversizedEvents(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", MaxPayload: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	sub, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	var mu sync.Mutex
	var got []event.Event
	if _, err := sub.Subscribe("", func(m *natsbus.Message) {
		ev, err := event.Decode(m.Body)
		if err != nil {
			t.Errorf("received a malformed event: %v", err)
			return
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush(context.Background())

	big := strings.Repeat("x", 200<<10)
	lines := []string{
		`{"tag":"salt/minion/web1/start","data":{"id":"web1"}}`,
		`{"tag":"salt/job/20261123101500123456/ret/web1","data":{"jid":"20261123101500123456","id":"web1","fun":"cmd.run","success":true,"retcode":0,"return":"` + big + `"}}`,
		`not an event`,
		`{"tag":"salt/minion/web2/start","data":{"id":"web2"}}`,
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "", "fire", "--nats", srv.ClientURL(), "--file", file)
	if code != exitFound {
		t.Errorf("exit %d, want %d (a malformed line)\n%s", code, exitFound, errOut)
	}
	for _, want := range []string{"line 2: salt/job/20261123101500123456/ret/web1", "published with return (", "line 3:", "published 3 event(s), 1 of them cut"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	_ = wait.Poll(5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 3 {
			return errors.New("not 3 events yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d events received, want 3", len(got))
	}
	ret := got[1]
	if ret.Data["jid"] != "20261123101500123456" || ret.Data["success"] != true || ret.Data["fun"] != "cmd.run" {
		t.Errorf("the cut event lost its other keys: %v", ret.Data)
	}
	if s, _ := ret.Data["return"].(string); !strings.Contains(s, "bytes cut") {
		t.Errorf("return = %.80q, want the cut marker", s)
	}
	if cut, _ := ret.Data[event.TruncatedKey].(map[string]any); fmt.Sprint(cut["return"]) != fmt.Sprint(len(big)+2) {
		t.Errorf("%s = %v, want return: %d", event.TruncatedKey, cut, len(big)+2)
	}
	if got[2].Tag != "salt/minion/web2/start" {
		t.Errorf("last event %s", got[2].Tag)
	}
}

// TestFireOverLongTag: a tag whose escaped subject would pass the server's
// control-line limit (a NATS server closes such a connection) is published
// on a bounded subject with the whole tag in the body, and the next event
// still goes out.
func TestFireOverLongTag(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	sub, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	got := make(chan string, 4)
	if _, err := sub.Subscribe("", func(m *natsbus.Message) {
		ev, err := event.Decode(m.Body)
		if err != nil {
			t.Errorf("malformed: %v", err)
			return
		}
		got <- ev.Tag
	}); err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush(context.Background())
	long := "salt/beacon/web1/inotify/" + strings.Repeat(".", 1500)
	lines := `{"tag":"` + long + `","data":{"id":"web1"}}` + "\n" + `{"tag":"after/long","data":{}}` + "\n"
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "", "fire", "--nats", srv.ClientURL(), "--file", file); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{long, "after/long"} {
		select {
		case tag := <-got:
			if tag != want {
				t.Fatalf("received %.60q, want %.60q", tag, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%.60q never arrived", want)
		}
	}
}

// writeStarts writes n minion-start events, one JSON line each.
func writeStarts(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"tag":"salt/minion/m%d/start","data":{"id":"m%d","_stamp":"2026-11-23T10:00:00.%06d"}}`+"\n", i%1000, i%1000, i)
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestFireFileIntoJetStream: into a server whose stream captures the
// event subjects (a --jetstream daemon's), fire --file publishes with
// acknowledgements: all events (three windows of unacknowledged ones) are
// in the stream when it exits 0.
// (How fast is the disk's business: the embedded server flushes each write;
// BenchmarkJetStreamFloor measures it.)
func TestFireFileIntoJetStream(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	ctx := context.Background()
	if err := c.EnsureStream(ctx, natsbus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 3 * fireMaxInFlight
	file := writeStarts(t, n)
	start := time.Now()
	code, _, errOut := runCmd(t, "", "fire", "--nats", srv.ClientURL(), "--file", file)
	el := time.Since(start)
	if code != exitOK || !strings.Contains(errOut, fmt.Sprintf("acknowledged all %d event(s)", n)) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := c.StreamMessages(ctx, "REACTORD_EVENTS")
	if err != nil || got != n {
		t.Fatalf("stream holds %d events of %d (%v)", got, n, err)
	}
	t.Logf("%d events acknowledged in %v (%.0f/s)", n, el.Round(time.Millisecond), n/el.Seconds())
}

// TestFireCountsUnacknowledged: events the stream refuses (it is full and
// discards new ones) are counted and make fire exit 1; a single event too.
func TestFireCountsUnacknowledged(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{"salt.evt.>"},
		MaxMsgs: 100, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "", "fire", "--nats", srv.ClientURL(), "--file", writeStarts(t, 300))
	if code != exitFound || !strings.Contains(errOut, "200 of 300 event(s) not acknowledged by JetStream stream REACTORD_EVENTS (100 acknowledged)") ||
		!strings.Contains(errOut, "maximum messages exceeded") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "", "fire", "--nats", srv.ClientURL(), "myapp/deploy/done", `{"id": "web1"}`)
	if code != exitFound || !strings.Contains(errOut, "1 of 1 event(s) not acknowledged") {
		t.Fatalf("one event: exit %d: %s", code, errOut)
	}
}

// TestFireRidesAnElection: fire --file into a three-replica stream of a
// three-node cluster, connected to one node, while the node leading the
// stream is killed with SIGKILL mid-way. The stream elects another
// leader, and fire sends again what got no acknowledgement meanwhile
// (no responders, a timeout), each event with its id: it exits 0, says
// how many it sent again, and the stream holds every event once (issue
// 49: fire gave up with "no responders available for request").
func TestFireRidesAnElection(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: strings.Join(cl.urls, ","), Name: "fire-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStream(t.Context(), natsbus.StreamOptions{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	js := cl.js(t)
	msgs := func() (uint64, string, error) {
		info, err := streamInfo(js, "REACTORD_EVENTS")
		if err != nil {
			return 0, "", err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return 0, "", errors.New("no stream leader yet")
		}
		return info.State.Msgs, info.Cluster.Leader, nil
	}
	victim := -1
	checkFor(t, 20*time.Second, func() error {
		_, leader, err := msgs()
		if err != nil {
			return err
		}
		victim, err = strconv.Atoi(strings.TrimPrefix(leader, "n"))
		victim--
		return err
	})
	via := cl.urls[(victim+1)%3] // fire's node survives: the stream's election is what it meets
	const n = 40000
	file := writeStarts(t, n)
	type result struct {
		code   int
		errOut string
	}
	fired := make(chan result, 1)
	go func() {
		code, _, errOut := runCmd(t, "", "fire", "--nats", via, "--file", file)
		fired <- result{code, errOut}
	}()
	checkFor(t, 30*time.Second, func() error {
		if got, _, err := msgs(); err != nil || got < n/10 {
			return fmt.Errorf("the stream holds %d events (%v)", got, err)
		}
		return nil
	})
	cl.stop(t, victim)
	killed := time.Now()
	var r result
	select {
	case r = <-fired:
	case <-time.After(2 * time.Minute):
		t.Fatal("fire did not end within 2 minutes of the kill")
	}
	if r.code != exitOK || !strings.Contains(r.errOut, fmt.Sprintf("acknowledged all %d event(s)", n)) {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	m := regexp.MustCompile(`; (\d+) sent again after no acknowledgement \(retrying for up to 30s\)`).FindStringSubmatch(r.errOut)
	if m == nil {
		t.Fatalf("fire did not say how many it sent again: %s", r.errOut)
	}
	if m[1] == "0" {
		t.Fatalf("fire sent nothing again: the kill missed it (%s)", r.errOut)
	}
	checkFor(t, 30*time.Second, func() error {
		if got, _, err := msgs(); err != nil || got != n {
			return fmt.Errorf("the stream holds %d events of %d (%v)", got, n, err)
		}
		return nil
	})
	t.Logf("killed the stream leader n%d; fire ended %v later, %s events sent again", victim+1, time.Since(killed).Round(time.Millisecond), m[1])
}

// TestFireChecksTheBodyFirst: a malformed JSON body is refused before
// fire connects (the server here does not exist: the error is the body's,
// not a connection's); a good one is published and said so on stderr,
// stdout staying empty.
func TestFireChecksTheBodyFirst(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, "", "fire", "--nats", "nats://127.0.0.1:1", "myapp/deploy/done", `{"id": `)
	if code != exitUsage || out != "" || strings.Contains(errOut, "nats:") || !strings.Contains(errOut, "fire: ") {
		t.Fatalf("malformed body: exit %d, stdout %q, stderr %q; want exit 2 and the body's error", code, out, errOut)
	}
	srv, _ := natsServer(t)
	code, out, errOut = runCmd(t, "", "fire", "--nats", srv.ClientURL(), "myapp/deploy/done", `{"id": "web1"}`)
	if code != exitOK || out != "" || !strings.Contains(errOut, "fire: the server confirmed myapp/deploy/done (core NATS)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
