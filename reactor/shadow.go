package reactor

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
)

// Shadow mode (Options.Shadow): the driver dispatches nothing, and each
// reaction the pipeline would run or holds back, each matching rule that
// did not react, and each job Salt's master publishes go to a
// shadow.Comparer, whose verdicts are counted (reactord_shadow_total),
// logged (one line per verdict and rule a minute) and kept in the ledger
// (stage shadow).

// startShadow creates the comparer, when shadow mode is on.
func (r *Reactor) startShadow() {
	o := r.opts.Shadow
	if o == nil {
		return
	}
	so := *o
	so.Adopt, so.Verdict = r.adopt, r.verdict
	so.Child = func(*shadow.Job) { r.opts.Metrics.ShadowRunnerJobs.Inc() }
	so.Overflow = func(what string) {
		r.noisy(slog.LevelWarn, "shadow overflow "+what, "shadow: too many unpaired "+what+": the oldest decided early, or forgotten (notes, runners); the window is too long for the traffic",
			"what", what, "max", cmp.Or(so.MaxPending, shadow.DefaultMaxPending))
	}
	r.shadow = shadow.New(so)
	r.shadow.SetHold(longestHold(r.eng.Load()))
	for _, v := range shadow.Verdicts {
		r.opts.Metrics.Shadow.WithLabelValues(v) // exported at 0 before the first
	}
}

// longestHold is the longest a rule option of eng holds an event before
// it reacts (debounce, collect).
func longestHold(eng *engine.Engine) time.Duration {
	var h time.Duration
	for _, r := range eng.Config().Rules {
		h = max(h, r.Options.Debounce, r.Options.Collect.Within)
	}
	return h
}

// shadowJob hands a job event to the comparer, and a runner's return.
func (r *Reactor) shadowJob(ev *inflight) {
	if r.shadow == nil || ev.resume != nil { // a held event let go was handed over when it came
		return
	}
	if rest, ok := strings.CutPrefix(ev.tag, "salt/run/"); ok && strings.HasSuffix(rest, "/ret") {
		r.shadow.RunnerDone(strings.TrimSuffix(rest, "/ret"), ev.received)
		return
	}
	if !strings.HasSuffix(ev.tag, "/new") {
		return
	}
	data, err := event.DecodeData(ev.raw)
	if err != nil {
		return
	}
	if j, ok := shadow.ParseJob(ev.tag, data, ev.received); ok {
		r.shadow.Job(j)
	}
}

// shadowNotes hands the comparer the rules that matched the event and did
// not react (with why), and the files that failed to render.
func (r *Reactor) shadowNotes(ev *inflight, m *engine.Match, res *engine.Result) {
	ev.stamp = shadow.Stamp(m.Data)
	rules := res.Config.Rules
	sender, _ := m.Data["id"].(string)
	note := func(rule, why string) {
		r.shadow.Noted(shadow.Note{EventID: ev.id, Tag: ev.tag, Minion: ev.minion, Sender: sender, Stamp: ev.stamp, Seen: ev.received, Rule: rule, Note: why})
		ev.ledgered = r.opts.Archive != nil
	}
	for _, n := range res.Notes {
		note(rules[n.Rule].Glob, n.Note)
	}
	for _, f := range res.Files {
		if f.Err != nil {
			note(rules[f.Rule].Glob, "file failed: "+f.Err.Error())
		}
	}
}

// shadowDecided hands the comparer a reaction the pipeline would run
// (held "") or holds back (held: its verdict, why: explain's words).
func (r *Reactor) shadowDecided(ev *inflight, c *event.Chunk, rule chunkRule, held, why string) {
	r.shadow.Decided(shadow.Decision{EventID: ev.id, Tag: ev.tag, Minion: ev.minion, Stamp: ev.stamp, Seen: ev.received,
		Rule: rule.glob, RuleID: rule.reaction.Rule, File: c.Str("__sls__"), ReactionID: rule.reaction.ID, Chunk: c, Held: held, Reason: why})
	ev.ledgered = r.opts.Archive != nil
}

// adopt takes a job Salt's reactor started for a reaction reactord would
// run as that reaction's own: the loop guard follows it as it follows the
// jobs reactord starts, so that its consequences are held back.
func (r *Reactor) adopt(dc *shadow.Decision, j *shadow.Job) {
	targets := j.Minions
	if len(targets) == 0 && dc.Minion != "" {
		targets = []string{dc.Minion}
	}
	r.opts.Guard.Started(dc.EventID, guard.Reaction{Rule: dc.RuleID, ID: dc.ReactionID}, j.JID, targets, time.Now())
}

// verdict counts, logs and records one verdict.
func (r *Reactor) verdict(v shadow.Verdict) {
	r.opts.Metrics.Shadow.WithLabelValues(v.Verdict).Inc()
	rule := v.Rule()
	e := store.LedgerEntry{Stage: store.StageShadow, Rule: rule, Time: time.Now()}
	if dc := v.Decision; dc != nil {
		e.EventID, e.Tag, e.File, e.ReactionID, e.Minion = dc.EventID, dc.Tag, dc.File, dc.ReactionID, dc.Minion
	} else if n := v.Note; n != nil {
		e.EventID, e.Tag, e.Minion = n.EventID, n.Tag, n.Minion
	}
	if j := v.Job; j != nil {
		e.JID = j.JID
		if e.Tag == "" {
			e.Tag = jobTag(j)
		}
		if e.Minion == "" {
			e.Minion = strings.Join(j.Minions, ",")
		}
	}
	if v.Verdict != shadow.Agree {
		level := slog.LevelWarn
		if shadow.Expected(v.Verdict) {
			level = slog.LevelInfo
		}
		r.noisy(level, "shadow\x00"+v.Verdict+"\x00"+rule, "shadow: "+v.Verdict+" (one line per verdict and rule a minute; each one is in reactord shadow report)",
			"verdict", v.Verdict, "rule", rule, "event_id", e.EventID, "tag", e.Tag, "jid", e.JID, "reason", v.Reason)
	}
	if r.opts.Archive == nil {
		return
	}
	detail, err := json.Marshal(v.Record())
	if err != nil {
		detail = []byte(`{"verdict":"` + v.Verdict + `"}`)
	}
	e.Detail = string(detail)
	r.opts.Archive.ledger(e)
}

// jobTag is the tag of a job's event.
func jobTag(j *shadow.Job) string {
	switch j.Kind {
	case "runner":
		return "salt/run/" + j.JID + "/new"
	case "wheel":
		return "salt/wheel/" + j.JID + "/new"
	}
	return "salt/job/" + j.JID + "/new"
}

// shadowStop leaves what the comparer still waits for undecided, saying
// how much.
func (r *Reactor) shadowStop() {
	if r.shadow == nil {
		return
	}
	if n := r.shadow.Children(); n > 0 {
		r.opts.Log.Info("shadow: local jobs Salt's reactor's runners started (an orchestration's own jobs) got no verdict of their own", "jobs", n)
	}
	if nd, nj := r.shadow.Abandon(); nd+nj > 0 {
		r.opts.Log.Info("shadow: stopping with decisions and jobs still within their pairing window; they get no verdict",
			"decisions", nd, "jobs", nj, "window", r.shadow.Window().String())
	}
}
