package main

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// slowCounter counts rows as a database does, slowly: each Rows waits for
// release; running is how many run now.
type slowCounter struct {
	release chan struct{}
	mu      sync.Mutex
	running int
}

func (c *slowCounter) Rows(ctx context.Context) (map[string]int64, error) {
	c.mu.Lock()
	c.running++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return map[string]int64{"salt_events": 30, "salt_returns": 12}, nil
}

func (c *slowCounter) now() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// TestAuditRowsOneAtATime: counts asked for while one runs wait for it
// and never run beside it (they piled up on the database server, 20 at
// once, before), and a sample reads the last total.
func TestAuditRowsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &slowCounter{release: make(chan struct{})}
		a := newAuditRows(c)
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if err := a.count(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		for left := 5; left > 0; left-- {
			synctest.Wait() // every count runs or waits
			if got := c.now(); got != 1 {
				t.Fatalf("%d counts run at once with %d asked for, want 1", got, left)
			}
			if left == 5 && a.last() != 0 {
				t.Errorf("a total %d before any count ended", a.last())
			}
			c.release <- struct{}{}
		}
		wg.Wait()
		if got := a.last(); got != 42 {
			t.Errorf("last count %d, want 42", got)
		}
	})
}
