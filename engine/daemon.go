package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
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
	// OnlyRule, when > 0, processes only rule OnlyRule-1 (a debounced event
	// coming back).
	OnlyRule int
	// Nak, when set, asks for redelivery (JetStream) when the event could
	// not be archived; Done is then not called.
	Nak func()
	// Done is called once the event's reactions were dispatched or
	// deliberately dropped and, with an Archive, once its archive records
	// are durable (written, or in the store's disk spool): JetStream
	// acknowledges here, so a crash loses no record of an acknowledged
	// event. May be nil.
	Done func()
}

// DaemonOptions configure a Daemon.
type DaemonOptions struct {
	// Driver executes reactions.
	Driver actions.Driver
	// Lanes is the number of ordered worker lanes (default 2×CPUs).
	Lanes int
	// QueueSize bounds each lane's queue (default 1024).
	QueueSize int
	// Block makes Submit wait when a lane is full (JetStream: stop
	// pulling); otherwise the event is dropped and counted as overflow.
	Block bool
	// Retry bounds retries of retryable driver errors.
	Retry actions.RetryStage
	// DeadLetter receives reactions that failed for good; may be nil.
	DeadLetter func(a actions.Action, err error)
	// MaxHops drops events that reactions caused more than this many times
	// in a row (default 3).
	MaxHops int
	// Guard is the loop guard; nil creates one with defaults.
	Guard *Guard
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
}

// Daemon runs the pipeline for live events: ordered per minion, parallel
// across minions, with bounded queues and a swappable configuration.
type Daemon struct {
	eng   atomic.Pointer[Engine]
	opts  DaemonOptions
	lanes []chan Delivery
	seed  maphash.Seed
	wg    sync.WaitGroup

	stopped atomic.Bool
	quit    chan struct{}
	once    sync.Once
	depth   atomic.Int64

	// Lines that can repeat once per event go out once per interval.
	overflowLog, storeFullLog *ratelog.Every
}

// NewDaemon returns a daemon for eng; call Start before Submit.
func NewDaemon(eng *Engine, opts DaemonOptions) (*Daemon, error) {
	if opts.Driver == nil {
		return nil, errors.New("daemon: no driver")
	}
	if err := CheckDriver(eng, opts.Driver); err != nil {
		return nil, err
	}
	if opts.Lanes <= 0 {
		opts.Lanes = 8
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.MaxHops <= 0 {
		opts.MaxHops = 3
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Guard == nil {
		opts.Guard = NewGuard(GuardOptions{})
	}
	opts.Retry.Driver = opts.Driver
	d := &Daemon{opts: opts, seed: maphash.MakeSeed(), quit: make(chan struct{}),
		overflowLog: ratelog.New(time.Minute), storeFullLog: ratelog.New(time.Minute)}
	d.eng.Store(eng)
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
func CheckDriver(eng *Engine, drv actions.Driver) error {
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
func (d *Daemon) Engine() *Engine { return d.eng.Load() }

// Reload swaps in a new engine atomically; events already queued finish
// with the engine that picks them up.
func (d *Daemon) Reload(eng *Engine) error {
	if err := CheckDriver(eng, d.opts.Driver); err != nil {
		d.opts.Metrics.ReloadOK.Set(0)
		return err
	}
	d.eng.Store(eng)
	d.opts.Metrics.ReloadOK.Set(1)
	return nil
}

// Start runs one goroutine per lane until Stop, and a ticker that records
// jobs whose minions did not return within the job timeout.
func (d *Daemon) Start(ctx context.Context) {
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.quit:
				return
			case now := <-t.C:
				for _, x := range d.opts.Guard.TakeExpired(now) {
					d.opts.Log.Warn("loop guard: minion did not return within the job timeout", "jid", x.JID, "minion", x.Minion, "id", x.ID, "file", x.SLS)
					d.opts.Archive.ledgerf("", "", store.StageTimeout, "", x.SLS, x.ID, x.JID, x.Minion, "minion did not return within the job timeout")
				}
			}
		}
	}()
	for _, ch := range d.lanes {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				select {
				case dl := <-ch:
					d.opts.Metrics.QueueDepth.Set(float64(d.depth.Add(-1)))
					d.handle(ctx, dl)
				case <-d.quit:
					// Drain what was queued before the stop.
					for {
						select {
						case dl := <-ch:
							d.opts.Metrics.QueueDepth.Set(float64(d.depth.Add(-1)))
							d.handle(ctx, dl)
						default:
							return
						}
					}
				}
			}
		}()
	}
}

// Submit queues one event on its minion's lane. It reports false when the
// event was not accepted (daemon stopping, or the lane full without Block).
func (d *Daemon) Submit(ctx context.Context, dl Delivery) bool {
	if d.stopped.Load() {
		return false
	}
	m := d.opts.Metrics
	tag, raw, err := event.SplitEnvelope(dl.Body)
	if err != nil {
		m.Events.Inc()
		m.Malformed.Inc()
		d.opts.Log.Warn("malformed event dropped", "err", err, "bytes", len(dl.Body))
		if dl.Done != nil {
			dl.Done()
		}
		return true
	}
	lane := d.lanes[maphash.String(d.seed, laneKey(tag, raw))%uint64(len(d.lanes))]
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
		m.Overflow.Inc()
		if n, ok := d.overflowLog.Tick(); ok {
			d.opts.Log.Error("lane queue full: event dropped (core NATS mode has no redelivery; use --jetstream or raise --queue); counted in reactord_overflow_total, logged at most once a minute",
				"tag", tag, "dropped_since_last_line", n)
		}
		return false
	}
}

func laneKey(tag string, raw []byte) string {
	if id := event.MinionOf(tag, raw); id != "" {
		return id
	}
	return tag
}

// Stop stops accepting events and waits for queued ones to finish, at most
// until ctx ends. It is safe to call twice.
func (d *Daemon) Stop(ctx context.Context) error {
	d.once.Do(func() {
		d.stopped.Store(true)
		close(d.quit)
	})
	d.opts.Guard.StopTimers()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping: %d event(s) still in flight: %w", d.depth.Load(), ctx.Err())
	}
}

func (d *Daemon) handle(ctx context.Context, dl Delivery) {
	m := d.opts.Metrics
	g := d.opts.Guard
	log := d.opts.Log
	nak := false
	defer func() {
		if ctx.Err() != nil {
			nak = true // cancelled mid-way: leave the event for redelivery
		}
		switch {
		case nak && dl.Nak != nil:
			dl.Nak()
		case dl.Done != nil && d.opts.Archive != nil:
			d.opts.Archive.W.OnDurable(dl.Done)
		case dl.Done != nil:
			dl.Done()
		}
		if d.opts.OnDone != nil {
			d.opts.OnDone(dl)
		}
	}()
	eng := d.eng.Load()
	m.Events.Inc()
	now := time.Now()
	tag, raw, err := event.SplitEnvelope(dl.Body)
	if err != nil {
		// Submit refuses malformed envelopes; a debounced re-submission
		// carries a body that was split before.
		m.Malformed.Inc()
		return
	}
	minion := event.MinionOf(tag, raw)
	ar := d.opts.Archive
	evID := ""
	if ar != nil {
		evID = ar.nextID()
		if !ar.record(evID, tag, raw, now) {
			if dl.Nak != nil {
				// JetStream keeps the event; it comes back, after a
				// delay that grows with its deliveries, when the store
				// has room again.
				nak = true
				if n, ok := d.storeFullLog.Tick(); ok {
					log.Warn("audit store full (memory and disk spool): events left for redelivery, not reacted to yet; logged at most once a minute",
						"tag", tag, "events_since_last_line", n)
				}
				return
			}
			m.Overflow.Inc()
			if n, ok := d.storeFullLog.Tick(); ok {
				log.Error("audit store full (memory and disk spool): events reacted to but not archived (core NATS mode); counted in reactord_store_records_dropped_total, logged at most once a minute",
					"tag", tag, "events_since_last_line", n)
			}
		}
	}
	cause := ""
	// An expected event is used up either way; a hop header wins.
	if hop, c := g.HopOf(tag, now); dl.Hop == 0 {
		dl.Hop, cause = hop, c
	}
	if jid, id, ok := jobReturn(tag); ok && g.Returned(jid, id, now) {
		log.Info("loop guard: job returned; holding its reaction for the settle window", "jid", jid, "minion", id, "settle", g.opts.Settle.String())
		ar.ledgerf(evID, tag, store.StageReturned, "", "", "", jid, id, "job returned")
	}
	if dl.Hop > d.opts.MaxHops {
		ar.ledgerf(evID, tag, store.StageSuppressed, "", "", "", "", minion, "hop limit: %d hops > %d", dl.Hop, d.opts.MaxHops)
		m.Suppressed.WithLabelValues("hop_limit").Inc()
		log.Warn("event suppressed: hop limit reached (a reaction's event caused too many reactions in a row)", "tag", tag, "hops", dl.Hop, "max", d.opts.MaxHops, "cause", cause, "minion", minion)
		return
	}
	res, err := eng.ProcessEnvelope(ctx, tag, raw, Options{Gate: d.gate(ctx, dl), OnlyRule: dl.OnlyRule})
	if err != nil {
		m.Malformed.Inc()
		return
	}
	if n := len(res.Errors()); n > 0 {
		m.RenderErrors.Add(float64(n))
	}
	if res.Skipped != "" {
		reason := "reactor_user"
		if res.Skipped == SkipManageTag {
			reason = "manage_tag"
		}
		m.Suppressed.WithLabelValues(reason).Inc()
		return
	}
	if len(res.Rules) > 0 {
		m.Matched.Inc()
		if ar != nil {
			rules := eng.cfg.Rules
			for _, ri := range res.Rules {
				ar.ledgerf(evID, tag, store.StageMatched, rules[ri].Glob, "", "", "", minion, "%s", rules[ri].Pos)
			}
			for _, n := range res.Notes {
				ar.ledgerf(evID, tag, store.StageSuppressed, rules[n.Rule].Glob, "", "", "", minion, "%s", n.Note)
			}
			for _, f := range res.Files {
				if f.Err != nil {
					ar.ledgerf(evID, tag, store.StageFailed, rules[f.Rule].Glob, f.Path, "", "", minion, "%v", f.Err)
				} else {
					ar.ledgerf(evID, tag, store.StageRendered, rules[f.Rule].Glob, f.Path, "", "", minion, "%d reaction ID(s)", f.Reactions)
				}
			}
			for _, e := range res.VerifyErrors {
				ar.ledgerf(evID, tag, store.StageFailed, "", "", "", "", minion, "verify_high: %v", e)
			}
		}
	}
	drv := d.opts.Driver
	for _, c := range res.Chunks {
		a := actions.Action{Tag: res.Tag, Chunk: c, Hop: dl.Hop}
		sls, id := c.Str("__sls__"), c.Str("__id__")
		if jid, phase, held := g.Suppressed(sls, id, minion, now); held {
			m.Suppressed.WithLabelValues("loop_guard").Inc()
			log.Warn("reaction suppressed by the loop guard", "tag", res.Tag, "id", id, "file", sls, "minion", minion, "jid", jid, "phase", phase)
			ar.ledgerf(evID, tag, store.StageSuppressed, "", sls, id, jid, minion, "loop guard: %s", phase)
			continue
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
		if !dl.Received.IsZero() {
			m.Latency.Observe(time.Since(dl.Received).Seconds())
		}
		if err != nil {
			m.Actions.WithLabelValues(drv.Name(), "failed").Inc()
			log.Error("reaction failed", "tag", res.Tag, "id", id, "file", sls, "driver", drv.Name(), "err", err)
			ar.ledgerf(evID, tag, store.StageFailed, "", sls, id, "", minion, "%s: %v", drv.Name(), err)
			if d.opts.DeadLetter != nil && ctx.Err() == nil {
				m.DeadLetters.Inc()
				d.opts.DeadLetter(a, err)
			}
		} else {
			m.Actions.WithLabelValues(drv.Name(), "dispatched").Inc()
			targets := targetsOf(c, r, minion)
			g.Started(sls, id, r.JID, targets, time.Now())
			if t := firedTag(c); t != "" {
				// One event per target for local event.send, one for a runner.
				n := 1
				if c.Str("state") == "local" {
					n = max(len(targets), 1)
				}
				for range n {
					g.ExpectEvent(t, dl.Hop+1, res.Tag, time.Now())
				}
			}
			log.Info("reaction dispatched", "tag", res.Tag, "event_id", evID, "id", id, "file", sls, "driver", drv.Name(), "jid", r.JID, "targets", targets, "hop", dl.Hop)
			ar.ledgerf(evID, tag, store.StageDispatched, "", sls, id, r.JID, strings.Join(targets, ","), "%s %s %s", drv.Name(), c.Str("state"), c.Str("fun"))
		}
		if d.opts.OnDispatch != nil {
			d.opts.OnDispatch(dl, a, r, err)
		}
	}
}

// gate applies the rules' throttle and debounce options.
func (d *Daemon) gate(ctx context.Context, dl Delivery) Gate {
	return func(rule int, key, tag string, data map[string]any) (bool, string) {
		eng := d.eng.Load()
		if rule >= len(eng.cfg.Rules) {
			return true, ""
		}
		o := eng.cfg.Rules[rule].Options
		if o.Debounce > 0 {
			d.opts.Guard.Debounce(rule, key, dl.Body, dl.Hop, o.Debounce, func(body []byte, hop int) {
				d.Submit(ctx, Delivery{Body: body, Received: time.Now(), Hop: hop, OnlyRule: rule + 1})
			})
			d.opts.Metrics.Suppressed.WithLabelValues("debounce").Inc()
			d.opts.Log.Info("event held by debounce", "tag", tag, "rule", eng.cfg.Rules[rule].Glob, "key", key, "quiet", o.Debounce.String())
			return false, fmt.Sprintf("debounce: held until %s without a new event for key %q", o.Debounce, key)
		}
		if o.ThrottleCount > 0 && !d.opts.Guard.Throttle(rule, key, o.ThrottleCount, o.ThrottlePer, time.Now()) {
			d.opts.Metrics.Suppressed.WithLabelValues("throttle").Inc()
			d.opts.Log.Warn("reaction suppressed by throttle", "tag", tag, "rule", eng.cfg.Rules[rule].Glob, "key", key, "limit", fmt.Sprintf("%d per %s", o.ThrottleCount, o.ThrottlePer))
			return false, fmt.Sprintf("throttle: more than %d per %s for key %q", o.ThrottleCount, o.ThrottlePer, key)
		}
		return true, ""
	}
}

// jobReturn parses salt/job/<jid>/ret/<id>, and salt/run/<jid>/ret and
// salt/wheel/<jid>/ret (id "": the whole job returned).
func jobReturn(tag string) (jid, id string, ok bool) {
	for _, p := range []string{"salt/run/", "salt/wheel/"} {
		if rest, ok := strings.CutPrefix(tag, p); ok {
			jid, ok := strings.CutSuffix(rest, "/ret")
			return jid, "", ok && jid != "" && !strings.Contains(jid, "/")
		}
	}
	rest, ok := strings.CutPrefix(tag, "salt/job/")
	if !ok {
		return "", "", false
	}
	jid, id, ok = strings.Cut(rest, "/ret/")
	return jid, id, ok && jid != "" && id != ""
}
