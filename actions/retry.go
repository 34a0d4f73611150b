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

// Do dispatches a with retries. Its error is the driver's, not prefixed
// with the driver's name (whoever reports it names the driver once), and
// says which attempt it was only when a retry happened or was allowed: a
// retryable error on the last attempt reads "attempt 5 of 5: ...", an
// error that is not retryable on the first attempt is the driver's alone.
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
	for i := 1; ; i++ {
		if ctx.Err() != nil || i > 1 && !retry.Sleep(ctx, b.Next()) {
			if last == nil {
				return Result{}, fmt.Errorf("not attempted: %w", ctx.Err())
			}
			return Result{}, fmt.Errorf("giving up after %d of %d attempts (%v): %w", i-1, attempts, ctx.Err(), last)
		}
		res, err := r.Driver.Do(ctx, a)
		if err == nil {
			return res, nil
		}
		retryable := IsRetryable(err)
		if !retryable || i == attempts {
			if i == 1 && (!retryable || attempts == 1) {
				return Result{}, err // no retry happened, none was allowed
			}
			return Result{}, fmt.Errorf("attempt %d of %d: %w", i, attempts, err)
		}
		last = err
	}
}
