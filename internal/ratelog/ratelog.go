// Package ratelog keeps a log line that could repeat thousands of times
// (one per dropped event, one per failed write) to one line per interval:
// the first occurrence is logged at once, the next ones are counted and
// the count goes out with the next line allowed.
package ratelog

import (
	"context"
	"log/slog"
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

// Keyed is one Every per key, so that one noisy source (a broken file, a
// reaction that keeps failing) does not hide the first line of another.
// It tracks at most maxKeys keys; beyond them, the others share one.
type Keyed struct {
	mu       sync.Mutex
	interval time.Duration
	maxKeys  int
	m        map[string]*Every
}

// NewKeyed returns a Keyed allowing one line per key per interval.
func NewKeyed(interval time.Duration, maxKeys int) *Keyed {
	return &Keyed{interval: interval, maxKeys: maxKeys, m: map[string]*Every{}}
}

// Tick records one occurrence for key, as Every.Tick.
func (k *Keyed) Tick(key string) (n int64, ok bool) {
	k.mu.Lock()
	e, found := k.m[key]
	if !found {
		if len(k.m) >= k.maxKeys {
			key = "\x00overflow"
			e = k.m[key]
		}
		if e == nil {
			e = New(k.interval)
			k.m[key] = e
		}
	}
	k.mu.Unlock()
	return e.Tick()
}

// Log writes msg at level to log for the first occurrence of msg and key
// at once, then at most once per interval, adding how many occurrences the
// line stands for (occurrences_since_last_line) when it is more than one.
func (k *Keyed) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	n, ok := k.Tick(msg + "\x00" + key)
	if !ok {
		return
	}
	if n > 1 {
		args = append(args, "occurrences_since_last_line", n)
	}
	log.Log(context.Background(), level, msg, args...)
}
