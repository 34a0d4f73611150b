package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/retry"
)

// EnsureAttempt bounds one attempt of Ensure: a request that reaches a
// stream's former leader while a cluster elects a new one is never
// answered, and the attempt after it may reach the new one.
const EnsureAttempt = 5 * time.Second

// ensureBackoff spaces Ensure's attempts.
var ensureBackoff = retry.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.3}

// Ensure's lines.
const (
	msgEnsured     = "JetStream: created after waiting"
	msgEnsureWaits = "JetStream cannot create it yet; retrying"
)

// Ensure creates what (a stream, a consumer, a key-value bucket) with
// try, each attempt given EnsureAttempt of ctx, until it succeeds, fails
// for good (an error Transient does not take for passing) or ctx ends.
// While JetStream cannot create it yet (a cluster electing a leader or
// forming, a node down, no answer in time) it retries with backoff: it
// logs once that it waits and why, and once it succeeded after waiting,
// how long it took. log may be nil.
func Ensure(ctx context.Context, log *slog.Logger, what string, try func(ctx context.Context) error) error {
	start := time.Now()
	b := ensureBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, EnsureAttempt)
		err := try(actx)
		cancel()
		if err == nil {
			if b.Failures() > 0 && log != nil {
				log.Info(msgEnsured, "what", what, "waited", time.Since(start).Round(time.Millisecond).String(), "attempts", b.Failures()+1)
			}
			return nil
		}
		if ctx.Err() != nil {
			return &WaitError{What: what, Waited: time.Since(start), Attempts: b.Failures() + 1, Last: err, Cause: context.Cause(ctx)}
		}
		if !Transient(err) {
			return err
		}
		if b.Failures() == 0 && log != nil {
			log.Warn(msgEnsureWaits, "what", what, "why", WhyNotYet(err), "err", err,
				"fix", "retrying with backoff until it can; logged again once it worked")
		}
		if !retry.Sleep(ctx, b.Next()) {
			return &WaitError{What: what, Waited: time.Since(start), Attempts: b.Failures(), Last: err, Cause: context.Cause(ctx)}
		}
	}
}

// WaitError is Ensure's error when its context ended while it waited:
// errors.Is both the last attempt's error and the context's cause (a
// deadline, or the stop signal that canceled it).
type WaitError struct {
	// What was being created ("stream REACTORD_EVENTS").
	What     string
	Waited   time.Duration
	Attempts int
	Last     error
	Cause    error
}

// Error names what was waited for, how long, how many attempts, the last
// attempt's error and why the wait ended.
func (e *WaitError) Error() string {
	return fmt.Sprintf("%s: gave up waiting after %v (%d attempts): %v (%v)", e.What, e.Waited.Round(time.Millisecond), e.Attempts, e.Last, e.Cause)
}

// Unwrap returns the last attempt's error and the context's cause.
func (e *WaitError) Unwrap() []error { return []error{e.Last, e.Cause} }

// WhyNotYet says, for an error Transient takes for passing, what is
// likely going on.
func WhyNotYet(err error) string {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jsClusterNoPeers:
		return "the NATS cluster has not enough nodes joined yet to place its copies (--stream-replicas)"
	case errors.As(err, &apiErr):
		return "JetStream is not ready (a cluster electing its leaders, a stream being scaled)"
	case errors.Is(err, nats.ErrNoResponders):
		return "no JetStream server answered yet (a cluster forming)"
	default:
		return fmt.Sprintf("no answer within %v (a cluster electing its leaders, or the node leading it down)", EnsureAttempt)
	}
}
