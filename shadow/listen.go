package shadow

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/store"
)

// Log messages of shadow mode (docs/operating.md).
const (
	msgOverflow = "shadow: too many unpaired items; the oldest decided early"
	fixOverflow = "the pairing window is too long for the traffic: shorten --shadow-window"
	msgVerdict  = "shadow: verdict"
	msgChildren = "shadow: local jobs of Salt's reactor's runners got no verdict"
	msgAbandon  = "shadow: stopping with decisions and jobs still within their pairing window"
)

// Ledger keeps a ledger entry (reactor.Archive).
type Ledger interface {
	Ledger(e store.LedgerEntry)
}

// ListenerOptions configure a Listener.
type ListenerOptions struct {
	// Options configure the Comparer; its Adopt, Verdict, Child and
	// Overflow are the Listener's.
	Options
	// Guard follows the jobs of Salt's reactor the Listener adopts.
	Guard *guard.Guard
	// Log takes the verdicts' lines (nil discards); Ledger, when set,
	// keeps each verdict (stage shadow).
	Log    *slog.Logger
	Ledger Ledger
	// Verdicts counts the verdicts by verdict (reactord_shadow_total) and
	// RunnerJobs the jobs of runners (reactord_shadow_runner_jobs_total);
	// nil: not counted.
	Verdicts   *prometheus.CounterVec
	RunnerJobs prometheus.Counter
}

// Listener is shadow mode in the reactor (reactor.Follower): it hands the
// Comparer each reaction the pipeline would run or holds back, each rule
// that matched and did not react, and each job Salt's master publishes;
// each verdict is counted, logged (one line per verdict and rule a
// minute) and kept in the ledger (stage shadow).
type Listener struct {
	c     *Comparer
	o     ListenerOptions
	limit *ratelog.Keyed
}

var _ reactor.Follower = (*Listener)(nil)

// NewListener returns shadow mode's listener, to add to
// reactor.Options.Listeners.
func NewListener(o ListenerOptions) *Listener {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{o: o, limit: ratelog.NewKeyed(time.Minute, 1024)}
	co := o.Options
	co.Adopt, co.Verdict = l.adopt, l.verdict
	co.Child = func(*Job) {
		if o.RunnerJobs != nil {
			o.RunnerJobs.Inc()
		}
	}
	co.Overflow = func(what string) {
		l.limit.Log(o.Log, slog.LevelWarn, what, msgOverflow, "what", what, "max", cmp.Or(co.MaxPending, DefaultMaxPending), "fix", fixOverflow)
	}
	l.c = New(co)
	if o.Verdicts != nil {
		for _, v := range Verdicts {
			o.Verdicts.WithLabelValues(v) // exported at 0 before the first
		}
	}
	return l
}

// Decided hands the comparer a reaction the pipeline would run or holds
// back (hop limit, loop guard), a rule that matched and did not react,
// and a reaction file that failed.
func (l *Listener) Decided(d reactor.Decision) {
	e := d.Event
	switch {
	case d.Chunk != nil && d.Reason == reactor.Dispatched:
		l.decided(d, "")
	case d.Chunk != nil && d.Reason == reactor.HopLimit:
		l.decided(d, HeldHops)
	case d.Chunk != nil && strings.HasPrefix(string(d.Reason), string(reactor.LoopGuard)):
		l.decided(d, HeldLoop)
	case d.Rule == "":
	case d.Stage == store.StageSuppressed && d.Chunk == nil, d.Reason == reactor.FileFailed:
		note := d.Detail
		if d.Reason == reactor.FileFailed {
			note = "file failed: " + d.Detail
		}
		sender, _ := e.Data["id"].(string)
		l.c.Noted(Note{EventID: e.ID, Tag: e.Tag, Minion: e.Minion, Sender: sender, Stamp: Stamp(e.Data), Seen: e.Received, Rule: d.Rule, Note: note})
	}
}

// decided hands the comparer one reaction (held "": run).
func (l *Listener) decided(d reactor.Decision, held string) {
	e := d.Event
	reason := d.Detail
	if held == "" {
		reason = ""
	}
	l.c.Decided(Decision{EventID: e.ID, Tag: e.Tag, Minion: e.Minion, Stamp: Stamp(e.Data), Seen: e.Received,
		Rule: d.Rule, RuleID: d.RuleID, File: d.File, ReactionID: d.Chunk.Str("__id__"), Chunk: d.Chunk, Held: held, Reason: reason})
}

// Event hands the comparer a job event, and a runner's return.
func (l *Listener) Event(e reactor.Event) {
	if rest, ok := strings.CutPrefix(e.Tag, "salt/run/"); ok && strings.HasSuffix(rest, "/ret") {
		l.c.RunnerDone(strings.TrimSuffix(rest, "/ret"), e.Received)
		return
	}
	if !strings.HasSuffix(e.Tag, "/new") {
		return
	}
	data, err := event.DecodeData(e.Raw)
	if err != nil {
		return
	}
	if j, ok := ParseJob(e.Tag, data, e.Received); ok {
		l.c.Job(j)
	}
}

// Configured sets how long a job waits for its decision: the longest a
// rule option of eng holds an event before it reacts (debounce, collect).
func (l *Listener) Configured(eng *engine.Engine) {
	var h time.Duration
	for _, r := range eng.Config().Rules {
		h = max(h, r.Options.Debounce, r.Options.Collect.Within)
	}
	l.c.SetHold(h)
}

// Tick decides what waited long enough.
func (l *Listener) Tick(now time.Time) { l.c.Expire(now) }

// Stop leaves what the comparer still waits for undecided, saying how
// much.
func (l *Listener) Stop() {
	if n := l.c.Children(); n > 0 {
		l.o.Log.Info(msgChildren, "jobs", n, "detail", "an orchestration's own jobs")
	}
	if nd, nj := l.c.Abandon(); nd+nj > 0 {
		l.o.Log.Info(msgAbandon, "decisions", nd, "jobs", nj, "window", l.c.Window().String(), "detail", "they get no verdict")
	}
}

// adopt takes a job Salt's reactor started for a reaction reactord would
// run as that reaction's own: the loop guard follows it as it follows the
// jobs reactord starts, so that its consequences are held back.
func (l *Listener) adopt(dc *Decision, j *Job) {
	if l.o.Guard == nil {
		return
	}
	targets := j.Minions
	if len(targets) == 0 && dc.Minion != "" {
		targets = []string{dc.Minion}
	}
	l.o.Guard.Started(dc.EventID, guard.Reaction{Rule: dc.RuleID, ID: dc.ReactionID}, j.JID, targets, time.Now())
}

// verdict counts, logs and records one verdict.
func (l *Listener) verdict(v Verdict) {
	if l.o.Verdicts != nil {
		l.o.Verdicts.WithLabelValues(v.Verdict).Inc()
	}
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
	if v.Verdict != Agree {
		level := slog.LevelWarn
		if Expected(v.Verdict) {
			level = slog.LevelInfo
		}
		l.limit.Log(l.o.Log, level, v.Verdict+"\x00"+rule, msgVerdict,
			"verdict", v.Verdict, "rule", rule, "event_id", e.EventID, "tag", e.Tag, "jid", e.JID, "reason", v.Reason,
			"detail", "one line per verdict and rule a minute; each one is in reactord shadow report")
	}
	if l.o.Ledger == nil {
		return
	}
	detail, err := json.Marshal(v.Record())
	if err != nil {
		detail = []byte(`{"verdict":"` + v.Verdict + `"}`)
	}
	e.Detail = string(detail)
	l.o.Ledger.Ledger(e)
}

// jobTag is the tag of a job's event.
func jobTag(j *Job) string {
	switch j.Kind {
	case "runner":
		return "salt/run/" + j.JID + "/new"
	case "wheel":
		return "salt/wheel/" + j.JID + "/new"
	}
	return "salt/job/" + j.JID + "/new"
}
