package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestStopRightAfterReacting: a daemon on its embedded server, stopped
// right after it reacted, leaves its next start nothing to do again: the
// server's consumer holds every event acknowledged. An event is
// acknowledged once its audit records are written (every 200 ms), and the
// embedded server, which stops last, drops the acknowledgements it has
// received but not applied: those events reacted again at the next start,
// after the acknowledgement wait (a CI run of the bridge's restart test).
//
// One processor (the test is not parallel: nothing else runs meanwhile)
// is the load under which the server had not applied them: without the
// confirmation, every run here lost some.
func TestStopRightAfterReacting(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	conf := copyExampleConfig(t)
	listen := freeAddr(t)
	data := t.TempDir()
	args := []string{"-c", conf, "--dry-run", "--listen", listen, "--data-dir", data}
	const rounds, each = 3, 200
	for round := range rounds + 1 {
		d := startDaemon(t, args...)
		token := strings.TrimSpace(readFile(t, filepath.Join(data, "nats.token")))
		c, err := natsbus.Connect(natsbus.ConnOptions{URL: "nats://" + listen, Token: token, Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if round > 0 {
			cons, err := c.JetStream().Consumer(ctx, "REACTORD_EVENTS", "reactord")
			if err != nil {
				t.Fatal(err)
			}
			if info := cons.CachedInfo(); info.NumAckPending != 0 || info.AckFloor.Stream != uint64(round*each) {
				t.Fatalf("start %d: the server holds %d events unacknowledged, its floor at %d (want 0, %d)", round+1, info.NumAckPending, info.AckFloor.Stream, round*each)
			}
		}
		if round < rounds {
			for i := range each {
				id := fmt.Sprintf("r%dm%d", round, i)
				if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
					t.Fatal(err)
				}
			}
			for range each {
				readReaction(t, d)
			}
		}
		c.Close()
		cancel()
		waitExit(t, d)
	}
}
