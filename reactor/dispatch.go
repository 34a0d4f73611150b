package reactor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
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
// loop guard what it started.
func (d *Reactor) dispatch(ctx context.Context, ev *inflight, res *engine.Result, i int) {
	c := res.Chunks[i]
	a := actions.Action{Tag: res.Tag, Chunk: c, Hop: ev.dl.Hop}
	sls, id := c.Str("__sls__"), c.Str("__id__")
	if ev.dl.MsgID != "" {
		a.Key = ev.dl.MsgID + "/" + sls + "/" + id
	}
	rule := ruleOf(res, i)
	if ev.overHops && rule.reaction == ev.firedBy {
		d.overHops(ev, c, rule)
		return
	}
	// A pending retry goes on (the guard let the reaction through when it
	// first ran; its own job's beacons must not stop its retry).
	if rule.retry.Attempts > 0 && c.Str("state") == "local" && d.retries.resume(ctx, ev, c, rule) {
		return
	}
	if h, held := d.opts.Guard.Held(rule.reaction, rule.mode, ev.gev); held {
		d.heldBack(ev, c, rule, h)
		return
	}
	r, err := d.run(ctx, ev, a)
	if err != nil {
		d.failed(ctx, ev, a, rule, err)
	} else {
		d.started(ctx, ev, c, rule, r)
	}
	if d.opts.OnDispatch != nil {
		d.opts.OnDispatch(ev.dl, a, r, err)
	}
}

// overHops holds back a reaction whose own event fired it again too many
// times in a row.
func (d *Reactor) overHops(ev *inflight, c *event.Chunk, rule chunkRule) {
	sls, id := c.Str("__sls__"), c.Str("__id__")
	detail := fmt.Sprintf("hop limit: %d hops > %d, fired by this reaction", ev.dl.Hop, d.opts.MaxHops)
	if d.shadow != nil {
		d.shadowDecided(ev, c, rule, shadow.HeldHops, detail)
	}
	d.opts.Metrics.Suppressed.WithLabelValues("hop_limit").Inc()
	d.noisy(slog.LevelWarn, sls+"\x00"+id, "reaction held back: hop limit reached (the event is the reaction's own, fired again too many times in a row)",
		"event_id", ev.id, "tag", ev.tag, "id", id, "file", sls, "hops", ev.dl.Hop, "max", d.opts.MaxHops, "cause", ev.cause, "minion", ev.minion)
	d.ledger(ev, store.LedgerEntry{Stage: store.StageSuppressed, Rule: rule.glob, File: sls, ReactionID: id, Minion: ev.minion,
		Detail: detail})
}

// run executes the action through the driver, with retries of retryable
// errors, and measures it.
func (d *Reactor) run(ctx context.Context, ev *inflight, a actions.Action) (actions.Result, error) {
	m, drv := d.opts.Metrics, d.opts.Driver
	start := time.Now()
	var r actions.Result
	var err error
	if st := a.Chunk.Str("state"); !drv.Supports(st) {
		err = fmt.Errorf("cannot run %s reactions", st)
	} else {
		r, err = d.opts.Retry.Do(ctx, a)
	}
	m.ActionDuration.WithLabelValues(drv.Name()).Observe(time.Since(start).Seconds())
	if !ev.dl.Received.IsZero() {
		m.Latency.Observe(time.Since(ev.dl.Received).Seconds())
	}
	return r, err
}

// failed counts, logs and records a reaction the driver failed to run,
// and hands it to the dead letter.
func (d *Reactor) failed(ctx context.Context, ev *inflight, a actions.Action, rule chunkRule, err error) {
	m, drv := d.opts.Metrics, d.opts.Driver
	sls, id := a.Chunk.Str("__sls__"), a.Chunk.Str("__id__")
	m.Actions.WithLabelValues(drv.Name(), "failed").Inc()
	d.noisy(slog.LevelError, sls+"\x00"+id+"\x00"+drv.Name(), "reaction failed", "event_id", ev.id, "tag", ev.tag, "id", id, "file", sls, "driver", drv.Name(), "err", err)
	d.ledger(ev, store.LedgerEntry{Stage: store.StageFailed, Rule: rule.glob, File: sls, ReactionID: id, Minion: ev.minion, Detail: fmt.Sprintf("%s: %v", drv.Name(), err)})
	if d.opts.DeadLetter != nil && ctx.Err() == nil {
		m.DeadLetters.Inc()
		d.opts.DeadLetter(a, fmt.Errorf("%s: %w", drv.Name(), err))
	}
}

// started tells the loop guard, the concurrency limits and the retries
// about a reaction the driver started, and records it.
func (d *Reactor) started(ctx context.Context, ev *inflight, c *event.Chunk, rule chunkRule, r actions.Result) {
	g, drv := d.opts.Guard, d.opts.Driver
	sls, id := c.Str("__sls__"), c.Str("__id__")
	d.opts.Metrics.Actions.WithLabelValues(drv.Name(), "dispatched").Inc()
	targets := targetsOf(c, r, ev.minion)
	now := time.Now()
	g.Started(ev.id, rule.reaction, r.JID, targets, now)
	d.limits.started(ev.id, rule.reaction.Rule, r.JID, targets, now)
	if rule.retry.Attempts > 0 && c.Str("state") == "local" && r.JID != "" && len(targets) > 0 {
		d.retries.track(ctx, ev, c, rule, r.JID, targets, 0, d.holdFor(ev), now)
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
	d.dispatched.Add(1)
	if d.shadow != nil {
		d.shadowDecided(ev, c, rule, "", "")
	}
	level := actions.DispatchLevel(drv)
	if d.opts.Archive != nil {
		// The ledger keeps each dispatch (reactord trace); the log gets a
		// count a minute (see tick).
		level = slog.LevelDebug
	}
	d.opts.Log.Log(ctx, level, "reaction dispatched", "event_id", ev.id, "tag", ev.tag, "id", id, "file", sls, "driver", drv.Name(), "jid", r.JID, "targets", targets, "hop", ev.dl.Hop)
	d.ledger(ev, store.LedgerEntry{Stage: store.StageDispatched, Rule: rule.glob, File: sls, ReactionID: id, JID: r.JID, Minion: strings.Join(targets, ","),
		Detail: fmt.Sprintf("%s %s %s", drv.Name(), c.Str("state"), c.Str("fun"))})
}

// heldBack counts, logs and records a reaction the loop guard holds back
// from ev: the metric's reason and the line name the evidence. The line
// is limited per reaction, minion and evidence, so the first of a new
// kind always shows.
func (d *Reactor) heldBack(ev *inflight, c *event.Chunk, rule chunkRule, h guard.Hold) {
	r, sls := rule.reaction, c.Str("__sls__")
	d.opts.Metrics.Suppressed.WithLabelValues("loop_guard_" + h.Evidence).Inc()
	detail := "loop guard: " + heldDetail(h)
	if d.shadow != nil {
		d.shadowDecided(ev, c, rule, shadow.HeldLoop, detail)
	}
	d.noisy(slog.LevelInfo, r.Rule+"\x00"+r.ID+"\x00"+ev.minion+"\x00"+h.Evidence, "reaction held back by the loop guard: the event is its own consequence",
		"event_id", ev.id, "tag", ev.tag, "id", r.ID, "file", sls, "rule_id", r.Rule, "minion", ev.minion, "evidence", h.Evidence, "jid", h.JID, "phase", h.Phase, "detail", detail)
	d.ledger(ev, store.LedgerEntry{Stage: store.StageSuppressed, Rule: rule.glob, File: sls, ReactionID: r.ID, JID: h.JID, Minion: ev.minion,
		Detail: detail})
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
