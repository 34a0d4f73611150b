package reactor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
)

// chunkRule is what dispatch needs of the rule whose file gave a
// reaction, looked up once per reaction.
type chunkRule struct {
	// glob is the rule's glob, for the ledger ("" when no rule is known).
	glob string
	// reaction is the loop guard's name for the reaction: the rule's stable
	// ID (the same on replicas whose paths differ; the file itself when no
	// rule is known) and the reaction's ID.
	reaction guard.Reaction
	// mode is the loop guard's mode: the rule's guard option, else
	// guard.ModeFor's default for the reaction's kind.
	mode string
	// retry is the rule's retry option.
	retry config.Retry
}

// ruleOf finds the rule whose file gave reaction i of res: the one the
// engine rendered it for (engine.Result.RuleOf).
func ruleOf(res *engine.Result, i int) chunkRule {
	c := res.Chunks[i]
	sls := c.Str("__sls__")
	cr := chunkRule{reaction: guard.Reaction{Rule: "file:" + sls, ID: c.Str("__id__")}}
	option := ""
	if r := res.RuleOf(i); r != nil {
		cr.glob, cr.reaction.Rule, option, cr.retry = r.Glob, r.ID, r.Options.Guard, r.Options.Retry
	}
	cr.mode = guard.ModeFor(option, c.Str("state"), c.Str("fun"))
	return cr
}

// dispatch runs reaction i (a low chunk) of the event through the
// driver, unless the hop limit or the loop guard holds it, and tells the
// loop guard what it started. The driver calls begin in event order;
// one the driver has not answered once its request left (or within
// Options.HandOverAfter) is handed over (launch), and the rest of the
// dispatch completes beside the lane (handed over at once, two calls in
// flight may reach the driver in either order).
func (r *Reactor) dispatch(ctx context.Context, ev *inflight, res *engine.Result, i int) {
	c := res.Chunks[i]
	a := actions.Action{Tag: res.Tag, Chunk: c, Hop: ev.dl.Hop}
	sls, id := c.Str("__sls__"), c.Str("__id__")
	if ev.dl.MsgID != "" {
		a.Key = ev.dl.MsgID + "/" + sls + "/" + id
	}
	rule := ruleOf(res, i)
	if ev.overHops && rule.reaction == ev.firedBy {
		r.overHops(ev, c, rule)
		return
	}
	// A pending retry goes on (the guard let the reaction through when it
	// first ran; its own job's beacons must not stop its retry).
	if rule.retry.Attempts > 0 && c.Str("state") == "local" && r.retries.resume(ctx, ev, c, rule) {
		return
	}
	// The reaction's dispatches still in flight have the guard's word
	// first: ev may be their consequence.
	r.awaitDispatches(ctx, ev, rule)
	if h, held := r.opts.Guard.Held(rule.reaction, rule.mode, ev.gev); held {
		r.heldBack(ev, c, rule, h)
		return
	}
	d := r.dispatching(ev, c, rule)
	r.launch(ctx, ev, actions.SaysSent(r.opts.Driver, c.Str("state")), func(ctx context.Context) {
		out, err := r.run(ctx, ev, a)
		if err != nil {
			r.failed(ctx, ev, a, rule, err)
		} else {
			r.started(ctx, ev, c, rule, out)
		}
		if d != nil {
			d.Done() // the guard knows the dispatch's jobs now
		}
		if r.opts.OnDispatch != nil {
			r.opts.OnDispatch(ev.dl, a, out, err)
		}
	})
}

// overHops holds back a reaction whose own event fired it again too many
// times in a row.
func (r *Reactor) overHops(ev *inflight, c *event.Chunk, rule chunkRule) {
	r.record(ev, Decision{Reason: HopLimit, Rule: rule.glob, RuleID: rule.reaction.Rule, Chunk: c,
		Detail: fmt.Sprintf("hop limit: %d hops > %d, fired by this reaction", ev.dl.Hop, r.opts.MaxHops),
		Attrs:  []any{"hops", ev.dl.Hop, "max", r.opts.MaxHops, "cause", ev.cause}})
}

// run executes the action through the driver, with retries of retryable
// errors, and measures it.
func (r *Reactor) run(ctx context.Context, ev *inflight, a actions.Action) (actions.Result, error) {
	m, drv := r.opts.Metrics, r.opts.Driver
	start := time.Now()
	var out actions.Result
	var err error
	if st := a.Chunk.Str("state"); !drv.Supports(st) {
		err = fmt.Errorf("cannot run %s reactions", st)
	} else {
		out, err = r.opts.Retry.Do(ctx, a)
	}
	m.ActionDuration.WithLabelValues(drv.Name()).Observe(time.Since(start).Seconds())
	if !ev.dl.Received.IsZero() {
		m.Latency.Observe(time.Since(ev.dl.Received).Seconds())
	}
	return out, err
}

// failed records a reaction the driver failed to run, and hands it to
// the dead letter.
func (r *Reactor) failed(ctx context.Context, ev *inflight, a actions.Action, rule chunkRule, err error) {
	drv := r.opts.Driver.Name()
	r.record(ev, Decision{Reason: Failed, Rule: rule.glob, RuleID: rule.reaction.Rule, Chunk: a.Chunk, Detail: fmt.Sprintf("%s: %v", drv, err), Err: err})
	if r.opts.DeadLetter != nil && ctx.Err() == nil {
		r.opts.Metrics.DeadLetters.Inc()
		r.opts.DeadLetter(a, fmt.Errorf("%s: %w", drv, err))
	}
}

// started tells the loop guard, the concurrency limits and the retries
// about a reaction the driver started, and records it.
func (r *Reactor) started(ctx context.Context, ev *inflight, c *event.Chunk, rule chunkRule, out actions.Result) {
	g := r.opts.Guard
	targets := targetsOf(c, out, ev.minion)
	now := time.Now()
	g.Started(ev.id, rule.reaction, out.JID, targets, now)
	r.limits.started(ev.id, rule.reaction.Rule, out.JID, targets, now)
	if rule.retry.Attempts > 0 && c.Str("state") == "local" && out.JID != "" && len(targets) > 0 {
		r.retries.track(ctx, ev, c, rule, out.JID, targets, 0, r.holdFor(ev), now)
	}
	if t := firedTag(c); t != "" {
		// One event per target for local event.send, one for a runner.
		n := 1
		if c.Str("state") == "local" {
			n = max(len(targets), 1)
		}
		for range n {
			g.ExpectEvent(t, guard.Fired{Hop: ev.dl.Hop + 1, Cause: ev.tag, By: rule.reaction}, time.Now())
		}
	}
	r.record(ev, Decision{Reason: Dispatched, Rule: rule.glob, RuleID: rule.reaction.Rule, Chunk: c, JID: out.JID, Minion: strings.Join(targets, ","),
		Detail: fmt.Sprintf("%s %s %s", r.opts.Driver.Name(), c.Str("state"), c.Str("fun")), Attrs: []any{"hop", ev.dl.Hop}})
}

// heldBack records a reaction the loop guard holds back from ev: the
// reason names the evidence, and the log line is limited per reaction,
// minion and evidence, so the first of a new kind always shows.
func (r *Reactor) heldBack(ev *inflight, c *event.Chunk, rule chunkRule, h guard.Hold) {
	r.record(ev, Decision{Reason: LoopGuard + Reason(h.Evidence), Rule: rule.glob, RuleID: rule.reaction.Rule, Chunk: c, JID: h.JID,
		Detail: "loop guard: " + heldDetail(h), Attrs: []any{"evidence", h.Evidence, "phase", h.Phase}})
}

// heldDetail says what the evidence was, for the ledger and the log.
func heldDetail(h guard.Hold) string {
	switch h.Evidence {
	case guard.EvidenceJob:
		return "an event of job " + h.JID + ", which this reaction started (" + h.Phase + ")"
	case guard.EvidenceBeacon:
		return "a beacon of a minion job " + h.JID + " of this reaction runs on (" + h.Phase + ")"
	case guard.EvidenceMinionStart:
		return "the minion started while job " + h.JID + " of this reaction had not returned"
	case guard.EvidenceMinion:
		return "an event of a minion job " + h.JID + " of this reaction runs on (" + h.Phase + ", guard: minion)"
	}
	return h.Evidence
}
