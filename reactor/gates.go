package reactor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
)

// held is an event a gate holds for one rule (debounce, concurrency,
// collect): what it takes back to its lane when the gate lets it go
// (resubmit), so that it resumes at render for that rule alone, with what
// the gates on the event found when it first came.
type held struct {
	// rule is the rule's ID.
	rule string
	// id is the event's id: the reaction joins the trail of the event
	// held (archived once, under that id).
	id string
	// body, hop, seq, msgID and js (Delivery.Redelivers) are the
	// delivery's. Its stream sequence and message id go with it: a retry
	// of its reaction is recorded under them (progressName).
	body  []byte
	hop   int
	seq   uint64
	msgID string
	js    bool
	// cause, gev, firedBy and overHops are what the loop guard found
	// (inflight); the event is not weighed again.
	cause    string
	gev      guard.Event
	firedBy  guard.Reaction
	overHops bool
	// collected are the events a collect option gathered.
	collected []any
}

// holding is what ev takes back to its lane when a gate of rule lets it
// go.
func holding(ev *inflight, rule string) held {
	return held{rule: rule, id: ev.id, body: ev.dl.Body, hop: ev.dl.Hop, seq: ev.dl.Seq, msgID: ev.dl.MsgID, js: ev.dl.Redelivers,
		cause: ev.cause, gev: ev.gev, firedBy: ev.firedBy, overHops: ev.overHops}
}

// resubmit sends an event a gate let go back to its lane, where it
// resumes at render for its rule alone. let settles the hold: abandoned
// unless the event was handled. A refused one is settled (let(true)) and
// reported false.
func (r *Reactor) resubmit(ctx context.Context, h held, let func(abandon bool)) bool {
	again := Delivery{Body: h.body, Received: time.Now(), Hop: h.hop, Redelivers: h.js, id: h.id,
		Seq: h.seq, MsgID: h.msgID, Settle: func(o Outcome) { let(o != Ack) }, resume: &h}
	return r.Submit(ctx, again)
}

// gates applies the rule options that may hold the event back —
// throttle, debounce, concurrency, collect — to each rule m admitted,
// with the rule m was matched with (never one a reload swapped in since).
// A rule that holds the event back leaves m.Admitted, with a note. An
// event a gate let go (resumed) passes: its gate admitted it.
func (r *Reactor) gates(ctx context.Context, ev *inflight, m *engine.Match) {
	if ev.resume != nil {
		return
	}
	kept := m.Admitted[:0]
	for _, a := range m.Admitted {
		if engine.Gated(a.Rule.Options) {
			if dc, ok := r.gate(ctx, ev, a); !ok {
				dc.Rule, dc.RuleID, dc.Key = a.Rule.Glob, a.Rule.ID, a.Key
				r.record(ev, dc)
				m.Refused(a, dc.Detail)
				ev.gated = append(ev.gated, a.Index)
				continue
			}
		}
		kept = append(kept, a)
	}
	m.Admitted = kept
}

// gate applies one rule's options to the event: it reports false, with
// the decision saying why (its Detail the rule's note), when the rule
// does not react to it now.
func (r *Reactor) gate(ctx context.Context, ev *inflight, a engine.Admitted) (Decision, bool) {
	o, rl := a.Rule.Options, a.Rule
	if o.Debounce > 0 {
		return r.debounce(ctx, ev, a), false
	}
	if o.ThrottleCount > 0 && !r.opts.Guard.Throttle(rl.ID, a.Key, o.ThrottleCount, o.ThrottlePer, time.Now()) {
		return Decision{Reason: Throttle, Detail: fmt.Sprintf("throttle: more than %d per %s for key %q", o.ThrottleCount, o.ThrottlePer, a.Key),
			Attrs: []any{"limit", fmt.Sprintf("%d per %s", o.ThrottleCount, o.ThrottlePer)}}, false
	}
	if o.Concurrency > 0 {
		return r.concurrency(ctx, ev, a)
	}
	if o.Collect.Within > 0 {
		return r.collect(ctx, ev, a)
	}
	return Decision{}, true
}

// letter returns a function that lets go of the event's hold, counting
// an event abandoned by a stop in returned (JetStream redelivers it; nil:
// not counted there) or lost (core NATS).
func (r *Reactor) letter(ev *inflight, returned, lost *atomic.Int64) func(abandon bool) {
	hold, js := r.holdFor(ev), ev.dl.Redelivers
	return func(abandon bool) {
		if abandon && r.stopped.Load() {
			switch {
			case !js:
				lost.Add(1)
			case returned != nil:
				returned.Add(1)
			}
		}
		hold.let(abandon)
	}
}

// debounce holds the event for the rule until its key has been quiet for
// the rule's debounce; a newer event of the key replaces it. The event
// stays unacknowledged until then, so a stop or a crash in its quiet
// period leaves it to JetStream's redelivery.
func (r *Reactor) debounce(ctx context.Context, ev *inflight, a engine.Admitted) Decision {
	rl, quiet := a.Rule, a.Rule.Options.Debounce
	h := holding(ev, rl.ID)
	let := r.letter(ev, &r.left.debounceReturned, &r.left.debounceLost)
	r.opts.Guard.Debounce(rl.ID, a.Key, ev.dl.Body, ev.dl.Hop, quiet, let, func(_ []byte, _ int, let func(bool)) {
		r.runTask(func() { r.resubmit(ctx, h, let) })
	})
	return Decision{Reason: Debounce, Detail: fmt.Sprintf("debounce: held until %s without a new event for key %q", quiet, a.Key),
		Attrs: []any{"quiet", quiet.String()}}
}

// concurrency gives the event a slot of the rule for its key, or queues
// it, unacknowledged, until one of the rule's reactions in flight for the
// key is done; it then comes back for this rule alone, in the order
// queued.
func (r *Reactor) concurrency(ctx context.Context, ev *inflight, a engine.Admitted) (Decision, bool) {
	rl, max := a.Rule, a.Rule.Options.Concurrency
	h := holding(ev, rl.ID)
	let := r.letter(ev, &r.left.queuedReturned, &r.left.queuedLost)
	ok, place := r.limits.acquire(ev.id, rl.ID, a.Key, max, func() {
		r.opts.Metrics.ConcurrencyQueued.Dec()
		if !r.resubmit(ctx, h, let) { // a refused one is settled: let(true)
			r.limits.ended(ev.id, []string{rl.ID}) // and gives its slot back
		}
	}, func() {
		r.opts.Metrics.ConcurrencyQueued.Dec()
		let(true)
	})
	if ok {
		let(false) // not held: the slot is the event's own
		ev.slots = append(ev.slots, rl.ID)
		return Decision{}, true
	}
	r.opts.Metrics.ConcurrencyQueued.Inc()
	return Decision{Reason: Concurrency, Detail: fmt.Sprintf("concurrency: %d reactions in flight for key %q; queued (place %d)", max, a.Key, place),
		Attrs: []any{"limit", max, "place", place}}, false
}
