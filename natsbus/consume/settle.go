package consume

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// waitSettled waits, for up to d (no bound when d is negative), until
// every event handed to the handler is settled.
func (r *partRun) waitSettled(d time.Duration) {
	var deadline <-chan time.Time
	if d >= 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		deadline = timer.C
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		n := r.inflight
		r.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-deadline:
			return
		case <-r.quit:
			return // settled by another (a release, a loss): it waited
		case <-tick.C:
		}
	}
}

// settle waits (for up to d, no bound when negative) until every event
// handed to the handler is settled, acknowledges the floor and ends the
// acknowledgement loop.
func (r *partRun) settle(d time.Duration) {
	r.waitSettled(d)
	r.mu.Lock()
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	r.mu.Unlock()
	r.ackFloor()
	r.confirmFloor(nil, "its next owner may handle those events again")
}

// confirmWait bounds how long a partition's settle waits for the server
// to record its last acknowledgement (confirmFloor).
const confirmWait = 5 * time.Second

// confirmFloor waits, for up to confirmWait, until the server recorded the
// acknowledgement floor: acknowledgements go out without waiting for a
// reply, and the next owner of the partition starts at the floor the
// server holds, so an event acknowledged here but not yet recorded there
// would run again (a hand-over between live replicas reacted twice to one
// event on a loaded machine). Meanwhile the floor's acknowledgement is
// sent again every 250 ms: one sent on a connection that broke, or never
// sent, is lost, and a second AckAll of the same event changes nothing.
// It is not sent again once the partition is lost: the next owner may
// have reset the consumer, and an acknowledgement of this session's
// delivery would then be taken for one of its own. stop, when it closes,
// ends the wait; risk says what a floor left unconfirmed may cause.
func (r *partRun) confirmFloor(stop <-chan struct{}, risk string) {
	r.mu.Lock()
	f := r.acked
	r.mu.Unlock()
	if f == nil {
		return
	}
	md, err := f.Metadata()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
	defer cancel()
	again := time.NewTicker(250 * time.Millisecond)
	defer again.Stop()
	// The lookup brings the consumer's info; Info refreshes it.
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	for err == nil && cons.CachedInfo().AckFloor.Stream < md.Sequence.Stream {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-stop:
			return
		case <-again.C:
			if f.Reply() != "" && !r.lost.Load() {
				_ = r.p.c.NATS().Publish(f.Reply(), []byte("+ACK")) // the client sends one Ack per message only
			}
		case <-time.After(10 * time.Millisecond):
			_, err = cons.Info(ctx)
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		r.p.log.Warn("the server did not confirm the partition's last acknowledgement",
			"detail", risk,
			"consumer", r.u.name, "replica", r.p.o.Replica, "stream_seq", md.Sequence.Stream, "waited", confirmWait.String(), "error", err)
	}
}

// resync pauses the partition, waits until what was handed to the
// handler is settled, and starts a new session from the acknowledgement
// floor, so that nothing after a missed or refused event is handled
// before it.
//
// The wait has no bound but the reactor's own holds (debounce, collect,
// a concurrency queue, a retry waiting for its job: the events taken get
// progress acknowledgements meanwhile), and a settle ends it (a release
// at stop, a lost lease: they close quit): a new session started while events of
// the last one still wait in the handler's lanes would queue the events
// it delivers again behind later ones of the same minion, which would
// then run out of order (issue 49).
func (r *partRun) resync(why string) {
	p := r.p
	r.mu.Lock()
	if r.halted || r.pausing {
		r.mu.Unlock()
		return
	}
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		r.mu.Unlock()
		return // the next owner starts at the floor
	}
	r.pausing = true
	cc, closed := r.cc, r.ccClosed
	r.cc, r.ccClosed = nil, nil
	r.backoff = min(max(2*r.backoff, 100*time.Millisecond), 5*time.Second)
	wait := r.backoff
	r.mu.Unlock()
	p.resyncs.Add(1)
	p.log.Warn("partition resync: consuming it again from its acknowledgement floor", "consumer", r.u.name, "reason", why, "after", wait.String())
	p.changed("resync", r.i)
	again := func() {
		if cc != nil {
			stopConsuming(&p.tasks, cc, closed)
		}
		r.waitSettled(-1)
		r.mu.Lock()
		r.acked = nil // send it again: the last one may have gone to a consumer leader that died
		r.mu.Unlock()
		r.ackFloor()
		// The reset starts at the floor the server recorded: wait (up
		// to confirmWait) for it to have this one, sending it again
		// meanwhile, so that the events below it are not delivered
		// again (they would be passed over: floorSeq) nor an old
		// session's late acknowledgement recorded after the reset.
		r.confirmFloor(r.quit, "the partition's next session may wait for its acknowledgement wait before its own acknowledgements count")
		select {
		case <-r.quit:
			return
		case <-time.After(wait):
		}
		if r.sessionRetrying("partition resync failed; retrying") {
			p.log.Info("partition resynced: consuming it from its acknowledgement floor", "consumer", r.u.name, "from_seq", r.nextSeq())
		}
	}
	if !p.tasks.Go(again) && cc != nil {
		cc.Stop() // released meanwhile: the next owner starts at the floor
	}
}
