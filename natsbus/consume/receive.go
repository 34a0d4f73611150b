package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/natsbus"
)

// receive takes one delivery of session: in order, it hands the
// partition's events to the handler and marks the others handled; a
// redelivery of an event already taken is passed over (acknowledged again
// if it is handled), and so is an event this replica handled in an
// earlier session of the partition; a missed delivery (the consumer
// sequence jumps) resets the partition. A delivery of an earlier session
// (the client hands a stopped subscription's messages on until it has
// unsubscribed) is left alone: its consumer sequence numbers another
// session's deliveries.
func (r *partRun) receive(session int, m jetstream.Msg) {
	r.p.received.Add(1)
	md, err := m.Metadata()
	if err != nil {
		return
	}
	p := r.p
	r.mu.Lock()
	if r.halted || r.pausing || session != r.session {
		r.mu.Unlock()
		return // left pending: the next session or owner starts at the floor
	}
	if want := r.lastDseq + 1; md.Sequence.Consumer != want {
		r.mu.Unlock()
		r.resync(fmt.Sprintf("delivery %d came when %d was due", md.Sequence.Consumer, want))
		return
	}
	r.lastDseq = md.Sequence.Consumer
	if md.Sequence.Stream < r.next {
		// Taken already in this session: the acknowledgement wait ran
		// out while the handler held it, or the server lost the
		// acknowledgement (sent to a consumer leader that died). Once
		// handled it is acknowledged again: else the server keeps it
		// pending and, with MaxAckPending of them, sends only these
		// again, forever, and none of the later events.
		handled := len(r.taken) == 0 || md.Sequence.Stream < r.taken[0].seq
		r.mu.Unlock()
		p.ignored.Add(1)
		if handled {
			_ = m.Ack() // AckAll: this event and those before it, all handled
		}
		return
	}
	r.next = md.Sequence.Stream + 1
	r.took.Store(time.Now().UnixNano())
	t := &takenMsg{m: m, seq: md.Sequence.Stream, session: r.session, since: time.Now()}
	r.taken = append(r.taken, t)
	if r.handled[t.seq] || t.seq <= r.floorSeq {
		// Handled in an earlier session (a resync started this one
		// from the floor, below it, or from below the floor this run
		// reached, when the server had not recorded its last
		// acknowledgement yet): in order then, not handled again.
		delete(r.handled, t.seq)
		t.done = true
		r.advance()
		r.mu.Unlock()
		p.ignored.Add(1)
		return
	}
	r.inflight++
	r.mu.Unlock()
	var once sync.Once
	ack := func() error {
		err := errors.New("message already acknowledged or refused")
		once.Do(func() { err = nil; r.settleOne(t, true) })
		return err
	}
	nak := func() error {
		err := errors.New("message already acknowledged or refused")
		once.Do(func() {
			err = nil
			r.settleOne(t, false)
			r.resync("the handler refused an event (it starts again from the acknowledgement floor)")
		})
		return err
	}
	msg := natsbus.NewMessage(m.Subject(), m.Data(), m.Headers(), t.since, t.seq, natsbus.Settlers{Ack: ack, Nak: nak, Moved: r.lost.Load})
	r.handing.Add(1)
	defer r.handing.Add(-1)
	p.handler(msg) // blocks while the handler's lanes are full
}

// settleOne records t as handled (done) or refused, and moves the floor
// over the longest handled prefix.
func (r *partRun) settleOne(t *takenMsg, done bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	if t.session != r.session {
		// A past session's: its events come again, and those handled
		// are passed over then.
		if done {
			r.handled[t.seq] = true
		}
		return
	}
	t.done = done
	r.advance()
}

// advance moves the floor over the longest handled prefix of the events
// taken (r.mu held).
func (r *partRun) advance() {
	n := 0
	for n < len(r.taken) && r.taken[n].done {
		r.floor = r.taken[n].m
		r.floorSeq = max(r.floorSeq, r.taken[n].seq)
		n++
	}
	if n > 0 {
		clear(r.taken[:n])
		r.taken = r.taken[n:]
		r.backoff = 0
		select {
		case r.moved <- struct{}{}:
		default:
		}
	}
}

// acks acknowledges the floor (AckAll: every event up to it) when it
// moves, at most every ackEvery, and every tickEvery (or more often,
// for a short AckWait or CheckEvery) checks the lease,
// the pin, a drained partition and a stall, and sends progress
// acknowledgements for the events handed to the handler for half of
// AckWait or more, until the partition is halted and settled. An idle
// partition wakes only for the checks.
func (r *partRun) acks() {
	every := max(r.p.o.AckWait/4, 10*time.Millisecond)
	t := time.NewTicker(min(tickEvery, every, max(r.p.o.CheckEvery/2, 10*time.Millisecond)))
	defer t.Stop()
	later := time.NewTimer(ackEvery)
	later.Stop()
	var lastAck time.Time
	waiting := false // later is set
	lastProgress, lastCheck, lastEmpty := time.Now(), time.Now(), time.Now()
	stalled := 0
	for {
		select {
		case <-r.quit:
			later.Stop()
			r.ackFloor()
			return
		case <-r.moved:
			if d := ackEvery - time.Since(lastAck); d > 0 {
				if !waiting {
					waiting = true
					later.Reset(d)
				}
				continue
			}
			r.ackFloor()
			lastAck = time.Now()
			continue
		case <-later.C:
			waiting = false
			r.ackFloor()
			lastAck = time.Now()
			continue
		case <-t.C:
		}
		r.ackFloor()
		r.repin()
		if r.overdue() {
			r.p.lose(r, "its lease could not be renewed in time")
		}
		if r.u.old && time.Since(lastEmpty) >= 250*time.Millisecond {
			lastEmpty = time.Now()
			if r.empty() {
				r.p.drained(r, "every event handled and acknowledged")
				return
			}
		}
		if time.Since(lastCheck) >= r.p.o.CheckEvery {
			lastCheck = time.Now()
			if stalled = r.checkStall(stalled); stalled >= 2 {
				stalled = 0
				r.resync("stalled: events wait in the stream but no new one was delivered for two checks")
			}
		}
		if time.Since(lastProgress) < every {
			continue
		}
		lastProgress = time.Now()
		var due []jetstream.Msg
		r.mu.Lock()
		for _, tm := range r.taken {
			if !tm.done && time.Since(tm.since) >= r.p.o.AckWait/2 {
				tm.since = time.Now()
				due = append(due, tm.m)
			}
		}
		r.mu.Unlock()
		for _, m := range due {
			_ = m.InProgress()
		}
	}
}

// empty reports that a partition being drained has nothing left: nothing
// taken and not settled here, nothing pending or unacknowledged on the
// server.
func (r *partRun) empty() bool {
	r.mu.Lock()
	busy := r.halted || r.pausing || r.cc == nil || len(r.taken) > 0 || r.inflight > 0
	r.mu.Unlock()
	if busy {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	if err != nil {
		return false
	}
	info := cons.CachedInfo()
	return info.NumPending == 0 && info.NumAckPending == 0
}

// checkStall returns stalled+1 when the partition's consumer has events
// waiting for delivery but no new one was taken since the last check (a
// pull lost with a node, a consumer leader that does not deliver, or one
// that only sends events taken already again), else 0.
func (r *partRun) checkStall(stalled int) int {
	r.mu.Lock()
	busy := r.halted || r.pausing || r.cc == nil
	r.mu.Unlock()
	// A delivery blocked in the handler (its lanes full) is a backlog,
	// not a stall: a resync then would only deliver again what waits.
	busy = busy || r.handing.Load() > 0
	if busy || time.Since(time.Unix(0, r.took.Load())) < r.p.o.CheckEvery {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	if err != nil || cons.CachedInfo().NumPending == 0 {
		return 0
	}
	return stalled + 1
}

// ackEvery is the shortest time between two acknowledgements of a
// partition's floor; tickEvery is how often acks checks the lease, the
// pin, a drain and a stall at most.
const (
	ackEvery  = 20 * time.Millisecond
	tickEvery = 100 * time.Millisecond
)

func (r *partRun) ackFloor() {
	r.mu.Lock()
	f := r.floor
	if f == nil || f == r.acked {
		r.mu.Unlock()
		return
	}
	r.acked = f
	r.mu.Unlock()
	if f.Ack() == nil {
		if md, err := f.Metadata(); err == nil {
			r.p.noteAcked(md.Sequence.Stream)
		}
	}
}
