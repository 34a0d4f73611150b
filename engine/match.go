package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
)

// Match is an event matched against one configuration: the rules whose
// glob matched its tag, and of those the ones admitted so far (their
// `from` and `when` held). It keeps the configuration it was matched
// with, so that whatever a caller decides between Match and Render (the
// daemon's throttle, debounce, concurrency and collect) and Render itself
// see the same rules, whatever a reload swapped in meanwhile.
type Match struct {
	// Result is the event's result so far: its tag, a pre-filter's skip
	// reason, the matching rules and the notes of those not admitted.
	// Render fills in the rest.
	Result *Result
	// Admitted are the rules that may react, in configuration order.
	// A caller that holds an event back from a rule takes the rule out
	// (Refused) before Render.
	Admitted []Admitted
	// Data is the event's decoded data (nil when no rule matched).
	Data map[string]any

	eng *Engine
	log *slog.Logger
	raw []byte
}

// Admitted is one rule admitted to react to a matched event.
type Admitted struct {
	// Index is the rule's position in the configuration matched.
	Index int
	// Rule is the rule.
	Rule *config.Rule
	// Key is the event's key for the rule's throttle, debounce,
	// concurrency and collect options (its key option, else the event's
	// minion); "" for a rule with none of them.
	Key string
}

// Gated reports whether a rule has an option that may hold an event back
// between Match and Render: throttle, debounce, concurrency or collect.
func Gated(o config.RuleOptions) bool {
	return o.ThrottleCount > 0 || o.Debounce > 0 || o.Concurrency > 0 || o.Collect.Within > 0
}

// MatchOptions adjust how an event is matched.
type MatchOptions struct {
	// EventID, when set, is added as event_id to every line the engine
	// logs about the event (the daemon's event ids).
	EventID string
}

// Match matches an event, whose envelope the caller split
// (event.SplitEnvelope), against the rules: Salt's pre-filters, the tag
// globs, then each matching rule's `from` (who sent the event) and
// `when`. The data is decoded only when a rule matches; a malformed one
// is counted and returned as an error.
func (e *Engine) Match(ctx context.Context, tag string, raw []byte, opts MatchOptions) (*Match, error) {
	e.stats.Events.Add(1)
	return e.match(tag, func() (map[string]any, error) { return event.DecodeData(raw) }, opts, raw)
}

// MatchRule matches an event a caller held for one rule (debounce,
// concurrency, collect) and now lets react against that rule alone, by ID
// (config.Rule.ID), as the configuration has it now: its glob, `from` and
// `when` apply again (a reload may have changed them), its gating options
// do not (they held the event already). It returns nil, nil when the
// configuration has no rule of that ID whose glob matches the tag (a
// reload removed or changed it); a rule whose `from` or `when` refuses the
// event now leaves Admitted empty, with a note.
func (e *Engine) MatchRule(ctx context.Context, tag string, raw []byte, id string, opts MatchOptions) (*Match, error) {
	ri := e.RuleIndex(id)
	if ri < 0 || !slices.Contains(e.table.Match(tag, nil), ri) {
		return nil, nil
	}
	d, err := event.DecodeData(raw)
	if err != nil {
		return nil, fmt.Errorf("event %q: %w", tag, err)
	}
	m := &Match{Result: &Result{Tag: tag, Config: e.cfg, Rules: []int{ri}}, Data: d, eng: e, log: e.eventLog(opts.EventID), raw: raw}
	if e.admits(m, ri, OriginOf(tag, d)) {
		m.Admitted = []Admitted{{Index: ri, Rule: &e.cfg.Rules[ri]}}
	}
	return m, nil
}

// match is Match with the data behind a function: a decoded event's, or
// its raw bytes to decode.
func (e *Engine) match(tag string, data func() (map[string]any, error), opts MatchOptions, raw []byte) (*Match, error) {
	log := e.eventLog(opts.EventID)
	m := &Match{Result: &Result{Tag: tag, Config: e.cfg}, eng: e, log: log, raw: raw}
	res := m.Result
	if strings.Contains(tag, "salt/reactors/manage") {
		res.Skipped = SkipManageTag
		log.Debug("event skipped", "tag", tag, "reason", res.Skipped)
		return m, nil
	}
	var buf [16]int
	if res.Rules = e.table.Match(tag, buf[:0]); len(res.Rules) == 0 {
		res.Rules = nil
		return m, nil
	}
	res.Rules = append([]int(nil), res.Rules...)
	d, err := data()
	if err != nil {
		e.stats.Malformed.Add(1)
		e.stats.Errors.Add(1)
		e.noisy(log, slog.LevelWarn, "", "malformed event data", "tag", tag, "err", err)
		return nil, fmt.Errorf("event %q: %w", tag, err)
	}
	m.Data = d
	if u, _ := d["user"].(string); u == ReactorUser {
		res.Skipped = SkipReactorUser
		log.Debug("event skipped", "tag", tag, "reason", res.Skipped)
		return m, nil
	}
	e.stats.Matched.Add(1)
	origin := OriginOf(tag, d)
	for _, ri := range res.Rules {
		if e.admits(m, ri, origin) {
			m.Admitted = append(m.Admitted, Admitted{Index: ri, Rule: &e.cfg.Rules[ri], Key: e.key(ri, tag, raw, d)})
		}
	}
	return m, nil
}

// admits applies a matching rule's `from` and `when` to the event, noting
// in the result why it does not react when it does not.
func (e *Engine) admits(m *Match, ri int, origin Origin) bool {
	rule, res, tag, log := &e.cfg.Rules[ri], m.Result, m.Result.Tag, m.log
	if ok, why := origin.admits(rule.Options.From); !ok {
		res.Notes = append(res.Notes, RuleNote{Rule: ri, Note: why})
		if origin.Forged != "" && res.Forged == "" {
			res.Forged = origin.Forged
			e.noisy(log, slog.LevelWarn, "forged\x00"+origin.Minion+"\x00"+origin.Family,
				"forged event: no reaction (a rule's from: any accepts it)", "tag", tag, "minion", origin.Minion, "why", origin.Forged)
		}
		return false
	}
	w := e.when[ri]
	if w == nil {
		return true
	}
	ok, err := w.True(tag, m.Data)
	if err != nil {
		res.Notes = append(res.Notes, RuleNote{Rule: ri, Note: "condition failed: " + err.Error()})
		e.fileError(log, tag, rule, fmt.Errorf("%s: when: %w", rule.Options.WhenPos, err))
		return false
	}
	if !ok {
		res.Notes = append(res.Notes, RuleNote{Rule: ri, Note: "when: `" + rule.Options.When + "` is false"})
		log.Debug("rule condition false", "tag", tag, "rule", rule.Glob)
	}
	return ok
}

// key is the event's key for rule ri's gating options: its key option
// when that evaluates, else the event's minion. Rules without such an
// option get "".
func (e *Engine) key(ri int, tag string, raw []byte, d map[string]any) string {
	if !Gated(e.cfg.Rules[ri].Options) {
		return ""
	}
	key := event.MinionOf(tag, raw)
	if key == "" {
		key, _ = d["id"].(string)
	}
	if k := e.keys[ri]; k != nil {
		if kv, err := k.Key(tag, d); err == nil {
			key = kv
		}
	}
	return key
}

// Refused notes why admitted rule a does not react to the event after
// all (a caller's throttle, debounce, concurrency or collect held it); the
// caller takes a out of Admitted before Render.
func (m *Match) Refused(a Admitted, note string) {
	m.Result.Notes = append(m.Result.Notes, RuleNote{Rule: a.Index, Note: note})
}
