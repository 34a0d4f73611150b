// Package consume takes events from the JetStream event stream: one
// durable consumer the replicas share, or partitions by minion that the
// replicas lease, each handing every message to the daemon with the
// function that settles it.
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/internal/tasks"
	"github.com/reactord/reactord/natsbus"
)

// Consumer is a durable JetStream consumption that repairs itself: when
// its stream or consumer disappears (the server restarted with an empty
// JetStream store, someone deleted REACTORD_EVENTS or the consumer), it
// notices — from the client's consume errors and a periodic check — then
// logs it loudly, recreates both and goes on. Stop ends the delivering;
// Close, once the handler's messages are settled, ends the rest and
// waits for every goroutine it started.
type Consumer struct {
	c       *natsbus.Conn
	o       natsbus.StreamOptions
	handler func(*natsbus.Message)
	log     *slog.Logger

	mu       sync.Mutex
	cc       jetstream.ConsumeContext
	ccClosed <-chan struct{} // cc.Closed(), taken before any stop

	healthy    atomic.Bool
	recreated  atomic.Int64
	restarted  atomic.Int64
	progressed atomic.Int64
	trimmed    atomic.Int64
	passedOver atomic.Int64

	// Trimming (trim.go): the stream's Trimmer, nil when it is not
	// trimmed (set by start); the events acknowledged here that the
	// stream may still hold, by stream sequence, with the time they were
	// stored; whether one was acknowledged since the last trim.
	trimmer    atomic.Pointer[natsbus.Trimmer]
	relook     atomic.Bool // the last look-up failed: trim looks again
	ackedMu    sync.Mutex
	ackedAbove map[uint64]int64
	ackedNew   atomic.Bool
	trimKick   chan struct{} // an acknowledgement: trim looks at the floor
	warnedFull atomic.Bool
	trims      atomic.Int64 // trim rounds that purged (or tried to): what a test waits on

	// lastAck is the acknowledgement subject of the last message this
	// Consumer acknowledged since ConfirmAcks last confirmed one, nil if
	// none.
	lastAck atomic.Pointer[string]

	// held are the messages delivered to this client and neither
	// acknowledged nor refused yet, by a local number; queue are those of
	// them not handed to handler yet, oldest first. The client's callback
	// only queues (so the client never holds messages of its own that
	// nobody tracks), deliver hands them to handler in order, and
	// progress keeps the held ones from being redelivered while they wait.
	heldMu  sync.Mutex
	held    map[uint64]*heldMsg
	heldSeq uint64
	queue   []*natsbus.Message
	queued  chan struct{}
	stopped bool

	// Touched by supervise (and Consume, before it starts) only.
	warnedParts   bool
	lastDelivered uint64
	stalled       int
	kick          chan struct{}
	stop          chan struct{}
	done          chan struct{}
	stopOnce      sync.Once

	// end ends progress (Close); tasks counts supervise, deliver,
	// progress and the client's callbacks under way, for Close to wait
	// for.
	end       chan struct{}
	closeOnce sync.Once
	tasks     tasks.Set
}

// Consume creates the stream and the shared durable consumer when absent and
// delivers every message to handler, which must Ack or Nak it. Replicas
// calling Consume with the same options share the work. The returned
// Consumer keeps the stream and consumer in place (see Consumer).
func New(ctx context.Context, c *natsbus.Conn, o natsbus.StreamOptions, handler func(*natsbus.Message)) (*Consumer, error) {
	o.Defaults()
	k := &Consumer{c: c, o: o, handler: handler, log: o.Logger, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		held: map[uint64]*heldMsg{}, queued: make(chan struct{}, 1), end: make(chan struct{}), ackedAbove: map[uint64]int64{},
		trimKick: make(chan struct{}, 1)}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if err := k.startRetrying(ctx); err != nil {
		return nil, err
	}
	k.healthy.Store(true)
	k.tasks.Go(k.supervise)
	k.tasks.Go(k.deliver)
	if o.Progress {
		k.tasks.Go(k.progress)
	}
	k.tasks.Go(k.trim)
	return k, nil
}

// startRetrying starts consuming, retrying with backoff until ctx ends
// while JetStream cannot create the stream or the consumer yet (a cluster
// electing a leader, a stream whose replicas are being added):
// natsbus.Ensure logs the wait and its end.
func (k *Consumer) startRetrying(ctx context.Context) error {
	return natsbus.Ensure(ctx, k.log, "stream "+k.o.Stream+" and its consumer "+k.o.Durable, k.start)
}

// heldMsg is a message this client holds unacknowledged, and when the
// server last heard of it (its delivery or a progress acknowledgement).
type heldMsg struct {
	m     jetstream.Msg
	since time.Time
}

// receive is the client's callback: it records the message as held and
// queues it for deliver, without waiting.
func (k *Consumer) receive(m jetstream.Msg) {
	now := time.Now()
	seq, ts := streamSeq(m)
	if k.ackedHere(seq, ts) {
		// A consumer recreated over the trimmed stream delivers from its
		// start: this event reacted here already.
		k.ack(m)
		if k.passedOver.Add(1) == 1 {
			k.log.Info("events this replica had acknowledged delivered again: passed over",
				"stream", k.o.Stream, "seq", seq,
				"detail", "the consumer was recreated over the trimmed stream; acknowledged again without reacting",
				"metric", "reactord_jetstream_passed_over_total")
		}
		return
	}
	k.heldMu.Lock()
	if k.stopped {
		k.heldMu.Unlock()
		_ = m.Nak()
		return
	}
	k.heldSeq++
	n := k.heldSeq
	k.held[n] = &heldMsg{m: m, since: now}
	var once sync.Once
	settle := func(f func() error) error {
		err := errors.New("message already acknowledged or refused")
		once.Do(func() {
			k.heldMu.Lock()
			delete(k.held, n)
			k.heldMu.Unlock()
			err = f()
		})
		return err
	}
	msg := natsbus.NewMessage(m.Subject(), m.Data(), m.Headers(), now, seq, natsbus.Settlers{
		Ack: func() error {
			return settle(func() error {
				k.noteAcked(seq, ts) // before the acknowledgement: a trim that sees it sees this too
				return k.ack(m)
			})
		}, Nak: func() error { return settle(func() error { return nakBackoff(m) }) }})
	k.queue = append(k.queue, msg)
	k.heldMu.Unlock()
	select {
	case k.queued <- struct{}{}:
	default:
	}
}

// ack acknowledges m, without waiting for the server's reply, and
// records it for ConfirmAcks.
func (k *Consumer) ack(m jetstream.Msg) error {
	err := m.Ack()
	if err == nil {
		r := m.Reply()
		k.lastAck.Store(&r)
	}
	return err
}

// ConfirmAcks waits until the server has applied every acknowledgement
// this Consumer sent before the call, or ctx ends. Acknowledgements go out
// without waiting for a reply, and a server that shuts down (the daemon's
// embedded one, right after the daemon's connection closes) drops those
// it has received but not applied yet: their events came again after
// AckWait, and reacted twice. It asks for a reply to a progress
// acknowledgement of the last message acknowledged: the server applies
// a consumer's acknowledgements in the order they came, and one for a
// message no longer pending changes nothing. Close calls it; the daemon
// calls it again before closing the connection, for acknowledgements
// sent after Close (events whose audit records were written last). On a
// clustered consumer (replicas) the reply means the leader received them
// in order and proposed them to its followers, not that they were applied:
// the daemon never stops a cluster's server, which applies them after the
// daemon has gone.
func (k *Consumer) ConfirmAcks(ctx context.Context) error {
	last := k.lastAck.Swap(nil)
	if last == nil {
		return nil
	}
	if _, err := k.c.NATS().RequestWithContext(ctx, *last, []byte("+WPI")); err != nil {
		k.lastAck.CompareAndSwap(nil, last)
		return fmt.Errorf("confirming the acknowledgements sent to JetStream consumer %s on stream %s: %w", k.o.Durable, k.o.Stream, err)
	}
	return nil
}

// streamSeq is a message's stream sequence and the time it was stored
// (nanoseconds), zeros when unknown.
func streamSeq(m jetstream.Msg) (seq uint64, ts int64) {
	md, err := m.Metadata()
	if err != nil {
		return 0, 0
	}
	return md.Sequence.Stream, md.Timestamp.UnixNano()
}

// deliver hands the queued messages to handler, one at a time and in
// order, until Stop.
func (k *Consumer) deliver() {
	for {
		k.heldMu.Lock()
		if k.stopped {
			k.heldMu.Unlock()
			return
		}
		var msg *natsbus.Message
		if len(k.queue) > 0 {
			msg = k.queue[0]
			k.queue[0] = nil
			k.queue = k.queue[1:]
		}
		k.heldMu.Unlock()
		if msg != nil {
			k.handler(msg)
			continue
		}
		select {
		case <-k.queued:
		case <-k.stop:
			return
		}
	}
}

// progress (with natsbus.StreamOptions.Progress) tells the server, every quarter
// of AckWait, that each message
// held for half of AckWait or more is still being worked on (a progress
// acknowledgement resets its AckWait), so that a backlog waiting in this
// replica's lanes, an event a debounce holds and an event waiting for its
// audit records are not redelivered to another replica while this one is
// alive. It runs until the connection closes, Close, or Stop was called
// and nothing is held any more (the daemon's drain acknowledges after
// Stop).
func (k *Consumer) progress() {
	every := max(k.o.AckWait/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var due []jetstream.Msg
	for {
		select {
		case <-k.end:
			return
		case <-t.C:
		}
		if k.c.NATS().IsClosed() {
			return
		}
		now := time.Now()
		due = due[:0]
		k.heldMu.Lock()
		if k.stopped && len(k.held) == 0 {
			k.heldMu.Unlock()
			return
		}
		for _, h := range k.held {
			if now.Sub(h.since) >= k.o.AckWait/2 {
				h.since = now
				due = append(due, h.m)
			}
		}
		k.heldMu.Unlock()
		if !k.c.NATS().IsConnected() {
			continue
		}
		for _, m := range due {
			if m.InProgress() == nil {
				k.progressed.Add(1)
			}
		}
	}
}

// Progressed returns how many progress acknowledgements were sent for
// messages held longer than half of AckWait.
func (k *Consumer) Progressed() int64 { return k.progressed.Load() }

// Held returns how many delivered messages this client holds neither
// acknowledged nor refused.
func (k *Consumer) Held() int {
	k.heldMu.Lock()
	defer k.heldMu.Unlock()
	return len(k.held)
}

// Healthy reports whether the stream and consumer were in place at the last
// check.
func (k *Consumer) Healthy() bool { return k.healthy.Load() }

// Recreated returns how many times the stream or consumer was found missing
// and recreated.
func (k *Consumer) Recreated() int64 { return k.recreated.Load() }

// Stop stops delivering messages: those received but not handed to the
// handler yet are refused (Nak) so that another replica gets them at once;
// those handed to it keep their progress acknowledgements until they are
// acknowledged or refused. It does not wait for a handler call under way.
// It is safe to call twice.
func (k *Consumer) Stop() {
	k.stopOnce.Do(func() {
		close(k.stop)
		<-k.done
		k.mu.Lock()
		cc, closed := k.cc, k.ccClosed
		k.mu.Unlock()
		if cc != nil {
			stopConsuming(&k.tasks, cc, closed)
		}
		k.heldMu.Lock()
		k.stopped = true
		queue := k.queue
		k.queue = nil
		k.heldMu.Unlock()
		for _, msg := range queue {
			_ = msg.Nak()
		}
	})
}

// Close (after Stop, once the handler's messages are settled or given
// up on) confirms the acknowledgements sent (ConfirmAcks), ends what Stop
// leaves running, the progress acknowledgements, and waits until every
// goroutine the Consumer started and every client callback into it has
// returned, a handler call under way included. It is safe to call twice.
func (k *Consumer) Close() {
	k.Stop()
	k.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		if err := k.ConfirmAcks(ctx); err != nil {
			k.log.Warn("the NATS server did not confirm this replica's last acknowledgements", "err", err,
				"detail", "if the server stops before it applies them, their events react again after the acknowledgement wait")
		}
		cancel()
		// The last trim sees the floor they moved.
		close(k.end)
		_ = k.tasks.Close(context.Background()) // no deadline: waits for every one
	})
}

// start (re)creates the stream and consumer and starts consuming.
func (k *Consumer) start(ctx context.Context) error {
	o := k.o
	if err := k.c.EnsureStream(ctx, o); err != nil {
		return err
	}
	cons, err := k.c.JetStream().CreateOrUpdateConsumer(ctx, o.Stream, o.SharedConsumer())
	if err != nil {
		return fmt.Errorf("creating consumer %s: %w", o.Durable, err)
	}
	k.lookUpTrimmer(ctx)
	k.warnPartitionConsumers(ctx)
	receive := func(m jetstream.Msg) {
		if !k.tasks.Enter() {
			_ = m.Nak() // closed: another replica takes it at once
			return
		}
		defer k.tasks.Leave()
		k.receive(m)
	}
	cc, err := cons.Consume(receive, jetstream.PullMaxMessages(min(o.MaxAckPending, 1024)), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !k.tasks.Enter() {
			return
		}
		defer k.tasks.Leave()
		if lost(err) {
			select {
			case k.kick <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", o.Durable, err)
	}
	closed := cc.Closed()
	k.mu.Lock()
	old, oldClosed := k.cc, k.ccClosed
	k.cc, k.ccClosed = cc, closed
	k.mu.Unlock()
	if old != nil {
		stopConsuming(&k.tasks, old, oldClosed)
	}
	return nil
}

// warnPartitionConsumers logs, once, the partition consumers (left by
// replicas that ran with --partitions) on the stream: with interest
// retention the stream keeps every event until they acknowledged it,
// which they never do while no replica runs with partitions.
func (k *Consumer) warnPartitionConsumers(ctx context.Context) {
	if k.warnedParts {
		return
	}
	k.warnedParts = true
	sets, err := consumerSets(k.c, ctx, k.o.Stream, k.o.Durable)
	if err != nil {
		return
	}
	for name, g := range sets {
		if name == k.o.Durable {
			continue
		}
		slices.Sort(g.names)
		k.log.Warn("consumers of replicas with --partitions remain on the stream",
			"stream", k.o.Stream, "consumers", strings.Join(g.names, ","),
			"detail", "the stream keeps every event for them until MaxAge",
			"fix", "delete them (nats consumer rm) once no replica runs with partitions, or start the replicas with partitions again")
	}
}

// lost tells the consume errors that may mean the consumer or its stream
// is gone; supervise checks before acting.
func lost(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrNoHeartbeat)
}

// recreateGrace is how long a stream or consumer is seen missing before
// it is recreated. A stream deleted by hand is noticed within
// milliseconds (the consume error kicks the check), while nats-server
// (2.15) is still tearing the old one down: recreated that soon, the
// create failed ("rename .../meta.inf.tmp: no such file or directory", the
// old directory moved away under the new one) or the new stream took no
// message, every publish timing out — 29 failed creates and a stuck
// stream within about 30 delete-and-recreate rounds here, none in 150
// rounds with this wait. Once, such a create panicked inside the server,
// which ends the process of an embedded one.
const recreateGrace = time.Second

// supervise checks every CheckEvery, and at once on a consume error that
// may mean a loss, that the consumer exists; when it does not, it
// recreates the stream and the consumer.
func (k *Consumer) supervise() {
	defer close(k.done)
	t := time.NewTicker(k.o.CheckEvery)
	defer t.Stop()
	var missingSince time.Time
	failures := 0
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		case <-k.kick:
		}
		if !k.c.NATS().IsConnected() {
			continue // the connection's own log covers it
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err := k.c.JetStream().Consumer(ctx, k.o.Stream, k.o.Durable)
		cancel()
		if err == nil {
			k.checkStall(cons.CachedInfo())
			continue
		}
		if !(errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
			continue // the check itself failed (timeout): try again later
		}
		if missingSince.IsZero() {
			missingSince = time.Now()
			k.healthy.Store(false)
			k.log.Error("JetStream stream or consumer missing: recreating it",
				"stream", k.o.Stream, "consumer", k.o.Durable, "err", err,
				"detail", "no event can be delivered until it is recreated")
		}
		if wait := recreateGrace - time.Since(missingSince); wait > 0 {
			select {
			case <-k.stop:
				return
			case <-time.After(wait):
			}
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err = k.start(ctx)
		cancel()
		if err != nil {
			failures++
			if failures == 1 || failures%60 == 0 {
				k.log.Error("recreating the JetStream stream and consumer failed; retrying", "stream", k.o.Stream, "attempts", failures, "err", err)
			}
			continue
		}
		k.recreated.Add(1)
		k.healthy.Store(true)
		k.log.Error("JetStream stream and consumer recreated",
			"detail", "events published to the stream while it was missing are lost unless their publisher held them (the bridge does)",
			"stream", k.o.Stream, "consumer", k.o.Durable, "missing_for", time.Since(missingSince).Round(time.Millisecond).String(), "times_recreated", k.recreated.Load())
		missingSince, failures = time.Time{}, 0
	}
}

// checkStall restarts consumption when the consumer is in place but this
// client no longer pulls from it: the stream holds events for it, none is
// in flight and none was delivered since the last two checks. (A busy
// daemon always has events in flight, so it is never taken for stalled.)
func (k *Consumer) checkStall(info *jetstream.ConsumerInfo) {
	if info == nil {
		return
	}
	if info.NumPending == 0 || info.NumAckPending > 0 || info.Delivered.Stream != k.lastDelivered {
		k.lastDelivered, k.stalled = info.Delivered.Stream, 0
		return
	}
	k.stalled++
	if k.stalled < 2 {
		return
	}
	k.stalled = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.start(ctx); err != nil {
		k.log.Error("JetStream consumption stalled; restarting it failed, retrying", "stream", k.o.Stream, "pending", info.NumPending, "err", err)
		return
	}
	k.restarted.Add(1)
	k.log.Warn("JetStream consumption stalled: restarted it",
		"stream", k.o.Stream, "consumer", k.o.Durable, "pending", info.NumPending,
		"detail", "events waiting, none delivered or in flight")
}

// nakBackoff asks for redelivery: at once the first time, then after a
// delay that doubles with each delivery (250ms up to 30s), so that an
// event that cannot be handled yet does not spin.
func nakBackoff(m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil || md.NumDelivered <= 1 {
		return m.Nak()
	}
	return m.NakWithDelay(nakDelay(md.NumDelivered))
}

// nakDelay is the redelivery delay after the n-th delivery (n ≥ 2).
func nakDelay(n uint64) time.Duration {
	return retry.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second}.After(int(min(n-1, 64)))
}
