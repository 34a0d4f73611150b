package reactor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
)

// A lane hands a slow driver call over (Options.InFlight): it begins each
// reaction's driver call in event order and waits for it until the driver
// says the call's request was written (actions.Sent; the master and
// saltapi drivers say so, actions.SaysSent), or, for a driver that does
// not say, until Options.HandOverAfter passed; when the driver has not
// answered by then it goes on with its next reaction or event while the
// call completes in a goroutine of its own. So one minion's calls through
// a driver that says are written in the events' order, each before the
// next begins (a request refused unrun and sent again after the lane went
// on, after a master's restart say, may come after a later one), without
// one round trip each.
// A lane has at most InFlight calls in flight; the next waits for one to
// end. An event is finished (acknowledged, OnDone) once the lane is done
// with it and every call it handed over completed; the loop guard learns
// of each call before it begins (guard.Guard.Dispatching), so that an
// event that may be its consequence waits for its jid (dispatch).

// launcher is one lane's hand-over: slots bounds the calls in flight
// (one place each, numbered: a call's place in the poison journal),
// timer measures the wait for a call, up to after (0: none, the call is
// handed over at once). Only the lane's goroutine takes a slot and uses
// the timer.
type launcher struct {
	slots chan int
	timer *time.Timer
	after time.Duration
}

// newLaunchers returns a launcher for each lane; nil when inFlight is 1
// (no hand-over: each call is waited for, as before). after is how long
// a lane waits for a call before handing it over (0: at once).
func newLaunchers(lanes, inFlight int, after time.Duration) []*launcher {
	if inFlight <= 1 {
		return nil
	}
	ls := make([]*launcher, lanes)
	for i := range ls {
		t := time.NewTimer(time.Hour)
		t.Stop()
		ls[i] = &launcher{slots: make(chan int, inFlight), timer: t, after: max(after, 0)}
		for k := range inFlight {
			ls[i].slots <- k
		}
	}
	return ls
}

// launch runs call — a reaction's driver call and what follows it: the
// loop guard, the ledger, the retries told — for ev on its lane. Without
// hand-over, or for an event handled alone (a suspect of a crash), it
// runs on the lane. Otherwise it runs in a goroutine of its own, holding
// one of the lane's slots (the lane waits for one), under a context whose
// actions.Sent tells the lane its request was written; the lane waits for
// that or the call's end (a driver that says: says), or either or the
// launcher's after (one that does not), then goes on. ev stays open
// (release) until call returned.
func (r *Reactor) launch(ctx context.Context, ev *inflight, says bool, call func(context.Context)) {
	if r.launchers == nil || ev.serial {
		call(ctx)
		return
	}
	l := r.launchers[ev.lane]
	var k int
	select {
	case k = <-l.slots:
	case <-ctx.Done():
		call(ctx) // stopping: the call fails at once, as ctx ended
		return
	}
	ev.open.Add(1)
	began, sent, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	cctx := actions.WithSent(ctx, func() { once.Do(func() { close(sent) }) })
	r.wg.Add(1) // Stop waits for the call as for a lane
	// The call is in the poison journal while it runs, in a place of
	// its own: the lane's own place is the next event's once it goes on,
	// and a crash in the call must count against this event.
	place := len(r.launchers) + ev.lane*cap(l.slots) + k
	j := r.opts.Journal
	go func() {
		defer r.wg.Done()
		if j != nil {
			j.Begin(place, ev.dl.Seq)
		}
		close(began)
		call(cctx)
		if j != nil {
			j.End(place, ev.dl.Seq)
		}
		l.slots <- k
		// Released before done: a call that ended in time leaves the
		// event to the lane, which finishes it before its next event.
		r.release(ctx, ev)
		close(done)
	}()
	if l.after == 0 {
		// Hand over at once: the lane goes on while the call runs, once
		// the call's goroutine runs, so that the calls' goroutines start
		// in the events' order (two calls in flight may still reach the
		// driver in either order).
		<-began
		select {
		case <-done:
		default:
			r.opts.Metrics.HandedOver.Inc()
		}
		return
	}
	var timeout <-chan time.Time
	if !says {
		l.timer.Reset(l.after)
		defer l.timer.Stop()
		timeout = l.timer.C
	}
	select {
	case <-done:
		return
	case <-sent:
		select {
		case <-done: // answered as soon as sent: nothing handed over
			return
		default:
		}
	case <-timeout:
	}
	r.opts.Metrics.HandedOver.Inc()
}

// release ends one holder of ev: the lane's handling, or a call it
// handed over; the last finishes the event.
func (r *Reactor) release(ctx context.Context, ev *inflight) {
	if ev.open.Add(-1) == 0 {
		r.finish(ctx, ev)
	}
}

// dispatching tells the loop guard of a reaction's dispatch about to
// begin, when calls may be handed over (nil otherwise): events that may be
// its consequences wait for its Done.
func (r *Reactor) dispatching(ev *inflight, c *event.Chunk, rule chunkRule) *guard.Dispatch {
	if r.launchers == nil {
		return nil
	}
	return r.opts.Guard.Dispatching(guard.InFlight{EventID: ev.id, Reaction: rule.reaction, Kind: c.Str("state"),
		Targets: mayTarget(c, ev.minion), Fires: firedTag(c), At: time.Now()})
}

// mayTarget returns the minions a chunk's job may run on before the
// driver answers: targetsOf's, but for a local job whose target is not
// literal (a glob, a grain, a compound), which the driver's answer may
// widen: nil, any minion.
func mayTarget(c *event.Chunk, eventMinion string) []string {
	if c.Str("state") == "local" {
		return targetsOf(c, actions.Result{}, "")
	}
	return targetsOf(c, actions.Result{}, eventMinion)
}

// awaitDispatches waits, before the loop guard judges ev for a reaction,
// for the reaction's dispatches in flight ev may be a consequence of
// (guard.Guard.Await); one that does not answer in time is logged, and
// the guard judges without it.
func (r *Reactor) awaitDispatches(ctx context.Context, ev *inflight, rule chunkRule) {
	if r.launchers == nil {
		return
	}
	if err := r.opts.Guard.Await(ctx, ev.id, rule.reaction, rule.mode, ev.gev); err != nil && ctx.Err() == nil {
		r.rec.noisy(slog.LevelWarn, "", msgAwaitDispatch, "event_id", ev.id, "tag", ev.tag, "rule", rule.reaction.Rule, "id", rule.reaction.ID,
			"err", err, "fix", fixAwaitDispatch)
	}
}

// awaitFired waits, before the loop guard looks up an event's hop count,
// for the dispatches in flight that fire its tag (guard.Guard.AwaitFired).
func (r *Reactor) awaitFired(ctx context.Context, ev *inflight) {
	if r.launchers == nil {
		return
	}
	if err := r.opts.Guard.AwaitFired(ctx, ev.tag, ev.received); err != nil && ctx.Err() == nil {
		r.rec.noisy(slog.LevelWarn, "", msgAwaitDispatch, "event_id", ev.id, "tag", ev.tag, "err", err, "fix", fixAwaitDispatch)
	}
}
