package natsbus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTransientPublishError: what a retry may cure (a timeout, no
// responders in an election, a reconnection failing the pending
// acknowledgements) is sent again; what the stream refused is not.
func TestTransientPublishError(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("batch: %w", nats.ErrDisconnected), true},
		{nats.ErrConnectionReconnecting, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrAsyncPublishTimeout, true},
		{nats.ErrTimeout, true},
		{errors.New("nats: maximum messages exceeded"), false},
		{nats.ErrConnectionClosed, false},
	}
	for _, c := range cases {
		if got := transientPublishError(c.err); got != c.want {
			t.Errorf("transientPublishError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
