package reactor

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
)

// Start runs one goroutine per lane until Stop, and a ticker (tick);
// Stop waits for all of them, and for the tasks beside them (held events
// let go, retries).
func (r *Reactor) Start(ctx context.Context) {
	r.opts.Guard.FollowReturns(func(jid, minion string, o guard.Outcome, at time.Time) {
		if r.jobOpts.Load() {
			r.jobReturned(ctx, jid, minion, o == guard.OutcomeFailed, at)
		}
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.tick(ctx)
	}()
	for lane, ch := range r.lanes {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				select {
				case dl := <-ch:
					r.opts.Metrics.QueueDepth.Set(float64(r.depth.Add(-1)))
					r.handleIn(ctx, lane, dl)
				case <-r.quit:
					// Drain what was queued before the stop.
					for {
						select {
						case dl := <-ch:
							r.opts.Metrics.QueueDepth.Set(float64(r.depth.Add(-1)))
							r.handleIn(ctx, lane, dl)
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
// (the reactor stopping, or the lane full without Block); it is then settled
// with Retry.
func (r *Reactor) Submit(ctx context.Context, dl Delivery) bool {
	if !r.submit(ctx, dl) {
		dl.settle(Retry)
		return false
	}
	return true
}

// submit is Submit, short of settling a refused event.
func (r *Reactor) submit(ctx context.Context, dl Delivery) bool {
	if r.stopped.Load() {
		return false
	}
	m := r.opts.Metrics
	if dl.id == "" {
		dl.id = r.ids.next()
	}
	tag, raw, err := event.SplitEnvelope(dl.Body)
	dl.tag, dl.raw, dl.split = tag, raw, err == nil
	if err != nil {
		m.Events.Inc()
		r.record(nil, Decision{Reason: Malformed, Event: Event{ID: dl.id}, Err: err, Attrs: []any{"bytes", len(dl.Body), "metric", "reactord_malformed_total"}})
		dl.settle(Ack)
		return true
	}
	dl.minion = event.MinionOf(tag, raw)
	lane := r.lanes[maphash.String(r.seed, cmp.Or(dl.minion, tag))%uint64(len(r.lanes))]
	if r.opts.Block {
		select {
		case lane <- dl:
			m.QueueDepth.Set(float64(r.depth.Add(1)))
			return true
		case <-ctx.Done():
			return false
		case <-r.quit:
			return false
		}
	}
	select {
	case lane <- dl:
		m.QueueDepth.Set(float64(r.depth.Add(1)))
		return true
	default:
		m.Events.Inc()
		r.record(nil, Decision{Reason: LaneFull, Event: Event{ID: dl.id, Tag: tag}, Attrs: []any{"metric", `reactord_dropped_total{reason="lane_full"}`}})
		return false
	}
}

// Stop stops accepting events and waits for queued ones to finish, at most
// until ctx ends; then it cancels the debounces still waiting for their
// quiet period. A debounced JetStream event was never acknowledged: it is
// refused (Retry) and comes back to another replica or the next start,
// where its quiet period begins again. A debounced core NATS event is
// lost; Stop logs how many. It is safe to call twice.
func (r *Reactor) Stop(ctx context.Context) error {
	r.once.Do(func() {
		r.stopped.Store(true)
		close(r.quit)
	})
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("stopping: %d event(s) still in flight: %w", r.depth.Load(), ctx.Err())
	}
	r.opts.Guard.StopTimers()
	r.limits.stop()
	collected := r.collects.stop()
	retrying := r.retries.stop()
	if terr := r.tasks.Close(ctx); terr != nil && err == nil {
		err = fmt.Errorf("stopping: tasks of held events and retries still running: %w", terr)
	}
	r.rec.stop()
	r.logAbandoned(collected, retrying)
	if n := r.rec.dispatched.Swap(0); n > 0 && r.opts.Archive != nil {
		r.opts.Log.Info(msgDispatchedSince, "reactions", n, "driver", r.opts.Driver.Name())
	}
	return err
}

// logAbandoned logs, at a stop, how many events the gates and the
// retries still held: left for redelivery (JetStream) or dropped (core
// NATS). The counts are complete: every task that could add to them is
// done.
func (r *Reactor) logAbandoned(collected, retrying int) {
	lines := []struct {
		warn bool
		msg  string
		n    int64
		what string
	}{
		{false, msgStopCollectedLeft, int64(collected), "events"},
		{true, msgStopCollectedDropped, r.left.collectLost.Swap(0), "events"},
		{false, msgStopRetriesLeft, int64(retrying), "reactions"},
		{false, msgStopQueuedLeft, r.left.queuedReturned.Swap(0), "events"},
		{true, msgStopQueuedDropped, r.left.queuedLost.Swap(0), "events"},
		{false, msgStopDebouncedLeft, r.left.debounceReturned.Swap(0), "events"},
		{true, msgStopDebouncedDropped, r.left.debounceLost.Swap(0), "events"},
	}
	for _, l := range lines {
		switch {
		case l.n == 0:
		case l.warn:
			r.opts.Log.Warn(l.msg, l.what, l.n, "fix", fixStopDropped)
		default:
			r.opts.Log.Info(l.msg, l.what, l.n)
		}
	}
}

// handleIn handles dl on lane, in the journal (Options.Journal) while it
// does; an event the process died on Threshold times is parked instead.
// A suspect (an event in hand at an earlier crash) is handled while no
// other suspect is, so that a crash counts against the one that caused
// it, not against the innocent events in hand beside it: an innocent is
// in hand at one crash at most before it is a suspect, and then handled
// alone, and cleared.
func (r *Reactor) handleIn(ctx context.Context, lane int, dl Delivery) {
	j := r.opts.Journal
	if j == nil || dl.Seq == 0 {
		r.handle(ctx, lane, dl, false)
		return
	}
	n, poisoned := j.Crashes(dl.Seq)
	if poisoned {
		r.park(dl, n)
		return
	}
	if n > 0 {
		// A token, not a mutex: it is held across the event's handling,
		// its dispatch included, and waiting for it ends with ctx.
		select {
		case r.suspect <- struct{}{}:
			defer func() { <-r.suspect }()
		case <-ctx.Done():
			// Stopping: left for redelivery, as handle leaves an
			// event it is cancelled in.
			r.opts.Metrics.Events.Inc()
			dl.settle(Retry)
			if r.opts.OnDone != nil {
				r.opts.OnDone(dl)
			}
			return
		}
	}
	// A suspect's driver calls are not handed over: it is in hand until
	// they returned. An innocent event is in hand until the lane goes on,
	// and in a place of its own while a call it handed over runs.
	j.Begin(lane, dl.Seq)
	r.handle(ctx, lane, dl, n > 0)
	j.End(lane, dl.Seq)
}

// park hands a poisoned event to Options.Park and acknowledges it, so
// that the events behind it flow.
func (r *Reactor) park(dl Delivery, crashes int) {
	if dl.id == "" {
		dl.id = r.ids.next()
	}
	r.opts.Metrics.Events.Inc()
	ev := &inflight{dl: dl, id: dl.id, tag: dl.tag}
	r.record(ev, Decision{Reason: Parked, Detail: fmt.Sprintf("parked after %d crashes of the daemon while handling it (stream sequence %d)", crashes, dl.Seq),
		Attrs: []any{"seq", dl.Seq, "crashes", crashes, "bytes", len(dl.Body), "metric", "reactord_events_parked_total"}})
	if r.opts.Park != nil {
		r.opts.Park(dl, crashes)
	}
	r.opts.Journal.Parked(dl.Seq)
	r.settle(dl, false)
}

// tick, once a second until Stop, expires retries, concurrency slots and
// loop-guard jobs whose minions did not return within the job timeout, and
// logs the count of reactions dispatched once a minute.
func (r *Reactor) tick(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	summary := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.quit:
			return
		case now := <-t.C:
			if r.opts.Archive != nil && now.Sub(summary) >= time.Minute {
				summary = now
				if n := r.rec.dispatched.Swap(0); n > 0 {
					r.opts.Log.Info(msgDispatchedMinute, "reactions", n, "driver", r.opts.Driver.Name())
				}
			}
			r.retries.expire(ctx, now)
			r.limits.expire(now)
			r.rec.tick(now)
			for _, x := range r.opts.Guard.TakeExpired(now) {
				// The ledger's entry names no event: the event's own
				// entries are done with.
				r.record(nil, Decision{Reason: Timeout, RuleID: x.Rule, JID: x.JID, Minion: x.Minion, ReactionID: x.ID,
					Detail: "minion did not return within the job timeout (rule " + x.Rule + ")", Attrs: []any{"event_id", x.EventID}})
			}
		}
	}
}
