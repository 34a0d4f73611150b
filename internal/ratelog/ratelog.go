// Package ratelog keeps a log line that could repeat thousands of times
// (one per dropped event, one per failed write) to one line per interval:
// the first occurrence is logged at once, the next ones are counted and
// the count goes out with the next line allowed.
package ratelog

import (
	"sync"
	"time"
)

// Every lets one occurrence through per interval. The zero value is not
// usable; call New.
type Every struct {
	mu       sync.Mutex
	interval time.Duration
	last     time.Time
	n        int64
}

// New returns an Every that allows one line per interval.
func New(interval time.Duration) *Every { return &Every{interval: interval} }

// Tick records one occurrence. ok says whether to log now; n is how many
// occurrences (this one included) the line stands for.
func (e *Every) Tick() (n int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if !e.last.IsZero() && time.Since(e.last) < e.interval {
		return 0, false
	}
	e.last = time.Now()
	n, e.n = e.n, 0
	return n, true
}

// Pending returns the occurrences counted since the last line allowed and
// forgets them: a caller logs them in a closing summary.
func (e *Every) Pending() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.n
	e.n = 0
	return n
}
