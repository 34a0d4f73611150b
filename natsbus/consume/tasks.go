package consume

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/tasks"
)

// stopConsuming stops cc and has t wait, counted, until the client has
// returned from its last callback (cc's Closed): cc.Stop does not wait
// for a callback under way. closed must come from cc.Closed() called
// before cc.Stop (after the stop, Closed may report closed while a
// callback still runs). When t is closed already the caller is past the
// wait: it waits here.
func stopConsuming(t *tasks.Set, cc jetstream.ConsumeContext, closed <-chan struct{}) {
	cc.Stop()
	if !t.Go(func() { <-closed }) {
		<-closed
	}
}
