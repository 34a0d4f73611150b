package reactor

import (
	"context"
	"fmt"
	"sync"
)

// tasks counts the goroutines the reactor runs beside its lanes — a freed
// concurrency slot's resubmission, a retry's timer, a debounce's or a
// collection's end — so that Stop waits for them before it reports what
// the stop left and the daemon closes the driver and the store under them.
type tasks struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add counts one task more, unless Stop already waited for them.
func (t *tasks) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// run runs f now, counted until it returns. After Stop waited it runs
// uncounted: what f calls refuses a stopped reactor (Submit settles the
// event with Retry; a retry's timer finds its job given back).
func (t *tasks) run(f func()) {
	if t.add() {
		defer t.wg.Done()
	}
	f()
}

// spawn runs f in a goroutine of its own, counted as run counts it.
func (t *tasks) spawn(f func()) {
	if !t.add() {
		go f()
		return
	}
	go func() {
		defer t.wg.Done()
		f()
	}()
}

// close stops counting and waits for the tasks counted, at most until ctx
// ends.
func (t *tasks) close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping: tasks of held events and retries still running: %w", ctx.Err())
	}
}
