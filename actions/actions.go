// Package actions turns compiled low chunks into calls and hands them to
// drivers that execute them (or, for the dry-run driver, print them). Retry
// and timeouts live in stages around drivers, never inside them.
package actions

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/reactord/reactord/event"
)

// Action is one reaction to execute: the chunk and the event that caused it.
type Action struct {
	// Tag is the tag of the triggering event.
	Tag string
	// Chunk is the compiled low chunk.
	Chunk *event.Chunk
	// Hop is the hop count of the triggering event; anything the action
	// publishes carries Hop+1.
	Hop int
	// Key names this reaction of this event the same way each time the
	// event is delivered (its publisher's message id, the reaction's file
	// and id), so that a driver can have duplicates dropped (the nats
	// driver gives it to JetStream as the message id). Empty when the
	// event came without a message id.
	Key string
}

// Result is what a driver reports after dispatching an action.
type Result struct {
	// JID is the Salt job id the dispatch started, when there is one.
	JID string
	// Minions are the targets Salt reported, when known.
	Minions []string
}

// Driver executes actions. Do reports a retryable failure by wrapping its
// error with Retryable.
type Driver interface {
	// Name identifies the driver in logs and metrics. Do's errors do
	// not start with it: whoever reports one names the driver, once.
	Name() string
	// Supports reports whether the driver can run a reaction type (local,
	// runner, wheel, caller); configurations using a type the driver
	// cannot run fail at load.
	Supports(state string) bool
	// Do dispatches one action.
	Do(ctx context.Context, a Action) (Result, error)
	// Close releases what the driver holds (connections, sessions) and
	// finishes what it owes (the nats driver's last confirming flush),
	// within ctx. The daemon calls it once on stop, after the last Do.
	Close(ctx context.Context) error
}

// DispatchLevel is the level at which a dispatch through d is logged:
// debug for a driver that shows each action itself where its user reads
// it (the dry run's JSON line on stdout is the one place a reaction is
// shown), info for the others.
func DispatchLevel(d Driver) slog.Level {
	if s, ok := d.(interface{ ShowsActions() bool }); ok && s.ShowsActions() {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Retryable marks err as worth retrying (a timeout, a refused connection, a
// 5xx answer). A nil err stays nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryable{err}
}

// IsRetryable reports whether err, or an error it wraps, was marked with
// Retryable.
func IsRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// Describer is implemented by drivers that can say, without executing, the
// exact call they would make for an action (`reactord explain`).
type Describer interface {
	Describe(a Action) (string, error)
}

// Prober is implemented by drivers that can check, before any reaction,
// that what they drive answers and takes their credentials (salt-api's
// login): check and the daemon's start ask, and /healthz reports it.
type Prober interface {
	Probe(ctx context.Context) error
}

// AllDone returns a context that is canceled once every one of ctxs has
// ended (or when the returned cancel is called): for work done on behalf of
// several callers, which must go on while any of them still waits.
func AllDone(ctxs []context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// sentKey is the context key of the function Sent calls.
type sentKey struct{}

// WithSent returns a copy of ctx that carries sent, for the caller of a
// driver's Do that wants to know when the call's request has left:
// reactord's lanes go on with a minion's next reaction then, rather than
// wait for the driver's answer, so that one minion's calls overlap and
// still reach Salt in the order they began. sent may be called more than
// once (a request sent again) and from any goroutine; nil carries none,
// for a request that is not yet the call's last word (a key reaction
// written to the first of several masters).
func WithSent(ctx context.Context, sent func()) context.Context {
	return context.WithValue(ctx, sentKey{}, sent)
}

// Sent is what a driver calls once the request of the call made under ctx
// has been written whole to Salt's connection (the master's request port,
// reactord's Salt engine, salt-api), before it waits for the answer; it
// does nothing when ctx carries no function (WithSent). A driver says
// which calls it tells of (SaysSent); the lane waits for the others up to
// its --hand-over-after.
func Sent(ctx context.Context) {
	if f, _ := ctx.Value(sentKey{}).(func()); f != nil {
		f()
	}
}

// SaysSent reports whether d calls Sent for each call of reactions of
// type state before it waits for Salt's answer: a driver that does has a
// SaysSent(state string) bool method that says so.
func SaysSent(d Driver, state string) bool {
	s, ok := d.(interface{ SaysSent(state string) bool })
	return ok && s.SaysSent(state)
}
