// Package shadow compares what reactord would do with what Salt's own
// reactor did, decision by decision, while reactord runs beside it and
// dispatches nothing (`reactord shadow`).
//
// reactord's side comes as Decisions (a reaction it would run, or one it
// holds back on purpose) and Notes (a matching rule that did not react, and
// why). Salt's side comes as Jobs, read from the job events on the bus
// (salt/job/<jid>/new, salt/run/<jid>/new, salt/wheel/<jid>/new). The
// Comparer pairs them and gives each decision one Verdict.
//
// The pairing rule (docs/migration.md says it for operators):
//
//   - A runner or wheel job is Salt's reactor's when its user is "Reactor"
//     (Salt's ReactWrap.event_user); a local job carries the master's own
//     user, as a job someone started as that user on the master would, so
//     its origin cannot be proven. Jobs of any other user are never the
//     reactor's and are not paired. saltutil.find_job jobs (which Salt's
//     command line sends while it waits, and the reactor never does) are
//     not either.
//   - A job pairs with a decision of the same kind and function when the
//     master stamped the job at most Window after the decision's event and
//     at most Skew before it (both _stamps are the master's); when either
//     lacks a stamp, when reactord received them, at most Window apart
//     either way. The window stretches with Salt's reactor's lag (see
//     Comparer.Window).
//   - Same target and arguments: the pair is made at once, oldest decision
//     first, and agrees (or, for a decision held back on purpose, gets its
//     expected verdict). Same function only: the pair is made when one side
//     expires unpaired, and differs.
//   - A decision still unpaired Window+Grace after it was made is
//     reactord-only (for one held back: Salt did not run it either, an
//     agreement).
//   - A job still unpaired is salt-only when it is certainly the reactor's
//     (user Reactor), or a local job of the master's user that a note about
//     a minion it runs on accounts for; ambiguous when it is a local job of
//     the master's user nothing accounts for: someone else may have
//     started it. Either takes the reason of the closest note in its
//     window (a rule that did not react, and why); a note of a gate
//     reactord applies on purpose (throttle, debounce, collect, a forged
//     event) gives that gate's expected verdict instead. The same
//     function with other arguments, held back on purpose, differs: the
//     files differ first.
//   - A local job that started while a runner job of Salt's reactor ran
//     (between its new and ret events) is that runner's own (an
//     orchestration's) and gets no verdict, unless a gate's note (held-*)
//     accounts for it.
package shadow

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// Verdicts. Agree, Differ, ReactordOnly, SaltOnly and Ambiguous compare
// the two reactors; the Held ones are what reactord does on purpose and
// Salt's reactor does not (Salt ran a reaction reactord would hold back).
const (
	Agree        = "agree"
	Differ       = "differ"
	ReactordOnly = "reactord-only"
	SaltOnly     = "salt-only"
	Ambiguous    = "ambiguous"

	HeldLoop     = "held-loop"     // the loop guard: the event is the reaction's own consequence
	HeldHops     = "held-hops"     // the hop limit
	HeldForged   = "held-forged"   // a minion event claiming more than its sender may
	HeldThrottle = "held-throttle" // the rule's throttle
	HeldDebounce = "held-debounce" // the rule's debounce
	HeldCollect  = "held-collect"  // the rule's collect
)

// Verdicts lists every verdict, in the order reports show them.
var Verdicts = []string{Agree, Differ, ReactordOnly, SaltOnly, Ambiguous, HeldLoop, HeldHops, HeldForged, HeldThrottle, HeldDebounce, HeldCollect}

// Expected reports whether v is a verdict for what reactord does on
// purpose.
func Expected(v string) bool { return strings.HasPrefix(v, "held-") }

// Job is a job Salt's master published, as its job event shows it.
type Job struct {
	// JID is the job id.
	JID string `json:"jid"`
	// Kind is local, runner or wheel.
	Kind string `json:"kind"`
	// Fun is the function without its client's prefix (state.orchestrate,
	// not runner.state.orchestrate).
	Fun string `json:"fun"`
	// Tgt and TgtType are a local job's target.
	Tgt     any    `json:"tgt,omitempty"`
	TgtType string `json:"tgt_type,omitempty"`
	// Arg is a local job's arg, a runner or wheel job's fun_args.
	Arg []any `json:"arg"`
	// User is who published it.
	User string `json:"user"`
	// Minions are the minions a local job was sent to.
	Minions []string `json:"minions,omitempty"`
	// Stamp is the master's _stamp of the job event (zero, and left out
	// of the JSON, when it had none); Seen is when reactord received it.
	Stamp time.Time `json:"stamp,omitzero"`
	Seen  time.Time `json:"-"`
}

// ParseJob reads a job from a job event: salt/job/<jid>/new (local),
// salt/run/<jid>/new (runner) or salt/wheel/<jid>/new (wheel). It reports
// false for any other event.
func ParseJob(tag string, data map[string]any, seen time.Time) (Job, bool) {
	parts := strings.Split(tag, "/")
	if len(parts) != 4 || parts[0] != "salt" || parts[3] != "new" {
		return Job{}, false
	}
	j := Job{JID: parts[2], Seen: seen, Stamp: Stamp(data)}
	j.User, _ = data["user"].(string)
	fun, _ := data["fun"].(string)
	switch parts[1] {
	case "job":
		j.Kind, j.Fun = "local", fun
		j.Tgt = data["tgt"]
		j.TgtType, _ = data["tgt_type"].(string)
		j.Arg, _ = data["arg"].([]any)
		for _, m := range asList(data["minions"]) {
			if s, ok := m.(string); ok {
				j.Minions = append(j.Minions, s)
			}
		}
	case "run":
		j.Kind, j.Fun = "runner", strings.TrimPrefix(fun, "runner.")
		j.Arg, _ = data["fun_args"].([]any)
	case "wheel":
		j.Kind, j.Fun = "wheel", strings.TrimPrefix(fun, "wheel.")
		j.Arg, _ = data["fun_args"].([]any)
	default:
		return Job{}, false
	}
	if j.Fun == "" {
		return Job{}, false
	}
	return j, true
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// stampLayouts are the forms of Salt's _stamp (naive, the master's local
// time, microseconds) and of RFC 3339.
var stampLayouts = []string{"2006-01-02T15:04:05.999999", time.RFC3339Nano}

// Stamp returns the _stamp of an event's data, or the zero time. Salt's
// stamps carry no zone; they are read as UTC, which keeps two stamps of
// one master comparable (the only use made of them).
func Stamp(data map[string]any) time.Time {
	s, _ := data["_stamp"].(string)
	for _, l := range stampLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// Decision is a reaction reactord would run for an event, or holds back
// on purpose.
type Decision struct {
	// EventID, Tag and Minion are the event's; Stamp is its _stamp, Seen
	// when reactord received it.
	EventID string
	Tag     string
	Minion  string
	Stamp   time.Time
	Seen    time.Time
	// Rule is the rule's glob, RuleID its stable id; File and ReactionID
	// name the reaction.
	Rule       string
	RuleID     string
	File       string
	ReactionID string
	// Chunk is the reaction as reactord rendered and compiled it.
	Chunk *event.Chunk
	// Held is "" for a reaction reactord would run, else the verdict it
	// gets when Salt ran it (HeldLoop, HeldHops).
	Held string
	// Reason is why it was held, in explain's words.
	Reason string
}

// Note is a rule that matched an event and did not react, and why.
type Note struct {
	EventID string
	Tag     string
	// Minion is the minion the event is about (its tag's); Sender the id
	// in its data (the minion that sent it, which a forged event's tag
	// does not name).
	Minion string
	Sender string
	Stamp  time.Time
	Seen   time.Time
	Rule   string
	// Note says why, in explain's words ("when: `…` is false",
	// "throttle: …", "forged event: …").
	Note string
}

// held is the expected verdict a note of a gate reactord applies on
// purpose gives a job it accounts for ("" for the others).
func (n Note) held() string {
	switch {
	case strings.HasPrefix(n.Note, "forged event"):
		return HeldForged
	case strings.HasPrefix(n.Note, "throttle:"):
		return HeldThrottle
	case strings.HasPrefix(n.Note, "debounce:"):
		return HeldDebounce
	case strings.HasPrefix(n.Note, "collect:"):
		return HeldCollect
	}
	return ""
}

// Verdict is one decision's verdict: a pair, or one side alone.
type Verdict struct {
	// Verdict is one of Verdicts.
	Verdict string
	// Decision is reactord's side (nil for a job no decision accounts
	// for); Job is Salt's (nil when Salt ran nothing like it).
	Decision *Decision
	Job      *Job
	// Note, for a job a note accounts for, is that note.
	Note *Note
	// Reason says why, in explain's words.
	Reason string
}

// Rule returns the verdict's rule glob ("" when none is known).
func (v Verdict) Rule() string {
	switch {
	case v.Decision != nil:
		return v.Decision.Rule
	case v.Note != nil:
		return v.Note.Rule
	}
	return ""
}

// Record is what the audit store keeps of a verdict, as JSON in the
// ledger entry's detail (stage "shadow"); the entry's own columns hold
// the event id and tag, the rule, the file and reaction id, Salt's jid
// and the minion.
type Record struct {
	// Verdict is one of Verdicts.
	Verdict string `json:"verdict"`
	// Reason says why, in explain's words.
	Reason string `json:"reason,omitempty"`
	// EventStamp is the event's _stamp (RFC 3339), when known.
	EventStamp string `json:"event_stamp,omitempty"`
	// Chunk is reactord's rendered reaction (absent for agreements, to
	// keep them small, and when reactord rendered none).
	Chunk json.RawMessage `json:"chunk,omitempty"`
	// Salt is Salt's job (absent when Salt ran nothing like it).
	Salt *Job `json:"salt,omitempty"`
}

// Record returns what the audit store keeps of v: everything for a
// non-agreement, the verdict alone for an agreement.
func (v Verdict) Record() Record {
	r := Record{Verdict: v.Verdict}
	if v.Verdict == Agree {
		return r
	}
	r.Reason, r.Salt = v.Reason, v.Job
	if d := v.Decision; d != nil {
		if !d.Stamp.IsZero() {
			r.EventStamp = d.Stamp.Format(time.RFC3339Nano)
		}
		if d.Chunk != nil {
			r.Chunk, _ = event.AppendJSON(nil, d.Chunk)
		}
	} else if n := v.Note; n != nil && !n.Stamp.IsZero() {
		r.EventStamp = n.Stamp.Format(time.RFC3339Nano)
	}
	return r
}

// call is a decision or a job reduced to what pairing compares.
type call struct {
	kind, fun string
	// target is the canonical JSON of a local call's tgt and tgt_type.
	target string
	// args is the canonical JSON of the arguments as Salt publishes them:
	// a local job's arg (keyword arguments last, as one dict with
	// __kwarg__), a runner or wheel job's fun_args reduced to their
	// values (see values).
	args string
}

// exact is the key of an exact pairing; loose, of a pairing by function.
func (c call) exact() string { return c.kind + "\x00" + c.fun + "\x00" + c.target + "\x00" + c.args }
func (c call) loose() string { return c.kind + "\x00" + c.fun }

// callOfJob reduces a job.
func callOfJob(j *Job) call {
	c := call{kind: j.Kind, fun: j.Fun}
	if j.Kind == "local" {
		c.target = canonical([]any{j.Tgt, cmp.Or(j.TgtType, "glob")})
		c.args = canonical(j.Arg)
		return c
	}
	c.args = values(j.Arg, nil)
	return c
}

// callOfChunk reduces a decision's chunk to the job Salt would publish
// for it (actions.CallFor: Salt's ReactWrap mapping).
func callOfChunk(ch *event.Chunk) (call, error) {
	sc, err := actions.CallFor(ch)
	if err != nil {
		return call{}, err
	}
	c := call{kind: sc.Client, fun: sc.Fun}
	switch sc.Client {
	case "local":
		c.target = canonical([]any{sc.Tgt, cmp.Or(sc.TgtType, "glob")})
		arg := append([]any(nil), sc.Arg...)
		if sc.Kwarg != nil && sc.Kwarg.Len() > 0 {
			kw := map[string]any{"__kwarg__": true}
			for i := 0; i < sc.Kwarg.Len(); i++ {
				k, v := sc.Kwarg.At(i)
				kw[k] = v
			}
			arg = append(arg, kw)
		}
		c.args = canonical(arg)
	case "runner", "wheel":
		kw := map[string]any{}
		if sc.Kwarg != nil {
			for i := 0; i < sc.Kwarg.Len(); i++ {
				k, v := sc.Kwarg.At(i)
				kw[k] = v
			}
		}
		c.args = values(sc.Arg, kw)
	default:
		c.args = canonical(sc.Arg)
	}
	return c, nil
}

// values reduces runner or wheel arguments to the sorted canonical values
// of their positional and keyword arguments, their names left out: Salt's
// reactor hands a runner's or a wheel's keyword arguments to the function
// and publishes them as the function's signature places them (a wheel's
// key.accept match= comes out as its first positional argument, with the
// defaults of the others after it), which reactord cannot know without
// Salt's functions. A mapping among the positional arguments counts as
// keyword arguments on both sides (Salt publishes the keyword arguments as
// the last mapping of fun_args, where a positional mapping looks the same).
// Keyword arguments Salt filled in with the function's defaults (false,
// none, empty) are left out of both sides.
func values(arg []any, kw map[string]any) string {
	var vs []string
	add := func(v any) {
		switch x := v.(type) {
		case nil:
			return
		case bool:
			if !x {
				return
			}
		case string:
			if x == "" {
				return
			}
		case []any:
			if len(x) == 0 {
				return
			}
		case map[string]any:
			if len(x) == 0 {
				return
			}
		case *event.Map:
			if x.Len() == 0 {
				return
			}
		}
		vs = append(vs, canonical(v))
	}
	for _, a := range arg {
		switch m := a.(type) {
		case map[string]any: // a job's
			for k, v := range m {
				if k != "__kwarg__" {
					add(v)
				}
			}
		case *event.Map: // a chunk's: a mapping the reaction passes positionally
			for i := 0; i < m.Len(); i++ {
				if k, v := m.At(i); k != "__kwarg__" {
					add(v)
				}
			}
		default:
			add(a)
		}
	}
	for _, v := range kw {
		add(v)
	}
	slices.Sort(vs)
	return strings.Join(vs, "\x00")
}

// canonical is v as JSON with map keys sorted, whatever its Go types
// (event.Map, map[string]any, numbers of any width).
func canonical(v any) string {
	b, err := event.AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var x any
	if json.Unmarshal(b, &x) != nil {
		return string(b)
	}
	out, _ := json.Marshal(x)
	return string(out)
}
