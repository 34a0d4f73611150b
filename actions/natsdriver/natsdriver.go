// Package natsdriver is the nats driver: it publishes each reaction on a
// NATS subject for custom executors.
package natsdriver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/natsbus"
)

// DefaultExecPrefix is where the nats driver publishes reactions.
const DefaultExecPrefix = "reactord.exec."

// DefaultFlushTimeout is Driver.FlushTimeout's default.
const DefaultFlushTimeout = 10 * time.Second

// msgUnconfirmed is the line about reactions a flush did not confirm.
const msgUnconfirmed = "nats driver: reactions not confirmed by the server"

// Driver is the `nats` driver: it publishes each reaction, as the JSON
// line {"tag": TAG, "chunk": {...}}, on <prefix><state> (e.g.
// reactord.exec.local) for custom executors, with core NATS.
//
// When a JetStream stream captures the event subjects (the daemon runs
// with --jetstream), Do waits for a round trip (a flush) after its
// publish, so an event is acknowledged only once the server has its
// reactions; a flush that fails is Do's retryable error. The lanes'
// flushes are in flight at once, and JetStream's pull bounds what the
// server sends the connection meanwhile.
//
// Otherwise (core NATS, where nothing is redelivered) Do returns once the
// reaction is in the connection's buffer: a round trip per reaction waits
// behind every event the server is sending the daemon's connection, and in
// a burst lanes filled and events were dropped. A goroutine confirms what
// was published with one flush at a time, started as soon as something
// was published since the last one began, so one round trip confirms many
// reactions. A flush that fails or times out, or that follows a
// reconnection which may have lost some of them (natsbus.FlushSince),
// leaves the reactions it covered unconfirmed: they may not have reached
// the server. They are not resent (an executor may have them), but
// counted (Stats, Unconfirmed) and logged, the first at once and then at
// most once a minute with the count.
//
// When a JetStream stream captures a reaction's subject (an operator's
// stream for executors that consume from it), the reaction is published to
// JetStream and Do waits for the stream's acknowledgement, with the
// action's Key as its message id: a node that dies after confirming a core
// publish can lose it in its routes, a stored reaction is on the stream's
// replicas, and the copy a redelivered event publishes again is dropped
// within the stream's duplicate window.
//
// A publish that fails (connection closed, reconnect buffer full, payload
// too large, no acknowledgement from the stream) is Do's retryable error in
// every mode.
type Driver struct {
	conn   *natsbus.Conn
	prefix string
	origin string

	// Logger receives the unconfirmed-reactions lines; nil means
	// slog.Default().
	Logger *slog.Logger
	// FlushTimeout bounds one confirmation round trip, and the retries of
	// a stored publish (zero: DefaultFlushTimeout).
	FlushTimeout time.Duration
	// Durable says the daemon consumes its events from JetStream, which
	// redelivers them until acknowledged: Do then always waits for the
	// server to have a reaction, and while the server has not yet said
	// whether a stream stores a reaction's subject (no answer in time: a
	// cluster without a leader), Do's error is retryable instead of a
	// core publish that such a stream may never store. Set it before the
	// first Do.
	Durable bool

	start   sync.Once
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	closeMu sync.Once

	mu   sync.Mutex
	next *flushGen // the flush that will cover what is published now

	// Whether a JetStream stream captures the event subjects (Do waits).
	wait answer
	// Whether a JetStream stream captures a reaction subject (Do
	// publishes to it), by subject.
	storedMu sync.Mutex
	stored   map[string]*answer
	// refreshes are the answers being asked again in the background;
	// Close waits for them.
	refreshes sync.WaitGroup

	published   atomic.Int64
	confirmed   atomic.Int64
	unconfirmed atomic.Int64
	flushes     atomic.Int64
	logged      atomic.Int64 // unconfirmed as of the last line logged
	failLog     *ratelog.Every
}

// flushGen is one confirming flush of core mode and the reactions it
// covers.
type flushGen struct {
	n    int64
	mark natsbus.Mark // its publishes' (FlushSince)
}

func newFlushGen() *flushGen { return &flushGen{} }

// DriverStats counts the nats driver's reactions.
type DriverStats struct {
	// Published is the reactions handed to the connection.
	Published int64
	// Confirmed is the reactions a flush showed the server received.
	Confirmed int64
	// Unconfirmed is the reactions Do did not wait for whose flush failed
	// or timed out, or followed a reconnection that may have lost them
	// (natsbus.FlushSince): they may not have reached the server.
	Unconfirmed int64
	// Flushes is the confirmation round trips made.
	Flushes int64
}

// New returns a nats driver publishing under prefix (default
// reactord.exec.).
func New(c *natsbus.Conn, prefix, origin string) *Driver {
	if prefix == "" {
		prefix = DefaultExecPrefix
	}
	return &Driver{conn: c, prefix: prefix, origin: origin, next: newFlushGen(), stored: map[string]*answer{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		failLog: ratelog.New(time.Minute)}
}

// Name implements actions.Driver.
func (d *Driver) Name() string { return "nats" }

// AnswersAtOnce says a reaction is published to NATS, not run by Salt: a
// call takes a round trip to the NATS server at most.
func (d *Driver) AnswersAtOnce() bool { return true }

// Supports implements actions.Driver: executors decide what they run.
func (d *Driver) Supports(string) bool { return true }

// Do implements actions.Driver: it publishes the reaction and, in
// JetStream mode only, waits for the server to have it (see Driver).
func (d *Driver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	body := actions.AppendLine(nil, a.Tag, a.Chunk)
	subj := d.prefix + natsbus.Subject("", a.Chunk.Str("state"))
	meta := natsbus.Meta{Origin: d.origin, Cause: a.Tag, Hop: a.Hop + 1}
	stored, known := d.storedMode(ctx, subj)
	if !known && d.Durable {
		return actions.Result{}, actions.Retryable(fmt.Errorf("publishing to %s: the server has not said whether a JetStream stream stores it (no answer in time)", subj))
	}
	if stored {
		meta.MsgID = a.Key
		if err := d.publishStored(ctx, subj, body[:len(body)-1], meta); err != nil {
			return actions.Result{}, actions.Retryable(err)
		}
		d.published.Add(1)
		d.confirmed.Add(1)
		return actions.Result{}, nil
	}
	wait := d.Durable
	if !wait {
		wait, _ = d.wait.get(ctx, &d.refreshes, false, func(ctx context.Context) (bool, bool) { return d.conn.EventStream(ctx) != "", true })
	}
	msg := natsbus.Msg{Subject: subj, Body: body[:len(body)-1], Meta: meta}
	mark, err := d.conn.Marked(func() error { return d.conn.Publish(ctx, msg, natsbus.Core) })
	if err != nil {
		return actions.Result{}, actions.Retryable(err) // it names the subject
	}
	d.published.Add(1)
	if wait {
		d.flushes.Add(1)
		fctx, cancel := context.WithTimeout(ctx, d.flushTimeout())
		err := d.conn.FlushSince(fctx, mark)
		cancel()
		if err != nil {
			return actions.Result{}, actions.Retryable(fmt.Errorf("flushing %s: %w", subj, err))
		}
		d.confirmed.Add(1)
		return actions.Result{}, nil
	}
	d.mu.Lock()
	d.next.mark = d.next.mark.Merge(mark)
	d.next.n++
	d.mu.Unlock()
	d.start.Do(func() { go d.confirm() })
	select {
	case d.kick <- struct{}{}:
	default: // a flush is already due: it covers this one
	}
	return actions.Result{}, nil
}

// publishStored publishes a reaction to the stream that captures subj,
// asking again (after 50ms, then up to 1s apart) while the stream does not
// answer, for up to FlushTimeout: a NATS cluster that lost a node
// answers again once the stream has a new leader, which takes longer
// than the retries a driver error gets. The message id makes a repeated
// publish that the stream had stored one copy.
func (d *Driver) publishStored(ctx context.Context, subj string, body []byte, meta natsbus.Meta) error {
	ctx, cancel := context.WithTimeout(ctx, d.flushTimeout())
	defer cancel()
	msg := natsbus.Msg{Subject: subj, Body: body, Meta: meta}
	return retry.Until(ctx, func() error { return d.conn.Publish(ctx, msg, natsbus.Stored) },
		func(error) bool { return d.conn.NATS().IsClosed() })
}

// flushTimeout is FlushTimeout or its default.
func (d *Driver) flushTimeout() time.Duration {
	if d.FlushTimeout > 0 {
		return d.FlushTimeout
	}
	return DefaultFlushTimeout
}

// driverModeEvery is how often the driver asks the server again whether a
// stream captures the event subjects, or a reaction subject.
const driverModeEvery = 5 * time.Second

// answer is the server's last answer to a yes-or-no question about
// streams, as of at (Unix nanoseconds; 0: not known yet); busy while a
// goroutine asks again.
type answer struct {
	mu    sync.Mutex    // guards ready only; never held while the server is asked
	ready chan struct{} // made by the first caller, who asks; closed once the first answer is in
	yes   atomic.Bool
	at    atomic.Int64
	busy  atomic.Bool
}

// get returns the answer. The first call asks the server (others wait for
// it, or for their ctx); later calls use the answer and refresh it in the
// background every driverModeEvery (a refresh that gets no answer keeps
// the last one until the next), so a slow JetStream API never holds a
// lane. The refresh runs in refreshes. A first ask that gets no answer
// counts as no, unless again: then known is false, and the next call asks
// again.
func (q *answer) get(ctx context.Context, refreshes *sync.WaitGroup, again bool, ask func(context.Context) (yes, known bool)) (yes, known bool) {
	at := q.at.Load()
	if at == 0 {
		q.first(ctx, again, ask)
		return q.yes.Load(), q.at.Load() != 0
	} else if time.Since(time.Unix(0, at)) > driverModeEvery && q.busy.CompareAndSwap(false, true) {
		refreshes.Go(func() {
			defer q.busy.Store(false)
			if yes, known := ask(context.Background()); known {
				q.yes.Store(yes)
			}
			q.at.Store(time.Now().UnixNano())
		})
	}
	return q.yes.Load(), true
}

// first gets the first answer: the first caller asks, the others wait
// until it has the answer or their ctx ends. An unknown answer (the
// server did not answer in time) counts as no until a refresh gets one;
// with again, it leaves the question open for the next caller.
func (q *answer) first(ctx context.Context, again bool, ask func(context.Context) (yes, known bool)) {
	q.mu.Lock()
	ready, asks := q.ready, q.ready == nil
	if asks {
		ready = make(chan struct{})
		q.ready = ready
	}
	q.mu.Unlock()
	if !asks {
		select {
		case <-ready:
		case <-ctx.Done():
		}
		return
	}
	yes, known := ask(ctx)
	if known || !again {
		q.yes.Store(yes)
		q.at.Store(time.Now().UnixNano())
	} else {
		q.mu.Lock()
		q.ready = nil
		q.mu.Unlock()
	}
	close(ready)
}

// storedMode reports whether a JetStream stream captures the reaction
// subject subj, and whether the server said so yet.
func (d *Driver) storedMode(ctx context.Context, subj string) (stored, known bool) {
	d.storedMu.Lock()
	q := d.stored[subj]
	if q == nil {
		q = &answer{}
		d.stored[subj] = q
	}
	d.storedMu.Unlock()
	return q.get(ctx, &d.refreshes, d.Durable, func(ctx context.Context) (bool, bool) { return d.conn.StreamCaptures(ctx, subj) })
}

// confirm runs one flush at a time, each covering the reactions published
// before it started.
func (d *Driver) confirm() {
	defer close(d.stopped)
	for {
		select {
		case <-d.stop:
			return
		case <-d.kick:
		}
		d.flush()
	}
}

func (d *Driver) flush() {
	// While the connection is down, publishes wait in its reconnect
	// buffer and go out once it is back: confirm them then.
	for !d.conn.NATS().IsConnected() && !d.conn.NATS().IsClosed() {
		select {
		case <-d.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.mu.Lock()
	gen := d.next
	if gen.n == 0 {
		d.mu.Unlock()
		return
	}
	d.next = newFlushGen()
	d.mu.Unlock()
	d.flushes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), d.flushTimeout())
	err := d.conn.FlushSince(ctx, gen.mark)
	cancel()
	d.settle(gen, err)
}

// settle counts a core-mode flush's reactions as confirmed or not, and
// logs the latter.
func (d *Driver) settle(gen *flushGen, err error) {
	if err == nil {
		d.confirmed.Add(gen.n)
		return
	}
	total := d.unconfirmed.Add(gen.n)
	if _, ok := d.failLog.Tick(); ok {
		log := d.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error(msgUnconfirmed, "err", err, "reactions_since_last_line", total-d.logged.Swap(total), "unconfirmed_total", total,
			"why", "the connection failed or was re-established, or the flush timed out: they may not have reached it",
			"fix", "not resent; check the executors got them (reactord_driver_unconfirmed_total), logged at most once a minute")
	}
}

// Stats returns the driver's counts.
func (d *Driver) Stats() DriverStats {
	return DriverStats{Published: d.published.Load(), Confirmed: d.confirmed.Load(),
		Unconfirmed: d.unconfirmed.Load(), Flushes: d.flushes.Load()}
}

// Unconfirmed is the reactions whose flush failed, timed out or followed
// a reconnection that may have lost them (for
// reactord_driver_unconfirmed_total).
func (d *Driver) Unconfirmed() int64 { return d.unconfirmed.Load() }

// Close confirms what was published (one last flush, within ctx) and stops
// the confirming goroutine. Do must not be called after Close.
func (d *Driver) Close(ctx context.Context) error {
	var err error
	d.closeMu.Do(func() {
		close(d.stop)
		defer d.refreshes.Wait()
		started := true
		d.start.Do(func() { started = false })
		if started {
			<-d.stopped
		}
		d.mu.Lock()
		gen := d.next
		d.next = newFlushGen()
		d.mu.Unlock()
		if gen.n == 0 {
			return
		}
		d.flushes.Add(1)
		if ferr := d.conn.FlushSince(ctx, gen.mark); ferr != nil {
			err = fmt.Errorf("nats driver: %d reactions not confirmed: %w", gen.n, ferr)
		}
		d.settle(gen, err)
	})
	return err
}

var _ actions.Driver = (*Driver)(nil)
