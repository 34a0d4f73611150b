package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

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
		if err := c.PublishStream(ctx, "salt/test", fmt.Appendf(nil, `{"n": %d}`, i), natsbus.Meta{MsgID: fmt.Sprint(i)}); err != nil {
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
	// Still so a while later: the floor waits for the held event.
	time.Sleep(200 * time.Millisecond)
	if err := state(4, 7, 3)(); err != nil {
		t.Fatal(err)
	}
	if err := (<-held).Ack(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, state(11, 0, 10))
}
