package reactor

import (
	"context"
	"slices"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
)

// react matches the event against the rules (engine.Match), applies the
// rule options that may hold it back (gates), and renders the reaction
// files of the rules still admitted (Render), all with the configuration
// of one engine; it counts and records (ledger) what happened. It returns
// nil when there is nothing to dispatch.
func (r *Reactor) react(ctx context.Context, ev *inflight) *engine.Result {
	m := r.match(ctx, ev)
	if m == nil {
		return nil
	}
	ev.data = m.Data
	if r.hookMatched != nil {
		r.hookMatched()
	}
	r.gates(ctx, ev, m)
	var collected []any
	if ev.resume != nil {
		collected = ev.resume.collected
	}
	res, err := m.Render(ctx, engine.RenderOptions{Collected: collected})
	if err != nil {
		return nil // ctx ended: finish leaves the event for redelivery
	}
	if ev.debug {
		r.logRendered(ev, res)
	}
	r.recordResult(ev, res.Config.Rules, res)
	return res
}

// match matches the event with the current engine; an event a gate held
// and let go is matched against its rule alone (engine.MatchRule: its
// glob, from and when as they are now). It returns nil when no rule
// reacts: none matched, a pre-filter skipped the event, its data is
// malformed, or a reload removed the rule a held event waited for.
func (r *Reactor) match(ctx context.Context, ev *inflight) *engine.Match {
	m, eng := r.opts.Metrics, r.eng.Load()
	if r.opts.Paused != nil && r.opts.Paused() {
		m.Suppressed.WithLabelValues("not_leader").Inc()
		return nil
	}
	opts := engine.MatchOptions{EventID: ev.id}
	if rl := ev.resume; rl != nil {
		mt, err := eng.MatchRule(ctx, ev.tag, ev.raw, rl.rule, opts)
		if err != nil {
			m.Malformed.Inc()
			return nil
		}
		if mt == nil {
			// Let go after a reload removed its rule (or changed its
			// glob): no other rule takes the held event.
			r.record(ev, Decision{Reason: RuleRemoved, RuleID: rl.rule})
			return nil
		}
		if mt.Result.Forged != "" {
			// The rule's from: tightened by a reload refuses it now.
			m.Suppressed.WithLabelValues("forged_event").Inc()
		}
		return mt
	}
	mt, err := eng.Match(ctx, ev.tag, ev.raw, opts)
	if err != nil {
		m.Malformed.Inc()
		return nil
	}
	res := mt.Result
	if res.Forged != "" {
		m.Suppressed.WithLabelValues("forged_event").Inc()
	}
	if res.Skipped != "" {
		reason := "reactor_user"
		if res.Skipped == engine.SkipManageTag {
			reason = "manage_tag"
		}
		m.Suppressed.WithLabelValues(reason).Inc()
		return nil
	}
	if len(res.Rules) == 0 {
		if ev.debug {
			r.opts.Log.Debug("no rule matched", "event_id", ev.id, "tag", ev.tag)
		}
		return nil
	}
	m.Matched.Inc()
	for _, ri := range res.Rules {
		rl := &res.Config.Rules[ri]
		m.RuleMatches.WithLabelValues(rl.Glob).Inc()
		if ev.debug {
			r.opts.Log.Debug("rule matched", "event_id", ev.id, "tag", ev.tag, "rule", rl.Glob, "rule_pos", rl.Pos.String())
		}
	}
	return mt
}

// logRendered logs, at debug level, why matching rules did not react and
// each file rendered.
func (r *Reactor) logRendered(ev *inflight, res *engine.Result) {
	rules := res.Config.Rules
	for _, n := range res.Notes {
		r.opts.Log.Debug("rule did not react", "event_id", ev.id, "tag", ev.tag, "rule", rules[n.Rule].Glob, "reason", n.Note)
	}
	for _, f := range res.Files {
		if f.Err == nil {
			r.opts.Log.Debug("reaction file rendered", "event_id", ev.id, "tag", ev.tag, "rule", rules[f.Rule].Glob, "file", f.Path, "reactions", f.Reactions)
		}
	}
	r.opts.Log.Debug("reactions to dispatch", "event_id", ev.id, "tag", ev.tag, "count", len(res.Chunks))
}

// recordResult records what happened to the reactions of the rules that
// matched, short of their dispatch: why a rule did not react (but for
// the rules a gate held the event from: the gate recorded them), each
// file that failed, and verify_high's errors. A rule whose files
// rendered adds nothing here: its reactions' dispatches name it.
func (r *Reactor) recordResult(ev *inflight, rules []config.Rule, res *engine.Result) {
	for _, n := range res.Notes {
		if !slices.Contains(ev.gated, n.Rule) {
			r.record(ev, Decision{Reason: Noted, Rule: rules[n.Rule].Glob, RuleID: rules[n.Rule].ID, Detail: n.Note})
		}
	}
	for _, f := range res.Files {
		if f.Err != nil {
			r.record(ev, Decision{Reason: FileFailed, Rule: rules[f.Rule].Glob, RuleID: rules[f.Rule].ID, File: f.Path, Detail: f.Err.Error(), Err: f.Err})
		}
	}
	for _, err := range res.VerifyErrors {
		r.record(ev, Decision{Reason: VerifyFailed, Detail: "verify_high: " + err.Error(), Err: err})
	}
}
