package reactor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
)

// inflight is one event going through handle's steps, and what the steps
// share.
type inflight struct {
	// dl is the delivery; the loop guard may set its Hop.
	dl Delivery
	// id is the event's id, in every log line and ledger entry about it.
	id       string
	tag      string
	raw      []byte
	minion   string
	received time.Time
	// cause is the tag of the event whose reaction fired this one, if the
	// loop guard knows it.
	cause string
	// gev is what the loop guard weighs of the event.
	gev guard.Event
	// firedBy is the reaction that fired the event (event.send), when the
	// loop guard expected it; overHops is set when the event is past the
	// hop limit, which then stops that reaction alone.
	firedBy  guard.Reaction
	overHops bool
	// resume is set on an event a gate held for one rule and let go: it
	// resumes at render for that rule (Delivery.resume).
	resume *held
	// debug is set when the log takes debug lines (-v): each decision of
	// the pipeline is then logged.
	debug bool
	// nak leaves the event for redelivery instead of acknowledging it.
	nak bool
	// hold, set when a debounce holds the event, delays its
	// acknowledgement until the debounce fired; holdMu guards its making
	// (holdFor), which a call handed over may do beside the lane.
	hold   *eventHold
	holdMu sync.Mutex
	// lane is the lane that handles the event; serial, set for a suspect
	// of a crash, keeps its driver calls on the lane (no hand-over); open
	// counts the holders of the event, the lane's handling and each call
	// it handed over: the last finishes it (release).
	lane   int
	serial bool
	open   atomic.Int32
	// slots are the rules (their ids) whose concurrency limit gave the
	// event a slot; finish gives back those with no job in flight.
	slots []string
	// archived is set when the event itself is to be archived; finish
	// adds its record, with its id when ledgered is set (something
	// happened to a reaction of it; set by a call handed over too), so
	// that only the events `reactord trace` has something to say about
	// get an id row.
	archived bool
	ledgered atomic.Bool
	// data is the event's data, decoded by the match.
	data map[string]any
	// gated are the rules (their index in the match's configuration) a
	// gate held the event back from: their notes are recorded by the gate.
	gated []int
}

// handle takes one event through the pipeline on lane: decode, archive,
// loop guard, match and render, dispatch; then acknowledges it (finish),
// once the driver calls it handed over completed too (launch). serial
// keeps every call on the lane.
func (r *Reactor) handle(ctx context.Context, lane int, dl Delivery, serial bool) {
	if dl.Owned != nil && !dl.Owned() {
		dl.settle(Leave)
		r.record(nil, Decision{Reason: PartitionMoved, Event: Event{ID: dl.id, Tag: dl.tag}, Attrs: []any{"seq", dl.Seq,
			"metric", `reactord_suppressed_total{reason="partition_moved"}`}})
		return
	}
	ev := &inflight{dl: dl, id: dl.id, received: time.Now(), debug: r.opts.Log.Enabled(ctx, slog.LevelDebug), resume: dl.resume,
		lane: lane, serial: serial}
	if ev.id == "" {
		ev.id = r.ids.next()
	}
	ev.open.Store(1)
	defer r.release(ctx, ev)
	if ev.resume == nil {
		r.opts.Metrics.Events.Inc() // a held event let go was counted when it came
	}
	if !r.decode(ev) || !r.firstCopy(ctx, ev) || !r.archive(ev) {
		return
	}
	if ev.resume == nil { // a held event let go was heard when it came
		r.rec.event(ev)
	}
	if !r.checkHops(ctx, ev) {
		return
	}
	res := r.react(ctx, ev)
	if res == nil {
		return
	}
	for i := range res.Chunks {
		r.dispatch(ctx, ev, res, i)
	}
}

// finish acknowledges the event: Retry when it is left for redelivery,
// otherwise Ack, with an Archive once the event's records are durable.
// An event a debounce holds is acknowledged once the debounce let it go.
func (r *Reactor) finish(ctx context.Context, ev *inflight) {
	if ctx.Err() != nil {
		ev.nak = true // cancelled mid-way: leave the event for redelivery
	}
	if ev.resume != nil {
		ev.slots = append(ev.slots, ev.resume.rule)
	}
	if len(ev.slots) > 0 {
		r.limits.ended(ev.id, ev.slots)
	}
	if ev.archived && !(ev.nak && ev.dl.Redelivers) { // a refused event is archived when it comes back
		id := ""
		if ev.ledgered.Load() {
			id = ev.id
		}
		r.opts.Archive.event(id, ev.tag, ev.raw, ev.received)
	}
	if ev.hold != nil {
		ev.hold.let(ev.nak)
	} else {
		r.settle(ev.dl, ev.nak)
	}
	if !ev.nak && !ev.dl.Sent.IsZero() {
		r.opts.Metrics.SentLatency.Observe(time.Since(ev.dl.Sent).Seconds())
	}
	if r.opts.OnDone != nil {
		r.opts.OnDone(ev.dl)
	}
}

// settle acknowledges a delivery (Ack, once its records are durable) or
// refuses it (Retry) for redelivery.
func (r *Reactor) settle(dl Delivery, nak bool) {
	switch {
	case dl.Settle == nil:
	case nak:
		dl.Settle(Retry)
	case r.opts.Archive != nil:
		r.opts.Archive.W.OnDurable(func() { dl.Settle(Ack) })
	default:
		dl.Settle(Ack)
	}
}

// holdFor returns the event's hold, counting one more holder.
func (r *Reactor) holdFor(ev *inflight) *eventHold {
	ev.holdMu.Lock()
	defer ev.holdMu.Unlock()
	if ev.hold == nil {
		dl := ev.dl
		ev.hold = &eventHold{settle: func(nak bool) { r.settle(dl, nak) }}
		ev.hold.n.Store(1) // the handling itself, let go in finish
	}
	ev.hold.n.Add(1)
	return ev.hold
}

// decode takes the event's tag and raw data, which Submit split from the
// envelope, and finds its minion.
func (r *Reactor) decode(ev *inflight) bool {
	tag, raw := ev.dl.tag, ev.dl.raw
	if !ev.dl.split {
		// Submit refuses malformed envelopes: only a delivery that did not
		// come through it gets here.
		r.opts.Metrics.Malformed.Inc()
		return false
	}
	ev.tag, ev.raw, ev.minion = tag, raw, ev.dl.minion // found once, by submit
	if ev.debug {
		r.opts.Log.Debug("event received", "event_id", ev.id, "tag", tag, "minion", ev.minion, "hop", ev.dl.Hop, "bytes", len(ev.dl.Body))
	}
	return true
}

// firstCopy reports false for another master's copy of an event already
// taken (Options.Copy), which goes no further.
func (r *Reactor) firstCopy(ctx context.Context, ev *inflight) bool {
	if r.opts.Copy == nil || ev.resume != nil {
		return true
	}
	dup, err := r.opts.Copy(ctx, ev.tag, ev.raw, ev.dl.Seq)
	switch {
	case err != nil && ev.dl.Redelivers:
		ev.nak = true
		r.rec.noisy(slog.LevelWarn, "", msgCopyUnknownLeft, "event_id", ev.id, "tag", ev.tag, "err", err, "fix", fixCopyUnknown)
		return false
	case err != nil:
		r.rec.noisy(slog.LevelWarn, "", msgCopyUnknownReacted, "event_id", ev.id, "tag", ev.tag, "err", err, "fix", fixCopyUnknown)
		return true
	case dup:
		r.record(ev, Decision{Reason: MasterCopy})
		return false
	}
	return true
}

// archive records the event, its job and its returns. It reports false
// when the event goes no further: the store is full and the event is left
// for redelivery (JetStream). In core NATS mode the event is reacted to
// anyway and counted.
func (r *Reactor) archive(ev *inflight) bool {
	ar := r.opts.Archive
	if ar == nil || ev.resume != nil {
		// An event a gate held was archived when it came.
		return true
	}
	ok, keep := ar.record(ev.tag, ev.raw)
	if ok {
		ev.archived = keep
		return true
	}
	if ev.dl.Redelivers {
		// JetStream keeps the event; it comes back, after a delay that
		// grows with its deliveries, when the store has room again.
		ev.nak = true
		r.record(ev, Decision{Reason: StoreFull})
		return false
	}
	ev.archived = false
	r.record(ev, Decision{Reason: ArchiveDropped, Attrs: []any{"metric", "reactord_archive_dropped_total"}})
	return true
}

// checkHops applies the loop guard to the event itself: a job return
// holds its job's reactions for the settle window, and an event that
// reactions caused more than MaxHops times in a row is suppressed
// (false).
func (r *Reactor) checkHops(ctx context.Context, ev *inflight) bool {
	if h := ev.resume; h != nil {
		// Weighed when it first came, and let through then.
		ev.cause, ev.gev, ev.firedBy, ev.overHops = h.cause, h.gev, h.firedBy, h.overHops
		return true
	}
	g := r.opts.Guard
	// A reaction in flight may fire it: its expectation comes first.
	r.awaitFired(ctx, ev)
	// An expected event is used up either way; a hop header wins.
	fired := g.HopOf(ev.tag, ev.received)
	if ev.dl.Hop == 0 {
		ev.dl.Hop, ev.cause = fired.Hop, fired.Cause
	}
	ev.gev, ev.firedBy = guard.EventOf(ev.tag, ev.minion, ev.received), fired.By
	if jt, ok := event.ParseJobTag(ev.tag); ok {
		if id, ok := jt.Return(); ok {
			// Whether it failed matters to the rules' retry and
			// concurrency options alone (here and, through the guard's
			// shared state, on the other replicas, which run the same
			// rules).
			o := guard.OutcomeUnknown
			if r.jobOpts.Load() {
				failed := returnFailed(ev.raw)
				o = guard.OutcomeOK
				if failed {
					o = guard.OutcomeFailed
				}
				r.jobReturned(ctx, jt.JID, id, failed, ev.received)
			}
			if g.Returned(jt.JID, id, o, ev.received) {
				r.record(ev, Decision{Reason: Returned, JID: jt.JID, Minion: id, Detail: "job returned", Attrs: []any{"settle", g.Settle().String()}})
			}
		}
	}
	if ev.dl.Hop <= r.opts.MaxHops {
		return true
	}
	if ev.firedBy != (guard.Reaction{}) {
		// The reaction that fired it is stopped (dispatch); other rules
		// still react, their own chains counting on.
		ev.overHops = true
		return true
	}
	r.record(ev, Decision{Reason: HopLimit, Detail: fmt.Sprintf("hop limit: %d hops > %d", ev.dl.Hop, r.opts.MaxHops),
		Attrs: []any{"hops", ev.dl.Hop, "max", r.opts.MaxHops, "cause", ev.cause}})
	return false
}

// jobReturned hands a job return, handled here or by another replica, to
// the rules' retries and concurrency limits.
func (r *Reactor) jobReturned(ctx context.Context, jid, minion string, failed bool, at time.Time) {
	// Kept for a slot or retry that starts following the job after its
	// return (another lane or replica dispatched it).
	r.early.add(jid, minion, failed, at)
	// Retries first: a retry it schedules keeps the concurrency place the
	// job's return would otherwise free.
	r.retries.returned(ctx, jid, minion, failed)
	r.limits.returned(jid, minion)
}
