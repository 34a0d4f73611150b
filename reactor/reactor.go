// Package reactor runs live events through reactord's pipeline: each
// event on the ordered lane of its minion, through the gates on the event
// (multi-master copies, the audit archive, the hop limit, job returns), then
// engine.Match, then the gates on each matched rule (throttle, debounce,
// concurrency, collect), then engine.Render, then dispatch of each reaction
// through the driver behind the loop guard, with retries; last, the event
// is settled (acknowledged once handled and archived). A gate that holds an
// event for a rule resubmits it when it lets it go, and it resumes at
// render for that rule alone.
//
// Each stage says what it decided in one call, Reactor.record, with a
// Decision (its Reason, the rule, the reaction, the detail); the recorder
// (record.go) counts it, logs it, keeps it in the ledger and hands it to
// the listeners (Options.Listeners). No stage knows who listens.
//
// One stage per file: lanes.go (Submit, the lanes, Stop), event.go (the
// gates on the event), react.go (match and render), gates.go (the rule
// options that hold events, and the one way a held event comes back),
// dispatch.go, launch.go (a lane's hand-over of slow driver calls), a
// file per rule option's state (concurrency.go, collect.go, retry.go),
// record.go (the recorder), messages.go (the log
// lines outside decisions) and tasks.go (the goroutines beside the lanes,
// which Stop waits for). locks.md gives the lock order.
package reactor

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/tasks"
)

// Options configure a Reactor.
type Options struct {
	// Driver executes reactions.
	Driver actions.Driver
	// Lanes is the number of ordered worker lanes (zero: DefaultLanes).
	Lanes int
	// QueueSize bounds each lane's queue (zero: DefaultQueueSize).
	QueueSize int
	// InFlight is how many reactions' driver calls a lane may have in
	// flight (zero: DefaultInFlight, or 1 for a driver that answers at
	// once: AnswersAtOnce): a call the driver has not answered once
	// its request left (actions.Sent), or within HandOverAfter, is handed
	// over and the lane goes on with its next event (launch.go); 1 waits
	// for each call, the lane handling one reaction at a time.
	InFlight int
	// HandOverAfter is how long a lane waits for a driver call that has
	// not said its request left (actions.Sent) before it hands it over,
	// with InFlight above 1 (zero: DefaultHandOverAfter; negative: at
	// once, even before the request left, the lane beginning its next
	// reaction's call while the one before is still in flight).
	HandOverAfter time.Duration
	// Block makes Submit wait when a lane is full (JetStream: stop
	// pulling); otherwise the event is dropped and counted in Metrics.Dropped (lane_full).
	Block bool
	// Retry bounds retries of retryable driver errors.
	Retry actions.RetryStage
	// DeadLetter receives reactions that failed for good; may be nil.
	DeadLetter func(a actions.Action, err error)
	// MaxHops drops events that reactions caused more than this many times
	// in a row (zero: DefaultMaxHops).
	MaxHops int
	// Guard is the loop guard; nil creates one with defaults.
	Guard *guard.Guard
	// Archive, when set, keeps events, jobs, returns and the ledger.
	Archive *Archive
	// Log and Metrics; nil Log discards, nil Metrics creates unregistered ones.
	Log     *slog.Logger
	Metrics *Metrics
	// OnDispatch, when set, is called after each dispatched reaction (the
	// bench uses it to measure latency).
	OnDispatch func(d Delivery, a actions.Action, res actions.Result, err error)
	// OnDone, when set, is called after each event was fully handled.
	OnDone func(d Delivery)
	// Paused, when set, is asked before each event is matched: while it
	// answers true (salt-run reactor.set_leader False on the master), no
	// event is reacted to; each is counted in
	// reactord_suppressed_total{reason="not_leader"}.
	Paused func() bool
	// Copy, when set, reports whether an event is another master's copy
	// of an event already taken (multi-master, --dedupe-masters); such a
	// copy is dropped and counted in reactord_suppressed_total
	// {reason="master_copy"}. seq is the event's stream sequence. When it
	// fails, a JetStream event is left for redelivery; a core one goes on.
	Copy func(ctx context.Context, tag string, raw []byte, seq uint64) (bool, error)
	// Journal, when set, records the stream sequence of the event each
	// lane handles, and of each driver call a lane handed over (places
	// after the lanes'), so that an event the process keeps dying on is found
	// (internal/poison); Park then takes such an event instead of the
	// pipeline, and it is acknowledged.
	Journal Journal
	// Park receives a poisoned event (with the crashes it caused), to keep
	// it where an operator can look at it; it must not fail.
	Park func(dl Delivery, crashes int)
	// Listeners hear each decision the pipeline records, after its
	// metric, log line and ledger entry; a Follower among them also hears
	// each event, each engine, the ticks and the stop (shadow.Listener is
	// one).
	Listeners []Listener
}

// Journal remembers which events were in hand when the process died
// (poison.Journal).
type Journal interface {
	Begin(lane int, seq uint64)
	End(lane int, seq uint64)
	Crashes(seq uint64) (int, bool)
	Parked(seq uint64)
}

// Reactor runs the pipeline for live events: ordered per minion, parallel
// across minions, with bounded queues and a swappable configuration.
type Reactor struct {
	eng atomic.Pointer[engine.Engine]
	// jobOpts is jobOptions of eng, stored with it: read on each job
	// return.
	jobOpts atomic.Bool
	opts    Options
	lanes   []chan Delivery
	// launchers are the lanes' hand-over of slow driver calls (nil:
	// InFlight 1).
	launchers []*launcher
	seed      maphash.Seed
	wg        sync.WaitGroup

	stopped atomic.Bool
	quit    chan struct{}
	once    sync.Once
	depth   atomic.Int64

	// suspect lets one suspect of a crash be in hand at a time
	// (handleIn): a one-place token.
	suspect chan struct{}

	// ids gives each event its id, with or without an Archive.
	ids eventIDs

	// rec records the stages' decisions: metrics, log, ledger, listeners
	// (record.go).
	rec *recorder

	// left counts the events a stop abandoned, by the gate that held them.
	left abandoned

	// limits applies the rules' concurrency option, retries their retry
	// option, collects their collect option; early keeps the job returns
	// neither limits nor retries followed yet, while a rule has either.
	limits   *limits
	retries  *retries
	collects *collects
	early    *earlyReturns

	// tasks are the goroutines beside the lanes: held events let go,
	// retries; Stop waits for them (tasks.go).
	tasks tasks.Set

	// hookMatched, set by tests, runs between an event's match and its
	// gates (a reload there must not change the rules the gates apply).
	hookMatched func()
}

// abandoned counts the events a stop abandoned while a gate held them:
// left unacknowledged for redelivery (JetStream; returned) or lost (core
// NATS), by gate. Stop logs them.
type abandoned struct {
	debounceReturned, debounceLost atomic.Int64
	queuedReturned, queuedLost     atomic.Int64
	// collectLost: those JetStream redelivers are counted by collects.stop.
	collectLost atomic.Int64
}

// eventIDs makes event ids, unique per daemon run: the run's start time in
// base 36, a dash and a sequence number ("t3k9x0abc-42"). The archive
// stores events under these ids and every log line about an event carries
// its id as event_id.
type eventIDs struct {
	once   sync.Once
	prefix string
	seq    atomic.Int64
}

// next returns a new id. Lanes call it concurrently; the prefix is set
// once.
func (g *eventIDs) next() string {
	g.once.Do(func() { g.prefix = strconv.FormatInt(time.Now().UnixNano(), 36) })
	return g.prefix + "-" + strconv.FormatInt(g.seq.Add(1), 10)
}

// New returns a reactor for eng; call Start before Submit.
func New(eng *engine.Engine, opts Options) (*Reactor, error) {
	if opts.Driver == nil {
		return nil, errors.New("reactor: no driver")
	}
	if err := CheckDriver(eng, opts.Driver); err != nil {
		return nil, err
	}
	if opts.Lanes <= 0 {
		opts.Lanes = DefaultLanes
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.MaxHops <= 0 {
		opts.MaxHops = DefaultMaxHops
	}
	if opts.InFlight <= 0 {
		opts.InFlight = defaultInFlight(opts.Driver)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Guard == nil {
		opts.Guard = guard.New(guard.Options{})
	}
	opts.Retry.Driver = opts.Driver
	r := &Reactor{opts: opts, seed: maphash.MakeSeed(), quit: make(chan struct{}), suspect: make(chan struct{}, 1),
		rec: newRecorder(opts), early: &earlyReturns{}}
	r.limits = newLimits(opts.Guard.JobTimeout(), r.early, r.spawnTask)
	r.retries = newRetries(r, opts.Guard.JobTimeout(), r.early)
	r.collects = newCollects()
	r.eng.Store(eng)
	r.jobOpts.Store(jobOptions(eng))
	r.rec.configured(eng)
	r.lanes = make([]chan Delivery, opts.Lanes)
	for i := range r.lanes {
		r.lanes[i] = make(chan Delivery, opts.QueueSize)
	}
	if opts.HandOverAfter == 0 {
		opts.HandOverAfter = DefaultHandOverAfter
	}
	r.launchers = newLaunchers(opts.Lanes, opts.InFlight, opts.HandOverAfter)
	opts.Metrics.ReloadOK.Set(1)
	return r, nil
}

// CheckDriver fails when a rule's reactions could need a type the driver
// cannot run. Reaction types are only known after rendering, so this checks
// the files that do not depend on the event; others are checked at dispatch.
func CheckDriver(eng *engine.Engine, drv actions.Driver) error {
	for _, st := range []string{"local", "runner", "wheel", "caller"} {
		if drv.Supports(st) {
			continue
		}
		for _, typ := range eng.StaticTypes() {
			if typ == st || (typ == "cmd" && st == "local") {
				return fmt.Errorf("driver %s cannot run %s reactions, which the configuration uses", drv.Name(), st)
			}
		}
	}
	return nil
}

// Engine returns the current engine.
func (r *Reactor) Engine() *engine.Engine { return r.eng.Load() }

// Reload swaps in a new engine atomically; events already queued finish
// with the engine that picks them up.
func (r *Reactor) Reload(eng *engine.Engine) error {
	if err := CheckDriver(eng, r.opts.Driver); err != nil {
		r.opts.Metrics.ReloadOK.Set(0)
		return err
	}
	r.eng.Store(eng)
	r.jobOpts.Store(jobOptions(eng))
	r.rec.configured(eng)
	r.opts.Metrics.ReloadOK.Set(1)
	return nil
}

// jobOptions reports whether a rule of eng follows its jobs' returns
// (concurrency, retry).
func jobOptions(eng *engine.Engine) bool {
	for _, r := range eng.Config().Rules {
		if r.Options.Concurrency > 0 || r.Options.Retry.Attempts > 0 {
			return true
		}
	}
	return false
}
