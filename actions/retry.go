package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/reactord/reactord/internal/retry"
)

// RetryStage calls a driver, retrying retryable errors with exponential
// backoff until MaxAttempts or the context ends.
type RetryStage struct {
	// Driver is the wrapped driver.
	Driver Driver
	// MaxAttempts bounds the attempts (default 5).
	MaxAttempts int
	// Initial and Max bound the wait between attempts (defaults 100ms, 5s).
	Initial, Max time.Duration
}

// Do dispatches a with retries. The final error says how many attempts were
// made and wraps the last driver error.
func (r RetryStage) Do(ctx context.Context, a Action) (Result, error) {
	attempts := r.MaxAttempts
	if attempts <= 0 {
		attempts = 5
	}
	b := retry.Backoff{Min: r.Initial, Max: r.Max}
	if b.Min <= 0 {
		b.Min = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	var last error
	for i := 1; i <= attempts; i++ {
		if err := ctx.Err(); err != nil {
			if last == nil {
				last = err
			}
			return Result{}, fmt.Errorf("%s: giving up after %d attempt(s): %w", r.Driver.Name(), i-1, last)
		}
		res, err := r.Driver.Do(ctx, a)
		if err == nil {
			return res, nil
		}
		last = err
		if !IsRetryable(err) || i == attempts {
			return Result{}, fmt.Errorf("%s: attempt %d of %d: %w", r.Driver.Name(), i, attempts, err)
		}
		if !retry.Sleep(ctx, b.Next()) {
			return Result{}, fmt.Errorf("%s: giving up after %d attempt(s): %w", r.Driver.Name(), i, last)
		}
	}
	return Result{}, last
}
