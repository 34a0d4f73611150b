package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// TestConsumerTrimsWhatItAcknowledged: the events a Consumer acknowledged
// leave its (trimmed) stream soon after, up to the first one it still
// holds; once that is acknowledged too, the stream is empty.
func TestConsumerTrimsWhatItAcknowledged(t *testing.T) {
	_, c := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := make(chan *natsbus.Message, 1)
	k, err := New(ctx, c, natsbus.StreamOptions{}, func(m *natsbus.Message) {
		var ev struct{ N int }
		if err := json.Unmarshal(m.Body, &ev); err != nil {
			t.Error(err)
		}
		if ev.N == 3 {
			held <- m // acknowledged later
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case m := <-held: // a failure before it was acknowledged: Close waits for it
			_ = m.Ack()
		default:
		}
		k.Close()
	}()
	for i := range 10 {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: natsbus.Meta{MsgID: fmt.Sprint(i)}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	state := func(first, msgs uint64, trimmed int64) func() error {
		return func() error {
			info, err := stream.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.FirstSeq != first || info.State.Msgs != msgs || k.Trimmed() != trimmed {
				return fmt.Errorf("the stream starts at %d and holds %d, %d trimmed; want %d, %d, %d", info.State.FirstSeq, info.State.Msgs, k.Trimmed(), first, msgs, trimmed)
			}
			return nil
		}
	}
	// Events 0-2 (sequences 1-3) go; event 3 and those after it stay.
	wait.For(t, 10*time.Second, state(4, 7, 3))
	// Still so once the server has every acknowledgement but the held
	// event's and two trim rounds ran since: the floor waits for it.
	wait.For(t, 10*time.Second, func() error {
		cons, err := stream.Consumer(ctx, "reactord")
		if err != nil {
			return err
		}
		if n := cons.CachedInfo().NumAckPending; n != 1 {
			return fmt.Errorf("%d events unacknowledged, want the held one", n)
		}
		return nil
	})
	rounds := k.trims.Load()
	wait.For(t, 10*time.Second, func() error {
		if n := k.trims.Load() - rounds; n < 2 {
			return fmt.Errorf("%d trim rounds since every other event was acknowledged", n)
		}
		return nil
	})
	if err := state(4, 7, 3)(); err != nil {
		t.Fatal(err)
	}
	if err := (<-held).Ack(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, state(11, 0, 10))
}

// TestConsumerPassesOverWhatItAcknowledged: the consumer deleted while an
// early event is held, the Consumer recreates it, which delivers the
// stream from its start (the floor held the trim back): the events it
// acknowledged are acknowledged again without reaching the handler, the
// held one comes again, and the stream ends empty.
func TestConsumerPassesOverWhatItAcknowledged(t *testing.T) {
	_, c := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[int]int{}
	held := make(chan *natsbus.Message, 1)
	k, err := New(ctx, c, natsbus.StreamOptions{CheckEvery: 100 * time.Millisecond}, func(m *natsbus.Message) {
		var ev struct{ N int }
		if err := json.Unmarshal(m.Body, &ev); err != nil {
			t.Error(err)
		}
		mu.Lock()
		seen[ev.N]++
		first := seen[ev.N] == 1
		mu.Unlock()
		if ev.N == 0 && first {
			held <- m // never acknowledged: its consumer goes
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	const n = 20
	for i := range n {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: natsbus.Meta{MsgID: fmt.Sprint(i)}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (distinct, total int) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range seen {
			total += v
		}
		return len(seen), total
	}
	wait.For(t, 10*time.Second, func() error {
		if d, _ := count(); d != n {
			return fmt.Errorf("%d of %d handled", d, n)
		}
		return nil
	})
	<-held
	if err := c.JetStream().DeleteConsumer(ctx, "REACTORD_EVENTS", "reactord"); err != nil {
		t.Fatal(err)
	}
	stream, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, func() error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		if k.Recreated() != 1 || info.State.Msgs != 0 {
			return fmt.Errorf("recreated %d times, the stream holds %d", k.Recreated(), info.State.Msgs)
		}
		return nil
	})
	if d, total := count(); d != n || total != n+1 || k.PassedOver() != n-1 {
		t.Errorf("%d distinct events handled %d times, %d passed over; want %d handled %d times (the held one twice), %d passed over", d, total, k.PassedOver(), n, n+1, n-1)
	}
}

// TestConsumersShareTheTrim: two replicas on one trimmed stream count
// between them each event their purges dropped once; a third, started
// after events were acknowledged without a trim (a predecessor killed),
// purges those.
func TestConsumersShareTheTrim(t *testing.T) {
	_, c := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack := func(m *natsbus.Message) { _ = m.Ack() }
	a, err := New(ctx, c, natsbus.StreamOptions{}, ack)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, c, natsbus.StreamOptions{}, ack)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 300
	for i := range n {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: natsbus.Meta{MsgID: fmt.Sprint(i)}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	empty := func(want int64, ks ...*Consumer) func() error {
		return func() error {
			info, err := stream.Info(ctx)
			if err != nil {
				return err
			}
			var got int64
			for _, k := range ks {
				got += k.Trimmed()
			}
			if info.State.Msgs != 0 || got != want {
				return fmt.Errorf("the stream holds %d, %d trimmed; want 0 and %d", info.State.Msgs, got, want)
			}
			return nil
		}
	}
	wait.For(t, 10*time.Second, empty(n, a, b))
	if a.Trimmed() == 0 && b.Trimmed() == 0 {
		t.Error("neither replica trimmed")
	}
	a.Close()
	b.Close()

	// Acknowledged by a plain client (a daemon killed before its trim).
	for i := range 5 {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: natsbus.Meta{MsgID: fmt.Sprint("late", i)}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.JetStream().Consumer(ctx, "REACTORD_EVENTS", "reactord")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 5 {
		t.Fatalf("fetched %d of 5 (%v)", got, batch.Error())
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 5 {
		t.Fatalf("before the successor: %v, %v; want 5 acknowledged events held", info.State, err)
	}
	succ, err := New(ctx, c, natsbus.StreamOptions{}, ack)
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Close()
	wait.For(t, 10*time.Second, empty(5, succ))
}
