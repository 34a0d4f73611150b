package consume

import (
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// tasks counts the goroutines a consumption starts and the client's
// callbacks under way in its code, so that its stop can wait for every
// one of them (joined, not only signalled). Once closed it refuses new
// ones: the caller then does without (see each call).
type tasks struct {
	mu     sync.Mutex // guards closed and every wg.Add: none after closed, so Add never races Wait
	closed bool
	wg     sync.WaitGroup
}

// enter counts a callback or goroutine starting; false once closed.
func (t *tasks) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// leave counts one that entered ending.
func (t *tasks) leave() { t.wg.Done() }

// goFn runs f in a goroutine counted until it returns; false (f not run)
// once closed.
func (t *tasks) goFn(f func()) bool {
	if !t.enter() {
		return false
	}
	go func() {
		defer t.leave()
		f()
	}()
	return true
}

// closeAndWait refuses new goroutines and callbacks and waits until those
// counted have returned.
func (t *tasks) closeAndWait() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// stopConsuming stops cc and has t wait, counted, until the client has
// returned from its last callback (cc's Closed): cc.Stop does not wait
// for a callback under way. closed must come from cc.Closed() called
// before cc.Stop (after the stop, Closed may report closed while a
// callback still runs). When t is closed already the caller is past the
// wait: it waits here.
func (t *tasks) stopConsuming(cc jetstream.ConsumeContext, closed <-chan struct{}) {
	cc.Stop()
	if !t.goFn(func() { <-closed }) {
		<-closed
	}
}
