package reactor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/store"
)

// Delivery is one event handed to the daemon by a source.
type Delivery struct {
	// Body is the envelope JSON {"tag", "data"}.
	Body []byte
	// Received is when the source got it (for latency).
	Received time.Time
	// Sent is when the publisher sent it, when known (for latency).
	Sent time.Time
	// Hop is the number of reactions that led to this event.
	Hop int
	// OnlyRule, when set, processes only the rule of that ID (a debounced
	// event coming back; a reload that removed the rule drops it, logged).
	OnlyRule string
	// Seq is the event's JetStream stream sequence (0 in core mode): it
	// tells a redelivery from another master's copy (Options.Copy).
	Seq uint64
	// MsgID is the publisher's message id for the event (Nats-Msg-Id),
	// when it gave one; each reaction's actions.Action.Key derives from
	// it.
	MsgID string

	// Settle ends the delivery. The reactor calls it exactly once for
	// each delivery Submit was given, refused ones too: Ack once the
	// event's reactions were dispatched or deliberately dropped and, with
	// an Archive, its archive records are durable (written, or in the
	// store's disk spool), so a crash loses no record of an acknowledged
	// event; Retry when it could not be handled now; Leave when it is no
	// longer this replica's. nil: nothing to settle.
	Settle func(Outcome)
	// Redelivers is set when a Retry brings the event back (JetStream).
	// The reactor then leaves an event it cannot handle now (the store
	// full, a copy check failing) for later; without it (core NATS) it
	// goes on, as nothing would bring the event back.
	Redelivers bool
	// Owned, when set, reports whether the event is still this replica's
	// (--partitions: its partition may move to another replica while the
	// event waits in its lane). An event no longer owned is not handled
	// here, so that it never runs alongside the new owner, which handles
	// it again from its acknowledgement floor; it is counted in
	// reactord_suppressed_total{reason="partition_moved"} and settled
	// with Leave.
	Owned func() bool

	// id is the event's id, given by Submit.
	id string
	// collected are the events a rule's collect option gathered, for
	// the rule (OnlyRule) to react to once.
	collected []any
	// tag and raw are the envelope, split by Submit (once per event);
	// split is set once they are; minion is the event's minion
	// (event.MinionOf), found then too.
	tag    string
	raw    []byte
	split  bool
	minion string
}

// Outcome is how a delivery ends (Delivery.Settle).
type Outcome uint8

const (
	// Ack acknowledges the event: it was handled.
	Ack Outcome = iota + 1
	// Retry asks for the event again later (JetStream redelivers it; core
	// NATS cannot).
	Retry
	// Leave neither acknowledges nor refuses the event: another replica
	// owns it now.
	Leave
)

// settle ends the delivery with o, when it has something to settle.
func (dl *Delivery) settle(o Outcome) {
	if dl.Settle != nil {
		dl.Settle(o)
	}
}

// Options configure a Reactor.
type Options struct {
	// Driver executes reactions.
	Driver actions.Driver
	// Lanes is the number of ordered worker lanes (zero: DefaultLanes).
	Lanes int
	// QueueSize bounds each lane's queue (zero: DefaultQueueSize).
	QueueSize int
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
	// Copy, when set, reports whether an event is another master's copy
	// of an event already taken (multi-master, --dedupe-masters); such a
	// copy is dropped and counted in reactord_suppressed_total
	// {reason="master_copy"}. seq is the event's stream sequence. When it
	// fails, a JetStream event is left for redelivery; a core one goes on.
	Copy func(ctx context.Context, tag string, raw []byte, seq uint64) (bool, error)
	// Journal, when set, records the stream sequence of the event each
	// lane handles, so that an event the process keeps dying on is found
	// (internal/poison); Park then takes such an event instead of the
	// pipeline, and it is acknowledged.
	Journal Journal
	// Park receives a poisoned event (with the crashes it caused), to keep
	// it where an operator can look at it; it must not fail.
	Park func(dl Delivery, crashes int)
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
	seed    maphash.Seed
	wg      sync.WaitGroup

	stopped atomic.Bool
	quit    chan struct{}
	once    sync.Once
	depth   atomic.Int64

	// suspectMu lets one suspect of a crash be in hand at a time
	// (handleIn).
	suspectMu sync.Mutex

	// ids gives each event its id, with or without an Archive.
	ids eventIDs

	// Lines that can repeat once per event go out once per interval.
	overflowLog, storeFullLog, malformedLog, movedLog *ratelog.Every
	// limit keeps other lines that could repeat once per event (a
	// reaction that keeps failing, a throttle) to one a minute per key.
	limit *ratelog.Keyed

	// dispatched counts the reactions dispatched since the last summary
	// line (with an Archive, single dispatches are debug lines).
	dispatched atomic.Int64

	// debounceReturned and debounceLost count debounced events a stop
	// abandoned: left unacknowledged for redelivery (JetStream) or lost
	// (core NATS).
	debounceReturned, debounceLost atomic.Int64
	// limits applies the rules' concurrency option; queuedReturned and
	// queuedLost count, at a stop, the events it still queued.
	limits                     *limits
	queuedReturned, queuedLost atomic.Int64
	// collectLost counts, at a stop in core NATS mode, the events a
	// collect option gathered (dropped: nothing redelivers them).
	collectLost atomic.Int64
	// retries applies the rules' retry option.
	retries *retries
	// early keeps the job returns neither limits nor retries followed
	// yet, while a rule has either option.
	early *earlyReturns
	// collects applies the rules' collect option.
	collects *collects
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

// New returns a daemon for eng; call Start before Submit.
func New(eng *engine.Engine, opts Options) (*Reactor, error) {
	if opts.Driver == nil {
		return nil, errors.New("daemon: no driver")
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
	d := &Reactor{opts: opts, seed: maphash.MakeSeed(), quit: make(chan struct{}),
		overflowLog: ratelog.New(time.Minute), storeFullLog: ratelog.New(time.Minute), malformedLog: ratelog.New(time.Minute),
		movedLog: ratelog.New(time.Minute), limit: ratelog.NewKeyed(time.Minute, 1024), early: &earlyReturns{}}
	d.limits = newLimits(opts.Guard.JobTimeout(), d.early)
	d.retries = newRetries(d, opts.Guard.JobTimeout(), d.early)
	d.collects = newCollects()
	d.eng.Store(eng)
	d.jobOpts.Store(jobOptions(eng))
	d.lanes = make([]chan Delivery, opts.Lanes)
	for i := range d.lanes {
		d.lanes[i] = make(chan Delivery, opts.QueueSize)
	}
	opts.Metrics.ReloadOK.Set(1)
	return d, nil
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
func (d *Reactor) Engine() *engine.Engine { return d.eng.Load() }

// Reload swaps in a new engine atomically; events already queued finish
// with the engine that picks them up.
func (d *Reactor) Reload(eng *engine.Engine) error {
	if err := CheckDriver(eng, d.opts.Driver); err != nil {
		d.opts.Metrics.ReloadOK.Set(0)
		return err
	}
	d.eng.Store(eng)
	d.jobOpts.Store(jobOptions(eng))
	d.opts.Metrics.ReloadOK.Set(1)
	return nil
}

// Start runs one goroutine per lane until Stop, and a ticker that records
// jobs whose minions did not return within the job timeout.
func (d *Reactor) Start(ctx context.Context) {
	d.opts.Guard.FollowReturns(func(jid, minion string, o guard.Outcome, at time.Time) {
		if d.jobOpts.Load() {
			d.jobReturned(ctx, jid, minion, o == guard.OutcomeFailed, at)
		}
	})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		summary := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.quit:
				return
			case now := <-t.C:
				if d.opts.Archive != nil && now.Sub(summary) >= time.Minute {
					summary = now
					if n := d.dispatched.Swap(0); n > 0 {
						d.opts.Log.Info("reactions dispatched in the last minute (each one is in the ledger: reactord trace; -v logs each)", "reactions", n)
					}
				}
				d.retries.expire(ctx, now)
				d.limits.expire(now)
				for _, x := range d.opts.Guard.TakeExpired(now) {
					d.opts.Log.Warn("loop guard: minion did not return within the job timeout", "event_id", x.EventID, "jid", x.JID, "minion", x.Minion, "id", x.ID, "rule_id", x.Rule)
					d.opts.Archive.ledger(store.LedgerEntry{Stage: store.StageTimeout, ReactionID: x.ID, JID: x.JID, Minion: x.Minion,
						Detail: "minion did not return within the job timeout (rule " + x.Rule + ")"})
				}
			}
		}
	}()
	for lane, ch := range d.lanes {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				select {
				case dl := <-ch:
					d.opts.Metrics.QueueDepth.Set(float64(d.depth.Add(-1)))
					d.handleIn(ctx, lane, dl)
				case <-d.quit:
					// Drain what was queued before the stop.
					for {
						select {
						case dl := <-ch:
							d.opts.Metrics.QueueDepth.Set(float64(d.depth.Add(-1)))
							d.handleIn(ctx, lane, dl)
						default:
							return
						}
					}
				}
			}
		}()
	}
}

// Submit gives the event its id and queues it on its minion's lane. A
// malformed event (not a JSON envelope with a tag, or a string anywhere in
// it that is not valid UTF-8) is dropped, counted in
// reactord_malformed_total and acknowledged; a line about it goes out at
// most once a minute. Submit reports false when the event was not accepted
// (daemon stopping, or the lane full without Block); it is then settled
// with Retry.
func (d *Reactor) Submit(ctx context.Context, dl Delivery) bool {
	if !d.submit(ctx, dl) {
		dl.settle(Retry)
		return false
	}
	return true
}

// submit is Submit, short of settling a refused event.
func (d *Reactor) submit(ctx context.Context, dl Delivery) bool {
	if d.stopped.Load() {
		return false
	}
	m := d.opts.Metrics
	if dl.id == "" {
		dl.id = d.ids.next()
	}
	tag, raw, err := event.SplitEnvelope(dl.Body)
	dl.tag, dl.raw, dl.split = tag, raw, err == nil
	if err != nil {
		m.Events.Inc()
		m.Malformed.Inc()
		if n, ok := d.malformedLog.Tick(); ok {
			d.opts.Log.Warn("malformed event dropped; counted in reactord_malformed_total, logged at most once a minute",
				"event_id", dl.id, "err", err, "bytes", len(dl.Body), "dropped_since_last_line", n)
		}
		dl.settle(Ack)
		return true
	}
	dl.minion = event.MinionOf(tag, raw)
	lane := d.lanes[maphash.String(d.seed, cmp.Or(dl.minion, tag))%uint64(len(d.lanes))]
	if d.opts.Block {
		select {
		case lane <- dl:
			m.QueueDepth.Set(float64(d.depth.Add(1)))
			return true
		case <-ctx.Done():
			return false
		case <-d.quit:
			return false
		}
	}
	select {
	case lane <- dl:
		m.QueueDepth.Set(float64(d.depth.Add(1)))
		return true
	default:
		m.Events.Inc()
		m.Dropped.WithLabelValues(DropLaneFull).Inc()
		if n, ok := d.overflowLog.Tick(); ok {
			d.opts.Log.Error("lane queue full: event dropped (core NATS mode has no redelivery; use --jetstream or raise --queue); counted in reactord_dropped_total{reason=\"lane_full\"}, logged at most once a minute",
				"event_id", dl.id, "tag", tag, "dropped_since_last_line", n)
		}
		return false
	}
}

// Stop stops accepting events and waits for queued ones to finish, at most
// until ctx ends; then it cancels the debounces still waiting for their
// quiet period. A debounced JetStream event was never acknowledged: it is
// refused (Retry) and comes back to another replica or the next start,
// where its quiet period begins again. A debounced core NATS event is
// lost; Stop logs how many. It is safe to call twice.
func (d *Reactor) Stop(ctx context.Context) error {
	d.once.Do(func() {
		d.stopped.Store(true)
		close(d.quit)
	})
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("stopping: %d event(s) still in flight: %w", d.depth.Load(), ctx.Err())
	}
	d.opts.Guard.StopTimers()
	d.limits.stop()
	if n := d.collects.stop(); n > 0 {
		d.opts.Log.Info("stopping: events gathered by a rule's collect option left unacknowledged; JetStream redelivers them", "events", n)
	}
	if n := d.collectLost.Swap(0); n > 0 {
		d.opts.Log.Warn("stopping: events gathered by a rule's collect option dropped (core NATS mode has no redelivery; use --jetstream)", "events", n)
	}
	if n := d.retries.stop(); n > 0 {
		d.opts.Log.Info("stopping: reactions waiting for a retry or for their job's returns left their events unacknowledged (core NATS mode drops them); JetStream redelivers them", "reactions", n)
	}
	if n := d.queuedReturned.Swap(0); n > 0 {
		d.opts.Log.Info("stopping: events queued by a rule's concurrency limit left unacknowledged; JetStream redelivers them to another replica or the next start", "events", n)
	}
	if n := d.queuedLost.Swap(0); n > 0 {
		d.opts.Log.Warn("stopping: events queued by a rule's concurrency limit dropped (core NATS mode has no redelivery; use --jetstream)", "events", n)
	}
	if n := d.dispatched.Swap(0); n > 0 && d.opts.Archive != nil {
		d.opts.Log.Info("reactions dispatched since the last count (each one is in the ledger: reactord trace; -v logs each)", "reactions", n)
	}
	if n := d.debounceReturned.Swap(0); n > 0 {
		d.opts.Log.Info("stopping: debounced events still in their quiet period left unacknowledged; JetStream redelivers them to another replica or the next start", "events", n)
	}
	if n := d.debounceLost.Swap(0); n > 0 {
		d.opts.Log.Warn("stopping: debounced events still in their quiet period dropped (core NATS mode has no redelivery; use --jetstream)", "events", n)
	}
	return err
}

// eventHold keeps an event unacknowledged while debounces hold it: its
// handling and each debounce holding it count one, and the last to let go
// acknowledges it, or refuses it (Retry) if any of them gave up.
type eventHold struct {
	n       atomic.Int32
	abandon atomic.Bool
	settle  func(nak bool)
}

func (h *eventHold) let(abandon bool) {
	if abandon {
		h.abandon.Store(true)
	}
	if h.n.Add(-1) == 0 {
		h.settle(h.abandon.Load())
	}
}

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
	// eng is the engine that matched and rendered the event.
	eng *engine.Engine
	// debug is set when the log takes debug lines (-v): each decision of
	// the pipeline is then logged.
	debug bool
	// nak leaves the event for redelivery instead of acknowledging it.
	nak bool
	// hold, set when a debounce holds the event, delays its
	// acknowledgement until the debounce fired.
	hold *eventHold
	// slots are the rules (their ids) whose concurrency limit gave the
	// event a slot; finish gives back those with no job in flight.
	slots []string
	// archived is set when the event itself is to be archived; finish
	// adds its record, with its id when ledgered is set (something
	// happened to a reaction of it), so that only the events `reactord
	// trace` has something to say about get an id row.
	archived, ledgered bool
}

// handleIn handles dl on lane, in the journal (Options.Journal) while it
// does; an event the process died on Threshold times is parked instead.
// A suspect (an event in hand at an earlier crash) is handled while no
// other suspect is, so that a crash counts against the one that caused
// it, not against the innocent events in hand beside it: an innocent is
// in hand at one crash at most before it is a suspect, and then handled
// alone, and cleared.
func (d *Reactor) handleIn(ctx context.Context, lane int, dl Delivery) {
	j := d.opts.Journal
	if j == nil || dl.Seq == 0 {
		d.handle(ctx, dl)
		return
	}
	n, poisoned := j.Crashes(dl.Seq)
	if poisoned {
		d.park(dl, n)
		return
	}
	if n > 0 {
		d.suspectMu.Lock()
		defer d.suspectMu.Unlock()
	}
	j.Begin(lane, dl.Seq)
	d.handle(ctx, dl)
	j.End(lane, dl.Seq)
}

// park hands a poisoned event to Options.Park and acknowledges it, so
// that the events behind it flow.
func (d *Reactor) park(dl Delivery, crashes int) {
	if dl.id == "" {
		dl.id = d.ids.next()
	}
	d.opts.Metrics.Events.Inc()
	d.opts.Metrics.Parked.Inc()
	d.opts.Log.Error("event parked: the daemon died while handling it; it is not handled again (counted in reactord_events_parked_total)",
		"event_id", dl.id, "seq", dl.Seq, "tag", dl.tag, "crashes", crashes, "bytes", len(dl.Body))
	if d.opts.Park != nil {
		d.opts.Park(dl, crashes)
	}
	ev := &inflight{dl: dl, id: dl.id, tag: dl.tag}
	d.ledger(ev, store.LedgerEntry{Stage: store.StageFailed, Detail: fmt.Sprintf("parked after %d crashes of the daemon while handling it (stream sequence %d)", crashes, dl.Seq)})
	d.opts.Journal.Parked(dl.Seq)
	d.settle(dl, false)
}

// handle takes one event through the pipeline: decode, archive, loop
// guard, match and render, dispatch; then acknowledges it (finish).
func (d *Reactor) handle(ctx context.Context, dl Delivery) {
	if dl.Owned != nil && !dl.Owned() {
		dl.settle(Leave)
		d.opts.Metrics.Suppressed.WithLabelValues(SuppressPartitionMoved).Inc()
		if n, ok := d.movedLog.Tick(); ok {
			d.opts.Log.Warn("event left to the replica its partition moved to, which handles it again from the partition's acknowledgement floor; counted in reactord_suppressed_total{reason=\"partition_moved\"}, logged at most once a minute",
				"event_id", dl.id, "seq", dl.Seq, "moved_since_last_line", n)
		}
		return
	}
	ev := &inflight{dl: dl, id: dl.id, received: time.Now(), debug: d.opts.Log.Enabled(ctx, slog.LevelDebug)}
	if ev.id == "" {
		ev.id = d.ids.next()
	}
	defer d.finish(ctx, ev)
	d.opts.Metrics.Events.Inc()
	if !d.decode(ev) || !d.firstCopy(ctx, ev) || !d.archive(ev) || !d.checkHops(ctx, ev) {
		return
	}
	res := d.react(ctx, ev)
	if res == nil {
		return
	}
	for _, c := range res.Chunks {
		d.dispatch(ctx, ev, res, c)
	}
}

// finish acknowledges the event: Retry when it is left for redelivery,
// otherwise Ack, with an Archive once the event's records are durable.
// An event a debounce holds is acknowledged once the debounce let it go.
func (d *Reactor) finish(ctx context.Context, ev *inflight) {
	if ctx.Err() != nil {
		ev.nak = true // cancelled mid-way: leave the event for redelivery
	}
	if ev.dl.OnlyRule != "" {
		ev.slots = append(ev.slots, ev.dl.OnlyRule)
	}
	if len(ev.slots) > 0 {
		d.limits.ended(ev.id, ev.slots)
	}
	if ev.archived && !(ev.nak && ev.dl.Redelivers) { // a refused event is archived when it comes back
		id := ""
		if ev.ledgered {
			id = ev.id
		}
		d.opts.Archive.event(id, ev.tag, ev.raw, ev.received)
	}
	if ev.hold != nil {
		ev.hold.let(ev.nak)
	} else {
		d.settle(ev.dl, ev.nak)
	}
	if !ev.nak && !ev.dl.Sent.IsZero() {
		d.opts.Metrics.SentLatency.Observe(time.Since(ev.dl.Sent).Seconds())
	}
	if d.opts.OnDone != nil {
		d.opts.OnDone(ev.dl)
	}
}

// settle acknowledges a delivery (Ack, once its records are durable) or
// refuses it (Retry) for redelivery.
func (d *Reactor) settle(dl Delivery, nak bool) {
	switch {
	case dl.Settle == nil:
	case nak:
		dl.Settle(Retry)
	case d.opts.Archive != nil:
		d.opts.Archive.W.OnDurable(func() { dl.Settle(Ack) })
	default:
		dl.Settle(Ack)
	}
}

// holdFor returns the event's hold, counting one more holder.
func (d *Reactor) holdFor(ev *inflight) *eventHold {
	if ev.hold == nil {
		dl := ev.dl
		ev.hold = &eventHold{settle: func(nak bool) { d.settle(dl, nak) }}
		ev.hold.n.Store(1) // the handling itself, let go in finish
	}
	ev.hold.n.Add(1)
	return ev.hold
}

// decode takes the event's tag and raw data, which Submit split from the
// envelope, and finds its minion.
func (d *Reactor) decode(ev *inflight) bool {
	tag, raw := ev.dl.tag, ev.dl.raw
	if !ev.dl.split {
		// Submit refuses malformed envelopes: only a delivery that did not
		// come through it gets here.
		d.opts.Metrics.Malformed.Inc()
		return false
	}
	ev.tag, ev.raw, ev.minion = tag, raw, ev.dl.minion // found once, by submit
	if ev.debug {
		d.opts.Log.Debug("event received", "event_id", ev.id, "tag", tag, "minion", ev.minion, "hop", ev.dl.Hop, "bytes", len(ev.dl.Body))
	}
	return true
}

// firstCopy reports false for another master's copy of an event already
// taken (Options.Copy), which goes no further.
func (d *Reactor) firstCopy(ctx context.Context, ev *inflight) bool {
	if d.opts.Copy == nil || ev.dl.OnlyRule != "" {
		return true
	}
	dup, err := d.opts.Copy(ctx, ev.tag, ev.raw, ev.dl.Seq)
	switch {
	case err != nil && ev.dl.Redelivers:
		ev.nak = true
		d.noisy(slog.LevelWarn, "", "could not tell whether the event is another master's copy; left for redelivery", "event_id", ev.id, "tag", ev.tag, "err", err)
		return false
	case err != nil:
		d.noisy(slog.LevelWarn, "", "could not tell whether the event is another master's copy; reacting to it", "event_id", ev.id, "tag", ev.tag, "err", err)
		return true
	case dup:
		d.opts.Metrics.Suppressed.WithLabelValues("master_copy").Inc()
		d.noisy(slog.LevelInfo, "", "event dropped: another master's copy of an event already taken (--dedupe-masters)", "event_id", ev.id, "tag", ev.tag, "minion", ev.minion)
		return false
	}
	return true
}

// archive records the event, its job and its returns. It reports false
// when the event goes no further: the store is full and the event is left
// for redelivery (JetStream). In core NATS mode the event is reacted to
// anyway and counted.
func (d *Reactor) archive(ev *inflight) bool {
	ar := d.opts.Archive
	if ar == nil || ev.dl.OnlyRule != "" {
		// A debounced event coming back was archived when it came.
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
		if n, ok := d.storeFullLog.Tick(); ok {
			d.opts.Log.Warn("audit store full (memory and disk spool): events left for redelivery, not reacted to yet; logged at most once a minute",
				"event_id", ev.id, "tag", ev.tag, "events_since_last_line", n)
		}
		return false
	}
	d.opts.Metrics.ArchiveDropped.Inc()
	ev.archived = false
	if n, ok := d.storeFullLog.Tick(); ok {
		d.opts.Log.Error("audit store full (memory and disk spool): events reacted to but not archived (core NATS mode); counted in reactord_archive_dropped_total (their records in reactord_store_records_dropped_total), logged at most once a minute",
			"event_id", ev.id, "tag", ev.tag, "events_since_last_line", n)
	}
	return true
}

// checkHops applies the loop guard to the event itself: a job return
// holds its job's reactions for the settle window, and an event that
// reactions caused more than MaxHops times in a row is suppressed
// (false).
func (d *Reactor) checkHops(ctx context.Context, ev *inflight) bool {
	g := d.opts.Guard
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
			if d.jobOpts.Load() {
				failed := returnFailed(ev.raw)
				o = guard.OutcomeOK
				if failed {
					o = guard.OutcomeFailed
				}
				d.jobReturned(ctx, jt.JID, id, failed, ev.received)
			}
			if g.Returned(jt.JID, id, o, ev.received) {
				d.opts.Log.Info("loop guard: job returned; its reaction stays held back from the minion's beacons for the settle window", "event_id", ev.id, "jid", jt.JID, "minion", id, "settle", g.Settle().String())
				d.ledger(ev, store.LedgerEntry{Stage: store.StageReturned, JID: jt.JID, Minion: id, Detail: "job returned"})
			}
		}
	}
	if ev.dl.Hop <= d.opts.MaxHops {
		return true
	}
	if ev.firedBy != (guard.Reaction{}) {
		// The reaction that fired it is stopped (dispatch); other rules
		// still react, their own chains counting on.
		ev.overHops = true
		return true
	}
	d.ledger(ev, store.LedgerEntry{Stage: store.StageSuppressed, Minion: ev.minion, Detail: fmt.Sprintf("hop limit: %d hops > %d", ev.dl.Hop, d.opts.MaxHops)})
	d.opts.Metrics.Suppressed.WithLabelValues("hop_limit").Inc()
	d.noisy(slog.LevelWarn, ev.cause, "event suppressed: hop limit reached (a reaction's event caused too many reactions in a row)",
		"event_id", ev.id, "tag", ev.tag, "hops", ev.dl.Hop, "max", d.opts.MaxHops, "cause", ev.cause, "minion", ev.minion)
	return false
}

// jobReturned hands a job return, handled here or by another replica, to
// the rules' retries and concurrency limits.
func (d *Reactor) jobReturned(ctx context.Context, jid, minion string, failed bool, at time.Time) {
	// Kept for a slot or retry that starts following the job after its
	// return (another lane or replica dispatched it).
	d.early.add(jid, minion, failed, at)
	// Retries first: a retry it schedules keeps the concurrency place the
	// job's return would otherwise free.
	d.retries.returned(ctx, jid, minion, failed)
	d.limits.returned(jid, minion)
}

// react matches the event against the rules and renders the reaction
// files of the rules that match; it counts and records (ledger) what
// happened. It returns nil when there is nothing to dispatch.
func (d *Reactor) react(ctx context.Context, ev *inflight) *engine.Result {
	m := d.opts.Metrics
	eng := d.eng.Load()
	ev.eng = eng
	res, err := eng.ProcessEnvelope(ctx, ev.tag, ev.raw, engine.Options{Gate: d.gate(ctx, ev), OnlyRule: ev.dl.OnlyRule, EventID: ev.id, Collected: ev.dl.collected})
	if err != nil {
		m.Malformed.Inc()
		return nil
	}
	if ev.dl.OnlyRule != "" && eng.RuleIndex(ev.dl.OnlyRule) < 0 {
		// The debounce fired after a reload removed (or changed) its rule:
		// no other rule takes the held event.
		m.Suppressed.WithLabelValues("rule_removed").Inc()
		d.noisy(slog.LevelWarn, "rule_removed "+ev.dl.OnlyRule, "debounced event dropped: a reload removed its rule", "event_id", ev.id, "tag", ev.tag, "rule_id", ev.dl.OnlyRule)
		return nil
	}
	if n := len(res.Errors()); n > 0 {
		m.RenderErrors.Add(float64(n))
	}
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
			d.opts.Log.Debug("no rule matched", "event_id", ev.id, "tag", ev.tag)
		}
		return nil
	}
	m.Matched.Inc()
	rules := eng.Config().Rules
	for _, ri := range res.Rules {
		if ev.dl.OnlyRule == "" {
			// A debounced event coming back was counted when it came.
			m.RuleMatches.WithLabelValues(rules[ri].Glob).Inc()
		}
		if ev.debug {
			d.opts.Log.Debug("rule matched", "event_id", ev.id, "tag", ev.tag, "rule", rules[ri].Glob, "rule_pos", rules[ri].Pos.String())
		}
	}
	if ev.debug {
		for _, n := range res.Notes {
			d.opts.Log.Debug("rule did not react", "event_id", ev.id, "tag", ev.tag, "rule", rules[n.Rule].Glob, "reason", n.Note)
		}
		for _, f := range res.Files {
			if f.Err == nil {
				d.opts.Log.Debug("reaction file rendered", "event_id", ev.id, "tag", ev.tag, "rule", rules[f.Rule].Glob, "file", f.Path, "reactions", f.Reactions)
			}
		}
		d.opts.Log.Debug("reactions to dispatch", "event_id", ev.id, "tag", ev.tag, "count", len(res.Chunks))
	}
	if d.opts.Archive != nil {
		d.ledgerResult(ev, rules, res)
	}
	return res
}

// ledgerResult records what happened to the reactions of the rules that
// matched, short of their dispatch: why a rule did not react, each file
// that failed, and verify_high's errors. A rule whose files rendered adds
// nothing here: its reactions' dispatch rows name it.
func (d *Reactor) ledgerResult(ev *inflight, rules []config.Rule, res *engine.Result) {
	for _, n := range res.Notes {
		d.ledger(ev, store.LedgerEntry{Stage: store.StageSuppressed, Rule: rules[n.Rule].Glob, Minion: ev.minion, Detail: n.Note})
	}
	for _, f := range res.Files {
		if f.Err != nil {
			d.ledger(ev, store.LedgerEntry{Stage: store.StageFailed, Rule: rules[f.Rule].Glob, File: f.Path, Minion: ev.minion, Detail: f.Err.Error()})
		}
	}
	for _, err := range res.VerifyErrors {
		d.ledger(ev, store.LedgerEntry{Stage: store.StageFailed, Minion: ev.minion, Detail: "verify_high: " + err.Error()})
	}
}

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

// ruleOf finds the rule whose file gave reaction c.
func ruleOf(ev *inflight, res *engine.Result, c *event.Chunk) chunkRule {
	sls := c.Str("__sls__")
	cr := chunkRule{reaction: guard.Reaction{Rule: "file:" + sls, ID: c.Str("__id__")}}
	option := ""
	for _, f := range res.Files {
		if rules := ev.eng.Config().Rules; f.Path == sls && f.Rule < len(rules) {
			r := &rules[f.Rule]
			cr.glob, cr.reaction.Rule, option, cr.retry = r.Glob, r.ID, r.Options.Guard, r.Options.Retry
			break
		}
	}
	cr.mode = guard.ModeFor(option, c.Str("state"), c.Str("fun"))
	return cr
}

// dispatch runs one reaction (low chunk) of the event through the driver,
// unless the loop guard holds it, and tells the loop guard what it
// started.
func (d *Reactor) dispatch(ctx context.Context, ev *inflight, res *engine.Result, c *event.Chunk) {
	m, g, drv := d.opts.Metrics, d.opts.Guard, d.opts.Driver
	tag := res.Tag
	a := actions.Action{Tag: tag, Chunk: c, Hop: ev.dl.Hop}
	sls, id := c.Str("__sls__"), c.Str("__id__")
	if ev.dl.MsgID != "" {
		a.Key = ev.dl.MsgID + "/" + sls + "/" + id
	}
	rule := ruleOf(ev, res, c)
	reaction := rule.reaction
	if ev.overHops && reaction == ev.firedBy {
		m.Suppressed.WithLabelValues("hop_limit").Inc()
		d.noisy(slog.LevelWarn, sls+"\x00"+id, "reaction held back: hop limit reached (the event is the reaction's own, fired again too many times in a row)",
			"event_id", ev.id, "tag", tag, "id", id, "file", sls, "hops", ev.dl.Hop, "max", d.opts.MaxHops, "cause", ev.cause, "minion", ev.minion)
		d.ledger(ev, store.LedgerEntry{Stage: store.StageSuppressed, Rule: rule.glob, File: sls, ReactionID: id, Minion: ev.minion,
			Detail: fmt.Sprintf("hop limit: %d hops > %d, fired by this reaction", ev.dl.Hop, d.opts.MaxHops)})
		return
	}
	// A pending retry goes on (the guard let the reaction through when it
	// first ran; its own job's beacons must not stop its retry).
	if rule.retry.Attempts > 0 && c.Str("state") == "local" && d.retries.resume(ctx, ev, c, rule) {
		return
	}
	if h, held := g.Held(reaction, rule.mode, ev.gev); held {
		d.heldBack(ev, sls, rule, h)
		return
	}
	start := time.Now()
	var r actions.Result
	var err error
	if !drv.Supports(c.Str("state")) {
		err = fmt.Errorf("driver %s cannot run %s reactions", drv.Name(), c.Str("state"))
	} else {
		r, err = d.opts.Retry.Do(ctx, a)
	}
	m.ActionDuration.WithLabelValues(drv.Name()).Observe(time.Since(start).Seconds())
	if !ev.dl.Received.IsZero() {
		m.Latency.Observe(time.Since(ev.dl.Received).Seconds())
	}
	if err != nil {
		m.Actions.WithLabelValues(drv.Name(), "failed").Inc()
		d.noisy(slog.LevelError, sls+"\x00"+id+"\x00"+drv.Name(), "reaction failed", "event_id", ev.id, "tag", tag, "id", id, "file", sls, "driver", drv.Name(), "err", err)
		d.ledger(ev, store.LedgerEntry{Stage: store.StageFailed, Rule: rule.glob, File: sls, ReactionID: id, Minion: ev.minion, Detail: fmt.Sprintf("%s: %v", drv.Name(), err)})
		if d.opts.DeadLetter != nil && ctx.Err() == nil {
			m.DeadLetters.Inc()
			d.opts.DeadLetter(a, err)
		}
	} else {
		m.Actions.WithLabelValues(drv.Name(), "dispatched").Inc()
		targets := targetsOf(c, r, ev.minion)
		now := time.Now()
		g.Started(ev.id, reaction, r.JID, targets, now)
		d.limits.started(ev.id, reaction.Rule, r.JID, targets, now)
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
				g.ExpectEvent(t, guard.Fired{Hop: ev.dl.Hop + 1, Cause: tag, By: reaction}, time.Now())
			}
		}
		d.dispatched.Add(1)
		level := slog.LevelInfo
		if d.opts.Archive != nil {
			// The ledger keeps each dispatch (reactord trace); the log
			// gets a count a minute (see Start).
			level = slog.LevelDebug
		}
		d.opts.Log.Log(ctx, level, "reaction dispatched", "event_id", ev.id, "tag", tag, "id", id, "file", sls, "driver", drv.Name(), "jid", r.JID, "targets", targets, "hop", ev.dl.Hop)
		d.ledger(ev, store.LedgerEntry{Stage: store.StageDispatched, Rule: rule.glob, File: sls, ReactionID: id, JID: r.JID, Minion: strings.Join(targets, ","),
			Detail: fmt.Sprintf("%s %s %s", drv.Name(), c.Str("state"), c.Str("fun"))})
	}
	if d.opts.OnDispatch != nil {
		d.opts.OnDispatch(ev.dl, a, r, err)
	}
}

// heldBack counts, logs and records a reaction the loop guard holds back
// from ev: the metric's reason and the line name the evidence. The line
// is limited per reaction, minion and evidence, so the first of a new
// kind always shows.
func (d *Reactor) heldBack(ev *inflight, sls string, rule chunkRule, h guard.Hold) {
	r := rule.reaction
	d.opts.Metrics.Suppressed.WithLabelValues("loop_guard_" + h.Evidence).Inc()
	detail := "loop guard: " + heldDetail(h)
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

// concurrency gives the event a slot of the rule (id) for key, or queues
// it, unacknowledged, until one of the rule's reactions in flight for key
// is done; it then comes back for this rule alone, in the order queued.
func (d *Reactor) concurrency(ctx context.Context, ev *inflight, glob, id, key, tag string, max int) (bool, string) {
	hold := d.holdFor(ev)
	js := ev.dl.Redelivers
	body, hop := ev.dl.Body, ev.dl.Hop
	let := func(abandon bool) {
		if abandon && d.stopped.Load() {
			if js {
				d.queuedReturned.Add(1)
			} else {
				d.queuedLost.Add(1)
			}
		}
		hold.let(abandon)
	}
	ok, place := d.limits.acquire(ev.id, id, key, max, func() {
		d.opts.Metrics.ConcurrencyQueued.Dec()
		// Its stream sequence and message id go with it: a retry of its
		// reaction is recorded under them (see progressName).
		again := Delivery{Body: body, Received: time.Now(), Hop: hop, OnlyRule: id, Redelivers: js, id: ev.id,
			Seq: ev.dl.Seq, MsgID: ev.dl.MsgID, Settle: func(o Outcome) { let(o != Ack) }}
		if !d.Submit(ctx, again) { // a refused one is settled: let(true)
			d.limits.ended(ev.id, []string{id}) // and gives its slot back
		}
	}, func() {
		d.opts.Metrics.ConcurrencyQueued.Dec()
		let(true)
	})
	if ok {
		hold.let(false) // not held: the slot is the event's own
		ev.slots = append(ev.slots, id)
		return true, ""
	}
	d.opts.Metrics.ConcurrencyQueued.Inc()
	d.noisy(slog.LevelInfo, "concurrency\x00"+id+"\x00"+key, "event queued: the rule's concurrency limit is reached for its key; it reacts, in order, when one of the reactions in flight is done",
		"event_id", ev.id, "tag", tag, "rule", glob, "key", key, "limit", max, "place", place)
	return false, fmt.Sprintf("concurrency: %d reactions in flight for key %q; queued (place %d)", max, key, place)
}

// ledger writes one ledger entry about ev, whose id and tag it fills in;
// without an Archive it does nothing.
func (d *Reactor) ledger(ev *inflight, e store.LedgerEntry) {
	if d.opts.Archive == nil {
		return
	}
	e.EventID, e.Tag = ev.id, ev.tag
	ev.ledgered = true
	d.opts.Archive.ledger(e)
}

// gate applies the rules' throttle and debounce options.
func (d *Reactor) gate(ctx context.Context, ev *inflight) engine.Gate {
	return func(rule int, key, tag string, data map[string]any) (bool, string) {
		eng := d.eng.Load()
		if rule >= len(eng.Config().Rules) {
			return true, ""
		}
		o, id := eng.Config().Rules[rule].Options, eng.Config().Rules[rule].ID
		if o.Debounce > 0 {
			// The event stays unacknowledged until the debounce fires
			// (or a newer event replaces it), so a stop or a crash in
			// its quiet period leaves it to JetStream's redelivery.
			hold := d.holdFor(ev)
			js := ev.dl.Redelivers
			let := func(abandon bool) {
				if abandon && d.stopped.Load() {
					if js {
						d.debounceReturned.Add(1)
					} else {
						d.debounceLost.Add(1)
					}
				}
				hold.let(abandon)
			}
			d.opts.Guard.Debounce(id, key, ev.dl.Body, ev.dl.Hop, o.Debounce, let, func(body []byte, hop int, let func(bool)) {
				// The event's id goes with it: its dispatch joins the
				// trail of the event the debounce held (which is archived
				// once, under that id).
				again := Delivery{Body: body, Received: time.Now(), Hop: hop, OnlyRule: id, Redelivers: js, id: ev.id,
					Seq: ev.dl.Seq, MsgID: ev.dl.MsgID, Settle: func(o Outcome) { let(o != Ack) }}
				d.Submit(ctx, again) // a refused one is settled: let(true)
			})
			d.opts.Metrics.Suppressed.WithLabelValues("debounce").Inc()
			d.opts.Log.Info("event held by debounce", "event_id", ev.id, "tag", tag, "rule", eng.Config().Rules[rule].Glob, "key", key, "quiet", o.Debounce.String())
			return false, fmt.Sprintf("debounce: held until %s without a new event for key %q", o.Debounce, key)
		}
		if o.ThrottleCount > 0 && !d.opts.Guard.Throttle(id, key, o.ThrottleCount, o.ThrottlePer, time.Now()) {
			d.opts.Metrics.Suppressed.WithLabelValues("throttle").Inc()
			d.noisy(slog.LevelWarn, eng.Config().Rules[rule].Glob, "reaction suppressed by throttle", "event_id", ev.id, "tag", tag, "rule", eng.Config().Rules[rule].Glob, "key", key, "limit", fmt.Sprintf("%d per %s", o.ThrottleCount, o.ThrottlePer))
			return false, fmt.Sprintf("throttle: more than %d per %s for key %q", o.ThrottleCount, o.ThrottlePer, key)
		}
		if o.Concurrency > 0 {
			return d.concurrency(ctx, ev, eng.Config().Rules[rule].Glob, id, key, tag, o.Concurrency)
		}
		if o.Collect.Within > 0 {
			if o.Key == "" {
				key = "" // one collection for the rule
			}
			return d.collect(ctx, ev, eng.Config().Rules[rule].Glob, id, key, tag, o.Collect)
		}
		return true, ""
	}
}

// noisy logs a line that could repeat once per event: the first for its
// message and key at once, then at most one a minute carrying how many it
// stands for. The metrics, the ledger and the dead letters keep each one.
func (d *Reactor) noisy(level slog.Level, key, msg string, args ...any) {
	d.limit.Log(d.opts.Log, level, key, msg, args...)
}
