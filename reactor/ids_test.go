package reactor

import (
	"sync"
	"testing"
)

// TestEventIDsConcurrently: lanes take event ids at the same time; each
// is unique and (under -race) the lazy prefix is not a data race.
func TestEventIDsConcurrently(t *testing.T) {
	a := &eventIDs{}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				id := a.next()
				mu.Lock()
				if seen[id] {
					t.Errorf("id %s given twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 800 {
		t.Fatalf("%d ids, want 800", len(seen))
	}
}
