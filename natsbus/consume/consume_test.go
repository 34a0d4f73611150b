package consume

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// publishUntilConsumed returns a function that publishes an event, again
// every half second while none arrives (while the stream is missing the
// publish fails or lands nowhere), until got grows.
func publishUntilConsumed(t *testing.T, c *natsbus.Conn, got *atomic.Int64) func(step string) {
	seq := 0
	return func(step string) {
		t.Helper()
		want := got.Load() + 1
		var sent time.Time
		var pubErr error
		err := wait.Poll(30*time.Second, func() error {
			if got.Load() >= want {
				return nil
			}
			if time.Since(sent) >= 500*time.Millisecond {
				seq++
				sent = time.Now()
				pubErr = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/test", Body: []byte(`{}`), Meta: natsbus.Meta{MsgID: fmt.Sprint(seq)}}, natsbus.Stored)
			}
			return errors.New("no event consumed")
		})
		if err == nil {
			return
		}
		// What the consumer says, for the failure to tell where it is stuck.
		var state string
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if cons, cerr := c.JetStream().Consumer(ctx, "REACTORD_EVENTS", "reactord"); cerr == nil {
			i := cons.CachedInfo()
			state = fmt.Sprintf("consumer: %d pending, %d awaiting ack, delivered up to %d, %d pull requests waiting", i.NumPending, i.NumAckPending, i.Delivered.Stream, i.NumWaiting)
		} else {
			state = fmt.Sprint("consumer: ", cerr)
		}
		t.Fatalf("%s: %v after 30s (last publish: %v; %s)", step, err, pubErr, state)
	}
}

// waitRecreated waits until k recreated its stream or consumer n times.
func waitRecreated(t *testing.T, k *Consumer, n int64, timeout time.Duration, what string) {
	t.Helper()
	wait.For(t, timeout, func() error {
		if k.Recreated() < n {
			return fmt.Errorf("%s (healthy=%v, connected=%v)", what, k.Healthy(), k.c.Connected())
		}
		return nil
	})
}

// TestConsumerRecreatesALostStream: the stream deleted, the consumer
// deleted, the server restarted with an empty JetStream store — each time
// the Consumer notices, recreates what is missing and events flow again.
func TestConsumerRecreatesALostStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.ClientURL()
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: addr, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var got atomic.Int64
	k, err := New(ctx, c, natsbus.StreamOptions{CheckEvery: 100 * time.Millisecond}, func(m *natsbus.Message) {
		got.Add(1)
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	publishAndWait := publishUntilConsumed(t, c, &got)
	publishAndWait("start")

	// The client stops pulling without a word (what a lost pull
	// subscription looks like): the stall check restarts it.
	k.mu.Lock()
	cc, closed := k.cc, k.ccClosed
	k.mu.Unlock()
	cc.Stop()
	// The stopped client still hands over what the server sent before it
	// heard of the stop: its last callback returns before publishing.
	<-closed
	publishAndWait("after the client stopped pulling")
	if k.restarted.Load() < 1 {
		t.Error("events flowed again without a restart: the stall was not simulated")
	}

	// The stream deleted by hand.
	if err := c.JetStream().DeleteStream(ctx, "REACTORD_EVENTS"); err != nil {
		t.Fatal(err)
	}
	waitRecreated(t, k, 1, 5*time.Second, "stream not recreated")
	publishAndWait("after the stream was deleted")

	// Only the consumer deleted.
	if err := c.JetStream().DeleteConsumer(ctx, "REACTORD_EVENTS", "reactord"); err != nil {
		t.Fatal(err)
	}
	waitRecreated(t, k, 2, 5*time.Second, "consumer not recreated")
	publishAndWait("after the consumer was deleted")

	// The server restarted on the same address with an empty store.
	_, port, _ := net.SplitHostPort(addr[len("nats://"):])
	srv.Shutdown()
	srv2, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:" + port, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Shutdown()
	waitRecreated(t, k, 3, 10*time.Second, "not recreated after the server restart")
	publishAndWait("after the server restarted empty")
	if !k.Healthy() {
		t.Error("Healthy() = false after recreation")
	}
}

func TestNakDelay(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want time.Duration
	}{{2, 250 * time.Millisecond}, {3, 500 * time.Millisecond}, {4, time.Second}, {9, 30 * time.Second}, {100, 30 * time.Second}} {
		if got := nakDelay(c.n); got != c.want {
			t.Errorf("nakDelay(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// TestProgressKeepsHeldMessages: with Progress, messages held four times
// longer than AckWait (a slow handler, a backlog behind it) are not
// redelivered; without it they are (issue 12).
func TestProgressKeepsHeldMessages(t *testing.T) {
	for _, progress := range []bool{true, false} {
		t.Run(fmt.Sprint("progress=", progress), func(t *testing.T) {
			_, c := natstest.Start(t)
			ctx := context.Background()
			const n = 20
			o := natsbus.StreamOptions{AckWait: 300 * time.Millisecond, Progress: progress}
			if err := c.EnsureStream(ctx, o); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: []byte(`{}`), Meta: natsbus.Meta{MsgID: fmt.Sprint(i)}}, natsbus.Stored); err != nil {
					t.Fatal(err)
				}
			}
			var deliveries, acked atomic.Int64
			hold := make(chan *natsbus.Message, n*4)
			k, err := New(ctx, c, o, func(m *natsbus.Message) {
				deliveries.Add(1)
				hold <- m
			})
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			// Held for about three AckWaits (with progress: each held
			// message had six progress acknowledgements, one every half
			// AckWait), or until the server redelivers (without).
			wait.For(t, 10*time.Second, func() error {
				if progress && k.Progressed() < 6*n || !progress && deliveries.Load() <= n {
					return fmt.Errorf("%d deliveries, %d progress acknowledgements", deliveries.Load(), k.Progressed())
				}
				return nil
			})
			got := deliveries.Load()
			for len(hold) > 0 {
				if (<-hold).Ack() == nil {
					acked.Add(1)
				}
			}
			t.Logf("%d deliveries of %d messages, %d progress acknowledgements", got, n, k.Progressed())
			if progress && (got != n || acked.Load() != n || k.Held() != 0) {
				t.Fatalf("%d deliveries, %d acked, %d held; want %d, %d, 0", got, acked.Load(), k.Held(), n, n)
			}
			if !progress && got <= n {
				t.Fatalf("without progress: %d deliveries, want redeliveries", got)
			}
		})
	}
}

func TestJetStreamRedeliversUnacked(t *testing.T) {
	_, c := natstest.Start(t)
	ctx := context.Background()
	o := natsbus.StreamOptions{AckWait: 300 * time.Millisecond}
	if err := c.EnsureStream(ctx, o); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		id := "e" + string(rune('0'+i))
		// Each event twice with the same id: JetStream keeps one.
		for range 2 {
			if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/job/1/ret/web" + id, Body: []byte(`{}`), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := c.StreamMessages(ctx, "REACTORD_EVENTS"); err != nil || n != 10 {
		t.Fatalf("stream holds %d messages (%v), want 10 after de-duplication", n, err)
	}
	var first sync.Map
	var acked atomic.Int64
	sub, err := New(ctx, c, o, func(m *natsbus.Message) {
		if _, seen := first.LoadOrStore(m.Subject, true); !seen {
			return // never acknowledged: must come back
		}
		if err := m.Ack(); err == nil {
			acked.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	wait.For(t, 10*time.Second, func() error {
		if acked.Load() != 10 {
			return errors.New("not all redelivered and acked")
		}
		return nil
	})
}
