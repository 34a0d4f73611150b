package consume

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/natsbus"
)

// TestStopConfirmsTheAcknowledgements: a daemon that stops right after
// acknowledging its events, and shuts its embedded server down, leaves
// none of them unacknowledged in the server's consumer, whether the
// acknowledgements went out before Close (Close confirms them) or after it
// (the daemon's last audit records: ConfirmAcks before the connection
// closes). The server drops the acknowledgements it received but had not
// applied when it shuts down; without the confirmation every one sent
// after Close was lost, and its event reacted again after AckWait.
func TestStopConfirmsTheAcknowledgements(t *testing.T) {
	dir := t.TempDir()
	const rounds, each = 6, 20
	for round := range rounds + 1 {
		afterClose := round%2 == 1
		srv, c := natstest.StartIn(t, dir) // stopped at the round's end
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if round > 0 {
			cons, err := c.JetStream().Consumer(ctx, "REACTORD_EVENTS", "reactord")
			if err != nil {
				t.Fatal(err)
			}
			if info := cons.CachedInfo(); info.NumAckPending != 0 || info.AckFloor.Stream != uint64(round*each) {
				t.Fatalf("after round %d (acknowledged after Close: %v): the server holds %d of its events unacknowledged; floor %d, want %d",
					round-1, !afterClose, info.NumAckPending, info.AckFloor.Stream, round*each)
			}
		}
		if round == rounds {
			c.Close()
			srv.Shutdown()
			cancel()
			return
		}
		got := make(chan *natsbus.Message, each)
		k, err := New(ctx, c, natsbus.StreamOptions{}, func(m *natsbus.Message) {
			if !afterClose {
				_ = m.Ack()
			}
			got <- m
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range each {
			if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"round": %d, "n": %d}`, round, i), Meta: natsbus.Meta{MsgID: fmt.Sprint(round, "-", i)}}, natsbus.Stored); err != nil {
				t.Fatal(err)
			}
		}
		var held []*natsbus.Message
		for range each {
			select {
			case m := <-got:
				held = append(held, m)
			case <-ctx.Done():
				t.Fatalf("round %d: %d of %d events handled", round, len(held), each)
			}
		}
		k.Close()
		if afterClose {
			for _, m := range held {
				if err := m.Ack(); err != nil {
					t.Fatal(err)
				}
			}
			if err := k.ConfirmAcks(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		srv.Shutdown()
		cancel()
	}
}
