package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff spaces the attempts of a retry loop: Min after the first
// failure, doubling after each further one up to Max. Every retry loop of
// reactord (the driver's reactions, the audit store's writer, the
// bridge's reconnections and publishes, JetStream redeliveries) takes its
// delays from one.
type Backoff struct {
	// Min is the first delay, Max the longest.
	Min, Max time.Duration
	// Jitter takes up to this fraction of each delay off at random (0.5:
	// between half the delay and all of it), so that replicas and
	// bridges do not retry in step.
	Jitter float64

	failures int
}

// After returns the delay after n failures (n ≥ 1; 0 gives 0), without
// jitter.
func (b Backoff) After(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := max(b.Min, 0)
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay returns the delay after n failures, with its jitter.
func (b Backoff) Delay(n int) time.Duration {
	d := b.After(n)
	if b.Jitter > 0 && d > 0 {
		d -= time.Duration(rand.Float64() * min(b.Jitter, 1) * float64(d))
	}
	return d
}

// Next counts a failure and returns the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return b.Delay(b.failures)
}

// Reset starts again from Min, after an attempt that succeeded.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures is how many failures Next counted since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

// Sleep waits for d, or until ctx ends; it reports whether the whole
// delay passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
