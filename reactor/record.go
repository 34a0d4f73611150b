package reactor

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/store"
)

// Reason is what a stage decided. Each one has its metric, its log line
// and its ledger stage (specOf, below); a stage records a decision in one
// call (Reactor.record) and the recorder does the rest.
type Reason string

// Reasons a stage records. Those that are also a reason label of
// reactord_suppressed_total are that label.
const (
	// Dispatched: the driver started a reaction (Decision.JID its job).
	Dispatched Reason = "dispatched"
	// Retried: the retry option ran a reaction again on the minions where
	// its job failed.
	Retried Reason = "retried"
	// Failed: the driver could not run a reaction (Decision.Err).
	Failed Reason = "failed"
	// RetryGaveUp: a reaction still failed on minions after its last retry.
	RetryGaveUp Reason = "gave_up"
	// HopLimit: a reaction its own event fired too many times in a row
	// was held back (with a Chunk), or an event reactions caused too many
	// times in a row was suppressed (without).
	HopLimit Reason = "hop_limit"
	// LoopGuard prefixes the reason of a reaction the loop guard held
	// back: loop_guard_<evidence> (guard.Hold's Evidence).
	LoopGuard Reason = "loop_guard_"
	// Returned: a job of a reaction returned on a minion; the loop guard
	// holds the reaction from the minion's beacons for its settle window.
	Returned Reason = "returned"
	// Timeout: a minion did not return a reaction's job within the job
	// timeout.
	Timeout Reason = "timeout"
	// Throttle, Debounce, Concurrency, Collected and CollectFull: a rule's
	// option held the event back from the rule (Decision.Detail says how,
	// in explain's words; Decision.Key is the rule's key).
	Throttle    Reason = "throttle"
	Debounce    Reason = "debounce"
	Concurrency Reason = "concurrency"
	Collected   Reason = "collect"
	CollectFull Reason = "collect_full"
	// Noted: a rule matched the event and did not react (Detail says why).
	Noted Reason = "noted"
	// FileFailed: a reaction file of a rule failed to render (Decision.File,
	// Detail the error); VerifyFailed: verify_high discarded the event's
	// reactions.
	FileFailed   Reason = "file_failed"
	VerifyFailed Reason = "verify_failed"
	// RuleRemoved: an event a gate held was let go after a reload removed
	// its rule, or changed its glob; it is dropped.
	RuleRemoved Reason = "rule_removed"
	// MasterCopy: the event is another master's copy of an event already
	// taken (Options.Copy); it is dropped.
	MasterCopy Reason = "master_copy"
	// Parked: the daemon died while handling the event too many times
	// (Options.Journal); it is parked.
	Parked Reason = "parked"
	// Malformed: Submit dropped an event that is not a JSON envelope with
	// a tag, or not valid UTF-8.
	Malformed Reason = "malformed"
	// LaneFull: Submit dropped an event, its lane's queue full (core NATS
	// mode).
	LaneFull Reason = DropLaneFull
	// PartitionMoved: the event's partition moved to another replica
	// before it was handled; that one handles it.
	PartitionMoved Reason = SuppressPartitionMoved
	// StoreFull: the audit store is full; the event is left for
	// redelivery (JetStream). ArchiveDropped: the same in core NATS mode,
	// where the event is reacted to but not archived.
	StoreFull      Reason = "store_full"
	ArchiveDropped Reason = "archive_dropped"
)

// Event is the identity of the event a decision is about.
type Event struct {
	ID     string
	Tag    string
	Minion string
	// Received is when the reactor took the event; Hop how many reactions
	// in a row caused it, the last one's event tag being Cause.
	Received time.Time
	Hop      int
	Cause    string
	// Raw is the event's data as received; Data is it decoded, once the
	// event was matched (nil before). Neither may be changed.
	Raw  []byte
	Data map[string]any
}

// Decision is what one stage decided about an event, one of its rules or
// one of its reactions, recorded once: the recorder counts it, logs it
// (at most once a minute for those that can repeat once per event),
// keeps it in the ledger and hands it to the listeners.
type Decision struct {
	// Stage is the ledger stage of Reason (store.StageDispatched, …; ""
	// when the ledger keeps nothing of it). The recorder fills it in.
	Stage string
	// Reason is what was decided.
	Reason Reason
	// Rule is the rule's glob and RuleID its stable id, when a rule
	// decided or the reaction is known to be one's.
	Rule   string
	RuleID string
	// Chunk is the reaction (a low chunk), when the decision is about one;
	// File is its reaction file (a file that failed, without a Chunk).
	Chunk *event.Chunk
	File  string
	// ReactionID is the reaction's id when there is no Chunk (a job
	// timeout); with one, the Chunk's.
	ReactionID string
	// JID is the job; Minion the minions the decision is about, comma
	// separated ("" for the event's own).
	JID    string
	Minion string
	// Key is the rule's key (the rule options' decisions).
	Key string
	// Detail says what was decided, in explain's words (the ledger's
	// detail); Err is the error of a failure.
	Detail string
	Err    error
	// Attrs are more attributes for the log line (key, value, …).
	Attrs []any
	// Event is the event's identity.
	Event Event
}

// reactionID is the id of the decision's reaction ("" without one).
func (d *Decision) reactionID() string {
	if d.Chunk == nil {
		return d.ReactionID
	}
	return d.Chunk.Str("__id__")
}

// Listener hears each decision after the recorder counted, logged and
// kept it (Options.Listeners). It is called on the goroutine that decided
// (a lane, a task beside it) and must not block.
type Listener interface {
	Decided(d Decision)
}

// Follower is a Listener that also follows the reactor's life: Event
// hears each event as it comes (before its decisions; an event a gate
// held and let go comes once), Configured each engine (at New and each
// Reload), Tick each second, Stop once the lanes and tasks are done.
type Follower interface {
	Listener
	Event(e Event)
	Configured(eng *engine.Engine)
	Tick(now time.Time)
	Stop()
}

// spec is how the recorder records one reason: its ledger stage, whether
// it counts in reactord_suppressed_total, and its log line (none when msg
// is empty; limited to one a minute per key when limit is set).
type spec struct {
	stage      string
	suppressed bool
	level      slog.Level
	msg, fix   string
	limit      func(d *Decision) string
}

// perReaction limits a line to one a minute per reaction file and id.
func perReaction(d *Decision) string { return d.File + "\x00" + d.reactionID() }

// perRuleKey limits a line to one a minute per rule and key.
func perRuleKey(d *Decision) string { return d.RuleID + "\x00" + d.Key }

// specOf is how the recorder records a decision, by its reason: those
// about a reaction or a rule here, those about an event in eventSpec.
// Dispatched logs at the driver's level (recorder.dispatchLevel).
func specOf(d *Decision) spec {
	if strings.HasPrefix(string(d.Reason), string(LoopGuard)) { // loop_guard_<evidence>
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelInfo, msg: "reaction held back by the loop guard",
			fix: "none: the event is the reaction's own consequence; a rule's guard option changes what counts",
			limit: func(d *Decision) string {
				return d.RuleID + "\x00" + d.reactionID() + "\x00" + d.Event.Minion + "\x00" + string(d.Reason)
			}}
	}
	switch d.Reason {
	case Dispatched:
		return spec{stage: store.StageDispatched, msg: "reaction dispatched"}
	case Retried:
		return spec{stage: store.StageDispatched}
	case Failed:
		return spec{stage: store.StageFailed, level: slog.LevelError, msg: "reaction failed",
			fix:   "see err; the reaction is dead-lettered once its retries are spent",
			limit: func(d *Decision) string { return perReaction(d) + "\x00failed" }}
	case RetryGaveUp:
		return spec{stage: store.StageFailed, level: slog.LevelWarn, msg: "reaction failed on minions after its last retry; giving up",
			fix: "look at the job's returns on those minions (reactord trace)"}
	case HopLimit:
		if d.Chunk == nil {
			return eventSpec(d)
		}
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelWarn, msg: "reaction held back: hop limit reached",
			fix:   "a reaction's event fires it again in a loop: narrow the rule's glob or when; --max-hops bounds it",
			limit: perReaction}
	case Timeout:
		return spec{stage: store.StageTimeout, level: slog.LevelWarn, msg: "loop guard: minion did not return within the job timeout",
			fix: "check the minion is up (salt-run manage.status); --job-timeout sets the wait"}
	case Throttle:
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelWarn, msg: "reaction suppressed by throttle",
			fix: "more events than the rule's throttle allows; raise it if they are wanted", limit: func(d *Decision) string { return d.Rule }}
	case Debounce:
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelInfo, msg: "event held by debounce"}
	case Concurrency:
		return spec{stage: store.StageSuppressed, level: slog.LevelInfo, msg: "event queued: the rule's concurrency limit is reached for its key",
			limit: perRuleKey}
	case CollectFull:
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelWarn, msg: "event left out of a full collection",
			fix: "more events than the rule's collect max within its window; raise max", limit: perRuleKey}
	case Collected, Noted:
		return spec{stage: store.StageSuppressed}
	case FileFailed, VerifyFailed:
		return spec{stage: store.StageFailed}
	case RuleRemoved:
		return spec{suppressed: true, level: slog.LevelWarn, msg: "held event dropped: its rule was removed or no longer matches",
			fix: "none: a reload removed the rule, or changed its glob, while a gate held the event", limit: func(d *Decision) string { return d.RuleID }}
	}
	return eventSpec(d)
}

// eventSpec is specOf for the decisions about an event as a whole.
func eventSpec(d *Decision) spec {
	switch d.Reason {
	case HopLimit:
		return spec{stage: store.StageSuppressed, suppressed: true, level: slog.LevelWarn, msg: "event suppressed: hop limit reached",
			fix:   "a reaction's event caused too many reactions in a row: see cause; --max-hops bounds it",
			limit: func(d *Decision) string { return d.Event.Cause }}
	case Returned:
		return spec{stage: store.StageReturned, level: slog.LevelInfo, msg: "loop guard: job returned; its reaction held back for the settle window"}
	case MasterCopy:
		return spec{suppressed: true, level: slog.LevelInfo, msg: "event dropped: another master's copy of an event already taken", limit: once}
	case Parked:
		return spec{stage: store.StageFailed, level: slog.LevelError, msg: "event parked: the daemon died while handling it",
			fix: "find the event in the parked subject and the ledger, and report it: it crashes reactord"}
	case Malformed:
		return spec{level: slog.LevelWarn, msg: "malformed event dropped", limit: once,
			fix: "the publisher sent an event that is not a JSON envelope with a tag, or not valid UTF-8"}
	case LaneFull:
		return spec{level: slog.LevelError, msg: "lane queue full: event dropped", limit: once,
			fix: "core NATS mode has no redelivery: use --jetstream, or raise --queue or --workers"}
	case PartitionMoved:
		return spec{suppressed: true, level: slog.LevelWarn, msg: "event left to the replica its partition moved to", limit: once,
			fix: "none: the partition's new owner handles it"}
	case StoreFull:
		return spec{level: slog.LevelWarn, msg: "audit store full: event left for redelivery", limit: once, fix: fixStoreFull}
	case ArchiveDropped:
		return spec{level: slog.LevelError, msg: "audit store full: event reacted to but not archived", limit: once, fix: fixStoreFull}
	}
	return spec{}
}

// once limits a line to one a minute.
func once(*Decision) string { return "" }

// fixStoreFull is the fix of the lines of a full audit store.
const fixStoreFull = "the database is down or slow and the disk spool is full: see reactord_store_up"

// recorder turns decisions into the metrics, the log, the ledger and the
// listeners' calls; it also keeps the reactor's other rate-limited lines.
type recorder struct {
	log     *slog.Logger
	metrics *Metrics
	archive *Archive
	// driver is the driver's name, dispatchLevel the level of a dispatch's
	// line (debug with an Archive: the ledger keeps each one, and the log
	// gets a count a minute, summary).
	driver        string
	dispatchLevel slog.Level
	listeners     []Listener
	followers     []Follower
	// limit keeps the lines that could repeat once per event to one a
	// minute per key.
	limit *ratelog.Keyed
	// dispatched counts the reactions dispatched since the last summary.
	dispatched atomic.Int64
}

// newRecorder returns the recorder of a reactor of o (its defaults set).
func newRecorder(o Options) *recorder {
	rec := &recorder{log: o.Log, metrics: o.Metrics, archive: o.Archive, driver: o.Driver.Name(), dispatchLevel: actions.DispatchLevel(o.Driver),
		listeners: o.Listeners, limit: ratelog.NewKeyed(time.Minute, 1024)}
	if o.Archive != nil {
		rec.dispatchLevel = slog.LevelDebug
	}
	for _, l := range o.Listeners {
		if f, ok := l.(Follower); ok {
			rec.followers = append(rec.followers, f)
		}
	}
	return rec
}

// record records a decision about ev (nil: no event in hand), whose
// identity it fills in.
func (r *Reactor) record(ev *inflight, d Decision) {
	if ev != nil {
		d.Event = ev.identity()
		if d.Minion == "" {
			d.Minion = ev.minion
		}
	}
	if r.rec.record(&d) && ev != nil {
		ev.ledgered.Store(true)
	}
}

// identity is what a decision says of the event.
func (ev *inflight) identity() Event {
	return Event{ID: ev.id, Tag: ev.tag, Minion: ev.minion, Received: ev.received, Hop: ev.dl.Hop, Cause: ev.cause, Raw: ev.raw, Data: ev.data}
}

// record counts, logs, keeps and hands on one decision; it reports
// whether the ledger has an entry of it.
func (rec *recorder) record(d *Decision) bool {
	sp := specOf(d)
	d.Stage = sp.stage
	if d.File == "" && d.Chunk != nil {
		d.File = d.Chunk.Str("__sls__")
	}
	rec.count(d, sp)
	if sp.msg != "" {
		rec.logLine(d, sp)
	}
	kept := rec.ledger(d)
	for _, l := range rec.listeners {
		l.Decided(*d)
	}
	return kept
}

// count updates the decision's metric.
func (rec *recorder) count(d *Decision, sp spec) {
	m := rec.metrics
	switch {
	case sp.suppressed:
		m.Suppressed.WithLabelValues(string(d.Reason)).Inc()
	case d.Reason == Dispatched:
		m.Actions.WithLabelValues(rec.driver, "dispatched").Inc()
		rec.dispatched.Add(1)
	case d.Reason == Failed:
		m.Actions.WithLabelValues(rec.driver, "failed").Inc()
	case d.Reason == RetryGaveUp:
		m.Retries.WithLabelValues("gave_up").Inc()
	case d.Reason == FileFailed, d.Reason == VerifyFailed:
		m.RenderErrors.Inc()
	case d.Reason == Parked:
		m.Parked.Inc()
	case d.Reason == Malformed:
		m.Malformed.Inc()
	case d.Reason == LaneFull:
		m.Dropped.WithLabelValues(DropLaneFull).Inc()
	case d.Reason == ArchiveDropped:
		m.ArchiveDropped.Inc()
	}
}

// logLine logs the decision's line, at most once a minute per key when
// its spec limits it.
func (rec *recorder) logLine(d *Decision, sp spec) {
	level := sp.level
	if d.Reason == Dispatched {
		level = rec.dispatchLevel
	}
	if !rec.log.Enabled(context.Background(), level) {
		return
	}
	args := make([]any, 0, 24+len(d.Attrs))
	for _, a := range [...]struct{ k, v string }{{"event_id", d.Event.ID}, {"tag", d.Event.Tag}, {"rule", d.Rule}, {"rule_id", d.RuleID}, {"file", d.File},
		{"id", d.reactionID()}, {"jid", d.JID}, {"minion", d.Minion}, {"key", d.Key}, {"detail", d.Detail}} {
		if a.v != "" {
			args = append(args, a.k, a.v)
		}
	}
	if d.Reason == Dispatched || d.Reason == Failed {
		args = append(args, "driver", rec.driver)
	}
	if d.Err != nil {
		args = append(args, "err", d.Err)
	}
	args = append(args, d.Attrs...)
	if sp.fix != "" {
		args = append(args, "fix", sp.fix)
	}
	if sp.limit == nil {
		rec.log.Log(context.Background(), level, sp.msg, args...)
		return
	}
	rec.limit.Log(rec.log, level, sp.limit(d), sp.msg, args...)
}

// ledger keeps the decision's ledger entry, when its reason has a stage
// and there is an Archive.
func (rec *recorder) ledger(d *Decision) bool {
	if d.Stage == "" || rec.archive == nil {
		return false
	}
	rec.archive.Ledger(store.LedgerEntry{EventID: d.Event.ID, Tag: d.Event.Tag, Stage: d.Stage, Rule: d.Rule, File: d.File,
		ReactionID: d.reactionID(), JID: d.JID, Minion: d.Minion, Detail: d.Detail})
	return true
}

// noisy logs a line that could repeat once per event, outside decisions:
// the first for its message and key at once, then at most one a minute
// carrying how many it stands for.
func (rec *recorder) noisy(level slog.Level, key, msg string, args ...any) {
	rec.limit.Log(rec.log, level, key, msg, args...)
}

// event hands an event as it comes to the followers.
func (rec *recorder) event(ev *inflight) {
	if len(rec.followers) == 0 {
		return
	}
	e := ev.identity()
	for _, f := range rec.followers {
		f.Event(e)
	}
}

// configured hands the followers a new engine.
func (rec *recorder) configured(eng *engine.Engine) {
	for _, f := range rec.followers {
		f.Configured(eng)
	}
}

// tick hands the followers the time, each second.
func (rec *recorder) tick(now time.Time) {
	for _, f := range rec.followers {
		f.Tick(now)
	}
}

// stop tells the followers the reactor stopped.
func (rec *recorder) stop() {
	for _, f := range rec.followers {
		f.Stop()
	}
}
