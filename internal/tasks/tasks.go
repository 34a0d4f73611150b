// Package tasks counts goroutines and callbacks under way so that a stop
// can wait for every one of them (joined, not only signalled): the
// reactor's work beside its lanes, a stream consumption's goroutines and
// client callbacks.
package tasks

import (
	"context"
	"sync"
)

// Set is a set of tasks under way. Once closed it refuses new ones: the
// caller then does without, or runs the work uncounted.
type Set struct {
	mu     sync.Mutex // guards closed and every wg.Add: none after closed, so Add never races Wait
	closed bool
	wg     sync.WaitGroup
}

// Enter counts a task starting; false once the set is closed.
func (s *Set) Enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Leave counts a task that entered ending.
func (s *Set) Leave() { s.wg.Done() }

// Go runs f in a goroutine counted until it returns; false (f not run)
// once the set is closed.
func (s *Set) Go(f func()) bool {
	if !s.Enter() {
		return false
	}
	go func() {
		defer s.Leave()
		f()
	}()
	return true
}

// Close refuses new tasks and waits until those counted have returned, at
// most until ctx ends (ctx.Err then).
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
