package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestRepeatsReachTheStream is issue 9 #8 end to end: a master emits the
// same inotify beacon event three times (three _stamps, 10 s apart in
// master time) and the bridge reads one emission twice (same _stamp); all go
// through the bridge's publish path (MasterBus, Outbox, natsbus.Conn) into
// the daemon's JetStream stream on a real NATS server. The three emissions
// are three messages, the emission read twice is one. An event without a
// _stamp, read twice, is two messages: nothing tells it from a repeat.
func TestRepeatsReachTheStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conn, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "bridge-test", NoReconnectBuffer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := conn.EnsureStream(ctx, natsbus.StreamOptions{Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	master := startFakeMaster(t, dir)
	log, _ := newLogger(t)
	b := runMasterBus(t, MasterConfig{SockDir: dir, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: log}, conn)
	c := master.accept()

	const tag = "salt/beacon/web1/inotify//etc/important_file"
	beacon := func(stamp string) []byte {
		return packFrame(t, tag, "change", "IN_MODIFY", "id", "web1", "path", "/etc/important_file", "_stamp", stamp)
	}
	frames := [][]byte{
		beacon("2026-11-22T01:00:00.000001"),
		beacon("2026-11-22T01:00:10.000002"),
		beacon("2026-11-22T01:00:20.000003"),
		beacon("2026-11-22T01:00:20.000003"), // the third emission again
		packFrame(t, "my/unstamped", "x", 1),
		packFrame(t, "my/unstamped", "x", 1),
	}
	for _, f := range frames {
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	checkFor(t, 10*time.Second, poll, func() error {
		if n := b.Stats().Published.Load(); n != int64(len(frames)) {
			return fmt.Errorf("published %d of %d: %s", n, len(frames), statsString(b.Stats()))
		}
		return nil
	})
	if n, err := conn.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 5 {
		t.Fatalf("stream holds %d messages (%v), want 5: three beacon emissions and two unstamped receipts", n, err)
	}
}
