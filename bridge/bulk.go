package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/natsbus"
)

// BulkPublisher is implemented by a Publisher that publishes many events
// without waiting for each (natsbus.Conn does, through a natsbus.Publisher
// in atomic batches): the outbox then keeps up to its window of events in
// flight and releases each from its spool only once it was published.
type BulkPublisher interface {
	NewPublisher(ctx context.Context, o natsbus.PublisherOptions) (*natsbus.Publisher, error)
}

// bulkWindow bounds the events an Outbox has in flight with a
// BulkPublisher.
const bulkWindow = 4096

// bulkDrain bounds the wait, once the outbox stops, for the
// acknowledgements of the events in flight (those that do not come leave
// their events in the spool, published again by the next run).
const bulkDrain = 5 * time.Second

// flight is an event handed out to the bulk publisher.
type flight struct {
	it      item
	settled bool
	dropped bool  // not published, and counted so: released in its turn
	err     error // the publisher's; nil once published (or dropped)
}

// bulkRun is Run with a BulkPublisher: it hands events out in order, up
// to bulkWindow in flight, and releases from the spool the oldest ones
// once they are published; an event is never released before. After a
// failure it waits for every event in flight, then hands them all out
// again from the oldest not published, in order, after a backoff (those
// published after it are published again: their ids make the stream drop
// the copies). Once it stops, it waits up to bulkDrain for the
// acknowledgements under way; events that get none stay in the spool.
// Its loop runs on one goroutine; the publisher's acknowledgements come on
// others, through settle.
type bulkRun struct {
	o   *Outbox
	pub *natsbus.Publisher

	mu        sync.Mutex // guards inFlight, unsettled and the flights
	inFlight  []*flight
	unsettled int
	wake      chan struct{} // an event settled

	// The loop's own.
	delay  retry.Backoff
	outage time.Time // when the failure under way began; zero: none
}

// runBulk is Run with bp.
func (o *Outbox) runBulk(ctx context.Context, bp BulkPublisher) error {
	// One batch awaits its acknowledgement at a time: a batch sent again
	// (a NATS node killed under it) then comes before the next one, not
	// after it, so each minion's events stay in order in the stream
	// (reactord-bench soak saw events stored after later ones of their
	// minion with several in flight). Batches still gather while one is
	// in flight.
	pub, err := bp.NewPublisher(ctx, natsbus.PublisherOptions{How: natsbus.Event, Logger: o.log, InFlight: 1})
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	r := &bulkRun{o: o, pub: pub, wake: make(chan struct{}, 1), delay: o.backoff()}
	return r.run(ctx)
}

// backoff is the outbox's retry schedule, from the start.
func (o *Outbox) backoff() retry.Backoff {
	return retry.Backoff{Min: o.minDelay, Max: o.maxDelay}
}

// run hands out events until ctx ends.
func (r *bulkRun) run(ctx context.Context) error {
	o := r.o
	for {
		o.takeLost()
		if ctx.Err() != nil {
			return r.stop()
		}
		if failed := r.release(); failed != nil {
			if !r.recover(ctx, failed) {
				return r.stop()
			}
			continue
		}
		r.mu.Lock()
		full := len(r.inFlight) >= bulkWindow
		r.mu.Unlock()
		var it item
		ok := false
		if !full {
			it, ok = o.spool.next()
		}
		if !ok {
			select {
			case <-ctx.Done():
			case <-r.wake:
			case <-o.spool.ready:
			}
			continue
		}
		r.handOut(ctx, it)
	}
}

// handOut gives one event to the publisher, or drops it in its turn when
// it cannot be made to fit.
func (r *bulkRun) handOut(ctx context.Context, it item) {
	f := &flight{it: it}
	body, publishable := r.o.prepare(it)
	r.mu.Lock()
	r.inFlight = append(r.inFlight, f)
	if publishable {
		r.unsettled++
	} else {
		f.settled, f.dropped = true, true
	}
	r.mu.Unlock()
	if !publishable {
		return
	}
	done := func(err error) { r.settle(f, len(body), err) }
	m := natsbus.Msg{Tag: it.tag, Body: body, Meta: natsbus.Meta{MsgID: it.msgID}}
	if err := r.pub.Publish(ctx, m, done); err != nil {
		done(err)
	}
}

// settle records the publisher's answer for f (size: its body's bytes).
func (r *bulkRun) settle(f *flight, size int, err error) {
	r.mu.Lock()
	if err != nil && r.o.tooBig(f.it, size, err) {
		f.dropped, err = true, nil
	}
	f.settled, f.err = true, err
	r.unsettled--
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// release takes the settled events at the head out of the spool and
// returns the failure that stops it, if any.
func (r *bulkRun) release() error {
	r.mu.Lock()
	n, published := 0, int64(0)
	var failed error
	for _, f := range r.inFlight {
		if !f.settled {
			break
		}
		if f.err != nil {
			failed = f.err
			break
		}
		n++
		if !f.dropped {
			published++
		}
	}
	r.inFlight = r.inFlight[n:]
	r.mu.Unlock()
	if n == 0 {
		return failed
	}
	r.o.stats.Published.Add(published)
	if err := r.o.spool.release(n); err != nil {
		r.o.log.Error(msgSpoolRelease, "error", err)
	}
	if published > 0 && !r.outage.IsZero() {
		r.o.backAfter(r.outage, 0)
		r.outage, r.delay = time.Time{}, r.o.backoff()
	}
	return failed
}

// recover handles the failure of the oldest event in flight: it lets
// every event in flight settle, then starts again from the oldest not
// published, after a backoff. false: ctx ended meanwhile.
func (r *bulkRun) recover(ctx context.Context, failed error) bool {
	r.mu.Lock()
	head := r.inFlight[0].it
	r.mu.Unlock()
	r.o.stats.PublishErrors.Add(1)
	if r.outage.IsZero() {
		r.outage = time.Now()
		r.o.outageBegins(head, failed)
	}
	if !r.settled(ctx, nil) {
		return false
	}
	_ = r.release()
	r.mu.Lock()
	r.inFlight = nil
	r.mu.Unlock()
	r.o.spool.rewind()
	return retry.Sleep(ctx, r.delay.Next())
}

// settled waits until no event is in flight, or until ctx ends or the
// deadline (nil: none) passes.
func (r *bulkRun) settled(ctx context.Context, deadline <-chan time.Time) bool {
	for {
		r.mu.Lock()
		n := r.unsettled
		r.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		}
	}
}

// stop waits up to bulkDrain for the acknowledgements under way, releases
// what they published, puts the rest back in the spool for the next run,
// and closes the publisher (failing what still waits).
func (r *bulkRun) stop() error {
	t := time.NewTimer(bulkDrain)
	defer t.Stop()
	r.settled(context.Background(), t.C)
	_ = r.release()
	r.o.spool.rewind()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.pub.Close(ctx)
	return nil
}
