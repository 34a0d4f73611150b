package consume

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// TestHandOverDeadPull: a pull request left by a former owner reaches the
// consumer between the new owner's reset and its first pull (forced
// here through PartitionOptions.afterReset: a request for one event without a pin id, from
// a subscription that takes it and never pulls again, as a replica that
// stopped just then). nats-server pins that request when the first event
// comes (a request nobody listens on any more is pinned the same way,
// then dropped) and keeps the pin for PinnedTTL (twice the lease time,
// 8 s here) while the new owner's pulls wait. The new owner takes the pin
// again (repin) and gets the events well before that.
func TestHandOverDeadPull(t *testing.T) {
	_, c := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lease = 4 * time.Second
	var once atomic.Bool
	afterReset := func(consumer string) {
		if consumer != "reactord-1-0" || once.Swap(true) {
			return // once, on the partition the keyed events go to
		}
		sub, err := c.NATS().SubscribeSync(nats.NewInbox())
		if err != nil {
			t.Error(err)
			return
		}
		req, _ := json.Marshal(map[string]any{"batch": 1, "expires": int64(lease / 2), "group": PartitionGroup})
		if err := c.NATS().PublishRequest("$JS.API.CONSUMER.MSG.NEXT.REACTORD_EVENTS."+consumer, sub.Subject, req); err != nil {
			t.Error(err)
		}
		_ = c.NATS().Flush()
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	h := &numbered{t: t, c: c}
	var logs syncbuf.Buffer
	p, err := NewPartitioned(ctx, c, PartitionOptions{StreamOptions: natsbus.StreamOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, Partitions: 1, Replica: "b", LeaseTTL: lease, afterReset: afterReset}, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	wait.For(t, 10*time.Second, func() error {
		if len(p.Owned()) != 1 {
			return errors.New("the replica does not hold its partition yet")
		}
		return nil
	})
	start := time.Now()
	h.publish(7)
	h.take(7)
	took := time.Since(start)
	t.Logf("7 events handled %v after the session began", took.Round(time.Millisecond))
	if took > 6*time.Second {
		t.Errorf("the events took %v: the dead pull's pin held the partition (PinnedTTL 8 s)", took.Round(time.Millisecond))
	}
	if !strings.Contains(logs.String(), "unpinned its consumer") {
		t.Errorf("the repin was not logged:\n%s", logs.String())
	}
}
