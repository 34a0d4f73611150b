package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// partRun is one held partition: its consumption session, the events
// taken from it in stream order, and their acknowledgement.
type partRun struct {
	p       *Partitioned
	u       *unit
	i       int          // u.i
	renewed atomic.Int64 // when the lease was last renewed (Unix ns, the renewal's start)
	lost    atomic.Bool  // the lease is gone: events taken are not to be handled here
	took    atomic.Int64 // when an event was last taken, or the session began (Unix ns): the stall check's progress
	handing atomic.Int32 // deliveries being handed to the handler (blocked while its lanes are full)

	mu       sync.Mutex
	cc       jetstream.ConsumeContext
	ccClosed <-chan struct{} // cc.Closed(), taken before any stop
	halted   bool            // no more events: lost, handed over or stopping
	pausing  bool            // a resync is under way: events are passed over
	session  int             // counts the sessions (resets)
	next     uint64
	lastDseq uint64
	taken    []*takenMsg // not acknowledged yet, in stream order
	// handled holds the stream sequences of events handled in an
	// earlier session of this run and not acknowledged: a session
	// started from the floor below them passes them over.
	handled map[uint64]bool
	// floorSeq is the highest stream sequence the floor of this run
	// reached: every event of the partition up to it was handled here or
	// acknowledged before the run began. A session that the server
	// started below it (the last acknowledgements not recorded yet when
	// the reset came) passes those events over.
	floorSeq uint64
	// created is the creation time of the stream whose sequences
	// floorSeq and handled hold: a stream made anew numbers its events
	// from 1 again.
	created  time.Time
	inflight int // handed to the handler, not settled
	floor    jetstream.Msg
	acked    jetstream.Msg
	backoff  time.Duration
	repinned int // the session whose pin was taken again (repin)
	quit     chan struct{}
	moved    chan struct{} // the floor moved: acks acknowledges it
}

type takenMsg struct {
	m       jetstream.Msg
	seq     uint64
	session int
	since   time.Time
	done    bool
}

func newPartRun(p *Partitioned, u *unit) *partRun {
	return &partRun{p: p, u: u, i: u.i, handled: map[uint64]bool{}, quit: make(chan struct{}), moved: make(chan struct{}, 1)}
}

func (r *partRun) renewedAt() time.Time { return time.Unix(0, r.renewed.Load()) }

// overdue reports that the lease was last renewed two thirds of its time
// ago or more: another replica may take it a third of its time later.
func (r *partRun) overdue() bool { return time.Since(r.renewedAt()) >= r.p.o.LeaseTTL*2/3 }

// start begins a session on the partition: it takes the pin, resets the
// consumer to its acknowledgement floor and pulls. On failure it retries
// until the partition is halted.
func (r *partRun) start(change string) {
	p := r.p
	if !p.tasks.Go(r.acks) {
		return // released
	}
	if !r.sessionRetrying("partition: starting its consumption failed; retrying") || r.isHalted() {
		return // halted, or a former number's partition found drained
	}
	p.log.Info("partition "+change+": consuming it from its acknowledgement floor", "consumer", r.u.name, "replica", p.o.Replica, "from_seq", r.nextSeq())
	p.changed(change, r.i)
}

// sessionRetrying starts a session (session0), retrying every 250 ms
// until one starts (true) or the partition is halted or quits (false);
// failures are logged as failed, the first and every twentieth.
func (r *partRun) sessionRetrying(failed string) bool {
	for attempt := 1; !r.isHalted(); attempt++ {
		err := r.session0()
		if err == nil {
			return true
		}
		if r.isHalted() {
			return false
		}
		if attempt == 1 || attempt%20 == 0 {
			r.p.log.Warn(failed, "consumer", r.u.name, "attempts", attempt, "err", err)
		}
		select {
		case <-r.quit:
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}

func (r *partRun) isHalted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.halted
}

func (r *partRun) nextSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// session0 unpins the consumer, resets it to its acknowledgement floor
// (dropping what the server thinks is pending elsewhere) and starts
// pulling with a fresh pin.
//
// Each request has a short timeout of its own: a request that reaches a
// consumer's former leader while a cluster elects a new one is never
// answered, and the caller retries at once.
func (r *partRun) session0() error {
	p := r.p
	name := r.u.name
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	s, err := p.c.JetStream().Stream(ctx, p.o.Stream)
	cancel()
	if err != nil {
		return fmt.Errorf("stream %s: %w", p.o.Stream, err)
	}
	if gone, err := r.present(s); gone || err != nil {
		return err
	}
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	_ = s.UnpinConsumer(ctx, name, PartitionGroup) // none pinned: an error
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	res, err := r.reset(ctx, s, name)
	cancel()
	if errors.Is(err, jetstream.ErrConsumerNotFound) && r.u.old {
		p.drained(r, "its consumer is gone")
		return nil
	}
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// No wait lines from Ensure here: a partition's session
		// recovering is not the start waiting for a cluster; a failure
		// is this session's error, which its caller reports.
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		if err = p.ensureConsumers(ctx, nil); err == nil {
			res, err = r.reset(ctx, s, name)
		}
		cancel()
	}
	if err != nil {
		return fmt.Errorf("resetting consumer %s to its acknowledgement floor: %w", name, err)
	}
	if p.o.afterReset != nil {
		p.o.afterReset(name)
	}
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := s.Consumer(ctx, name) // a new handle: no pin id of a past session
	if err != nil {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	var created time.Time // zero when unknown: what this run handled is forgotten
	if info, err := s.Info(ctx); err == nil {
		created = info.Created
	}
	r.mu.Lock()
	if r.halted {
		r.mu.Unlock()
		return nil
	}
	r.forgetIfAnew(created)
	r.session++
	session := r.session
	r.took.Store(time.Now().UnixNano())
	r.next, r.lastDseq = res.ResetSeq, 0
	for _, t := range r.taken {
		if t.done {
			r.handled[t.seq] = true
		}
	}
	for seq := range r.handled {
		if seq < res.ResetSeq {
			delete(r.handled, seq) // acknowledged: not delivered again
		}
	}
	r.taken, r.floor, r.acked = nil, nil, nil
	r.pausing = false
	r.mu.Unlock()
	return r.consume(cons, session)
}

// reset resets the partition's consumer to its acknowledgement floor
// (a test's resetTo: to the sequence it gives, standing in for a server
// that had not recorded the last acknowledgements yet).
func (r *partRun) reset(ctx context.Context, s jetstream.Stream, name string) (*jetstream.ConsumerResetResponse, error) {
	if f := r.p.o.resetTo; f != nil {
		if seq := f(name); seq > 0 {
			return s.ResetConsumerToSequence(ctx, name, seq)
		}
	}
	return s.ResetConsumer(ctx, name)
}

// forgetIfAnew forgets what this run handled when the stream was created
// at another time than its last session's (r.mu held): a stream made anew,
// or one whose creation could not be read (zero), numbers its events
// otherwise, and passing events over by those numbers could drop new
// events; handling some again cannot. The first session of a run has
// nothing to forget.
func (r *partRun) forgetIfAnew(created time.Time) {
	if created.IsZero() || !created.Equal(r.created) {
		r.floorSeq, r.taken = 0, nil
		clear(r.handled)
		r.created = created
	}
}

// present makes sure the partition's consumer exists before its reset,
// which is not answered for a consumer that is gone: a former number's
// (another replica drained and deleted it) ends the partition (gone);
// another's, deleted with its stream (made anew since) or by hand, is made
// again, from its set's floor.
func (r *partRun) present(s jetstream.Stream) (gone bool, err error) {
	p := r.p
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	_, err = s.Consumer(ctx, r.u.name)
	cancel()
	switch {
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return false, nil // there, or not known yet: the reset tells
	case r.u.old:
		p.drained(r, "its consumer is gone (drained by another replica)")
		return true, nil
	}
	// No wait lines from Ensure here: a partition's session recovering
	// is not the start waiting for a cluster; a failure is this
	// session's error, which its caller reports.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.ensureConsumers(ctx, nil); err != nil {
		return false, fmt.Errorf("making consumer %s again: %w", r.u.name, err)
	}
	return false, nil
}

// consume starts pulling from cons for session; the client's callbacks
// are counted in the partitions' tasks, so that Release waits for those
// under way.
func (r *partRun) consume(cons jetstream.Consumer, session int) error {
	p := r.p
	receive := func(m jetstream.Msg) {
		if !p.tasks.Enter() {
			return // released: left pending for the next owner
		}
		defer p.tasks.Leave()
		r.receive(session, m)
	}
	cc, err := cons.Consume(receive, jetstream.PullPriorityGroup(PartitionGroup), jetstream.PullMaxMessages(min(p.o.MaxAckPending, 1024)),
		jetstream.PullExpiry(p.o.LeaseTTL/2), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !p.tasks.Enter() {
				return
			}
			defer p.tasks.Leave()
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				r.resync("the consumer is gone: " + err.Error())
			}
		}))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", r.u.name, err)
	}
	closed := cc.Closed()
	r.mu.Lock()
	halted := r.halted
	if !halted {
		r.cc, r.ccClosed = cc, closed
	}
	r.mu.Unlock()
	if halted {
		stopConsuming(&p.tasks, cc, closed)
	}
	return nil
}

// halt stops pulling for good.
func (r *partRun) halt() {
	r.mu.Lock()
	if r.halted {
		r.mu.Unlock()
		return
	}
	r.halted = true
	cc, closed := r.cc, r.ccClosed
	r.mu.Unlock()
	if cc != nil {
		stopConsuming(&r.p.tasks, cc, closed)
	}
}

// repinAfter is how long a session waits for its first event, while events
// wait in its consumer, before it takes the pin again (repin): by then the
// pull requests of a former owner have expired (they last LeaseTTL/2).
func (r *partRun) repinAfter() time.Duration { return r.p.o.LeaseTTL/2 + 500*time.Millisecond }

// repin unpins the consumer once per session when the session has
// received nothing for repinAfter while events wait in the consumer.
// nats-server (2.15) gives the pin to the oldest waiting pull request that
// has no pin id before it checks that anyone still listens on it: a former
// owner's last pull, sent just before it stopped, can take the pin and
// keep it for PinnedTTL (twice the lease time) while this session's pulls
// wait. After an unpin the server pins the next pull it serves.
func (r *partRun) repin() {
	r.mu.Lock()
	due := !r.halted && !r.pausing && r.cc != nil && r.lastDseq == 0 && r.repinned != r.session &&
		time.Since(time.Unix(0, r.took.Load())) >= r.repinAfter()
	session := r.session
	if due {
		r.repinned = session
	}
	r.mu.Unlock()
	if !due {
		return
	}
	p := r.p
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	s, err := p.c.JetStream().Stream(ctx, p.o.Stream)
	if err != nil {
		return
	}
	cons, err := s.Consumer(ctx, r.u.name)
	if err != nil || cons.CachedInfo().NumPending == 0 {
		return
	}
	if err := s.UnpinConsumer(ctx, r.u.name, PartitionGroup); err != nil {
		return
	}
	p.log.Info("partition: no event delivered while events wait; unpinned its consumer",
		"detail", "a former owner's last pull may have held the pin",
		"consumer", r.u.name, "replica", p.o.Replica, "waiting", cons.CachedInfo().NumPending, "after", r.repinAfter().String())
}
