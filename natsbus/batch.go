package natsbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The headers of JetStream's atomic batch publish (nats-server 2.12+).
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// AtomicBatchMin is the first nats-server release with atomic batch
// publish (a stream's allow_atomic): a committed batch is written and, with
// sync_interval always, flushed to disk once.
var AtomicBatchMin = Version{Major: 2, Minor: 12, Patch: 0}

// The server's refusals of an atomic batch that the per-message path then
// settles (its errors are exact per event).
const (
	errCodeAtomicDisabled  jetstream.ErrorCode = 10174 // the stream has no allow_atomic
	errCodeAtomicTooLarge  jetstream.ErrorCode = 10199 // over the server's max_batch_size
	errCodeAtomicDuplicate jetstream.ErrorCode = 10201 // an id the stream has (or the batch has twice)
)

// Defaults for PublisherOptions.
const (
	// DefaultBatchMax is the most events in one batch (nats-server takes
	// up to 1000 unless its max_batch_size says fewer; measured on
	// reactord-bench bursts, 1000 ran at about 0.6 of 256, and 64 or 128
	// no faster: docs/speed.md).
	DefaultBatchMax = 256
	// DefaultBatchLinger is how long a batch stays open for more events
	// after its first one while another batch is in flight.
	DefaultBatchLinger = time.Millisecond
	// DefaultBatchInFlight is how many batches wait for their
	// acknowledgement at once (nats-server allows 50 open atomic batches
	// per stream, all publishers together).
	DefaultBatchInFlight = 4
	// DefaultBatchMinAtomic is the fewest events sent as an atomic batch:
	// nats-server stages each atomic batch of a one-replica file stream in
	// a file store of its own, which took about 6 ms here, as long as
	// about 16 events published and flushed one at a time.
	DefaultBatchMinAtomic = 16
)

// DefaultAckTimeout is PublisherOptions.AckTimeout's default.
const DefaultAckTimeout = 10 * time.Second

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	// How is Stored (the default) or Event: with Event, while no stream
	// captures the event subjects, each message is published as Conn.Publish
	// with Event does (Delivered, its done called before Publish returns),
	// and the JetStream side (the server's version, the acknowledgements'
	// subscription) is set up at the first message that goes to a stream.
	How How
	// MaxBatch is the most events in one batch (default DefaultBatchMax,
	// at most 1000).
	MaxBatch int
	// Linger is how long a batch stays open after its first event while
	// another batch waits for its acknowledgement (default
	// DefaultBatchLinger); with none in flight, what is open is sent at
	// once, so a lone event does not wait.
	Linger time.Duration
	// InFlight is how many batches wait for their acknowledgement at once
	// (default DefaultBatchInFlight); while all do, the open batch keeps
	// filling up to MaxBatch, and Publish blocks beyond.
	InFlight int
	// MinAtomic is the fewest events sent as one atomic batch (default
	// DefaultBatchMinAtomic, at least 2); a batch with fewer is published
	// one message at a time, several in flight. Above MaxBatch, no batch
	// is atomic: the choice for a server that does not flush each write
	// (sync_interval other than always), where an atomic batch saves no
	// flush and its staging costs one.
	MinAtomic int
	// Retries is how many times a batch that got no acknowledgement (a
	// timeout, no responders, a connection lost) is sent again before its
	// events fail (default 0).
	Retries int
	// RetryFor, when set, keeps sending again what got no acknowledgement
	// for this long after its first try, whatever Retries says: long
	// enough to ride a stream's leader election (a few seconds), the
	// events keeping their ids so that the stream stores each once.
	RetryFor time.Duration
	// AckTimeout bounds the wait for one batch's, or one message's,
	// acknowledgement (default DefaultAckTimeout).
	AckTimeout time.Duration
	// Logger receives the line saying how events are published, and why
	// (nil: slog.Default()).
	Logger *slog.Logger
	// Ordered keeps the stream's order of the events equal to the order
	// Publish took them, across failures: one batch in flight (InFlight
	// 1), a batch either atomic or of one event, and after an event that
	// fails for good every later one fails too, unsent, until Resume —
	// the caller then publishes again from the first that failed. Without
	// it, a batch sent again comes after those written meanwhile.
	Ordered bool
}

// PublisherStats count what a Publisher sent.
type PublisherStats struct {
	// Acked is the events the stream acknowledged (duplicates included:
	// the stream had them already), or, published with core NATS (Event
	// without a stream), that a subscriber received.
	Acked int64
	// Failed is the events the stream refused or never acknowledged.
	Failed int64
	// Errors holds the first few failures' errors.
	Errors []error
	// Batches is the atomic batches the stream acknowledged.
	Batches int64
	// Batched is the events in them.
	Batched int64
	// Single is the events published one at a time: in a batch of fewer
	// than MinAtomic, on a server without atomic batches, or settled one
	// by one after the server refused their batch (a duplicate id in it).
	Single int64
	// Fallbacks is the batches the server refused and that were then
	// published one message at a time.
	Fallbacks int64
	// Retried counts the events sent again after their batch, or their
	// own publish, got no acknowledgement (PublisherOptions.Retries and
	// RetryFor).
	Retried int64
}

// batcher is a Publisher's JetStream side: the open batch, the batches in
// flight and their acknowledgements (see Publisher).
type batcher struct {
	c      *Conn
	js     jetstream.JetStream
	log    *slog.Logger
	linger time.Duration
	tries  int
	// retryFor keeps retrying for this long after the first try.
	retryFor   time.Duration
	ackTimeout time.Duration
	// minAtomic is the fewest events sent as an atomic batch: fewer go
	// one at a time (lowered with maxBatch when the server refuses large
	// batches).
	minAtomic atomic.Int64
	idBase    string
	seq       atomic.Uint64 // the publisher's message ids
	bseq      atomic.Uint64 // batch ids

	atomic   atomic.Bool // atomic batches, else one message at a time
	maxBatch atomic.Int64

	mu      sync.Mutex
	room    *sync.Cond // signalled when the open batch was taken
	open    []*batchEvent
	openIDs map[string]*batchEvent
	first   time.Time // the open batch's first event
	flush   bool
	closed  bool
	// ordered is PublisherOptions.Ordered; halted, the failure that
	// stops an ordered batcher until resume.
	ordered bool
	halted  error

	kick  chan struct{} // wakes the closer
	slots chan struct{} // batches in flight
	// wire is closed once the last batch handed to a goroutine has
	// written its messages (loop's goroutine only): the next one writes
	// after it, so batches reach the stream in the order they closed.
	wire chan struct{}
	// inbox is the prefix of the batches' reply subjects, answered
	// through replies (batch id → its channel) by one subscription.
	inbox    string
	inboxSub *nats.Subscription
	// inboxGone is closed when the subscription ends (the connection
	// closed for good, or Close): no acknowledgement can come.
	inboxGone chan struct{}
	replies   sync.Map
	inFlight  sync.WaitGroup
	loopDone  chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc

	batches, batched, single, fallbacks, retried atomic.Int64
}

type batchEvent struct {
	msg  *nats.Msg
	done []func(error)
}

func (e *batchEvent) settle(err error) {
	for _, d := range e.done {
		if d != nil {
			d(err)
		}
	}
}

// withDefaults fills the options' zeros with the defaults.
func (o PublisherOptions) withDefaults() PublisherOptions {
	if o.How == 0 {
		o.How = Stored
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultBatchMax
	}
	o.MaxBatch = min(o.MaxBatch, 1000)
	if o.Linger <= 0 {
		o.Linger = DefaultBatchLinger
	}
	if o.InFlight <= 0 {
		o.InFlight = DefaultBatchInFlight
	}
	if o.Ordered {
		o.InFlight = 1
	}
	if o.MinAtomic <= 0 {
		o.MinAtomic = DefaultBatchMinAtomic
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// The lines saying how a Publisher publishes to JetStream.
const (
	msgAtomicBatches    = "JetStream publishing: atomic batches"
	msgOneAtATime       = "JetStream publishing: one message at a time"
	msgVersionUnknown   = "JetStream publishing: one at a time, server version unreadable"
	msgAtomicNotAllowed = "JetStream publishing: one at a time, stream refuses atomic batches"
	msgBatchTooLarge    = "JetStream publishing: server refuses batches this large"
)

// newBatcher returns a batcher into the event stream (o has its
// defaults). It asks the server's version (the lowest of a cluster's, see
// ServerVersion) once to choose atomic batches or one message at a time,
// and logs the choice.
func (c *Conn) newBatcher(ctx context.Context, o PublisherOptions) (*batcher, error) {
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(o.MaxBatch*o.InFlight+1), jetstream.WithPublishAsyncTimeout(o.AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	pctx, cancel := context.WithCancel(context.Background())
	p := &batcher{c: c, js: js, log: o.Logger, linger: o.Linger, tries: max(o.Retries, 0) + 1, retryFor: o.RetryFor, ackTimeout: o.AckTimeout,
		idBase: "reactord-" + hex.EncodeToString(b[:]) + "-", openIDs: map[string]*batchEvent{},
		kick: make(chan struct{}, 1), slots: make(chan struct{}, o.InFlight), loopDone: make(chan struct{}), ctx: pctx, cancel: cancel}
	p.room = sync.NewCond(&p.mu)
	p.maxBatch.Store(int64(o.MaxBatch))
	p.wire = make(chan struct{})
	close(p.wire)
	p.inbox = c.nc.NewInbox()
	p.inboxSub, err = c.nc.Subscribe(p.inbox+".*", p.reply)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("subscribing to the batches' acknowledgements: %w", err)
	}
	p.inboxGone = make(chan struct{})
	var gone sync.Once
	p.inboxSub.SetClosedHandler(func(string) { gone.Do(func() { close(p.inboxGone) }) })
	p.minAtomic.Store(int64(max(o.MinAtomic, 2)))
	p.ordered = o.Ordered
	p.chooseAtomic(ctx, o)
	if o.Ordered {
		// A batch is stored whole or not at all, or holds one event: a
		// failure never leaves a later event of it stored.
		p.minAtomic.Store(2)
		if !p.atomic.Load() {
			p.maxBatch.Store(1)
		}
	}
	go p.loop()
	return p, nil
}

// chooseAtomic turns atomic batches on when the server has them and the
// options allow them, and logs the choice.
func (p *batcher) chooseAtomic(ctx context.Context, o PublisherOptions) {
	sv, err := p.c.ServerVersion(ctx)
	switch {
	case err != nil:
		p.log.Warn(msgVersionUnknown, "err", err,
			"fix", "atomic batches are not tried; check that the server answers $SYS or JetStream API requests")
	case sv.Version.Less(AtomicBatchMin):
		p.log.Info(msgOneAtATime, "reason", "the server has no atomic batch publish", "server", sv.URL,
			"version", sv.Version.String(), "needs", AtomicBatchMin.String())
	case o.MinAtomic > o.MaxBatch:
		p.log.Info(msgOneAtATime, "reason", "asked for: MinAtomic above MaxBatch", "server", sv.URL)
	default:
		p.atomic.Store(true)
		p.log.Info(msgAtomicBatches, "max_batch", o.MaxBatch, "linger", o.Linger, "in_flight", o.InFlight,
			"server", sv.URL, "version", sv.Version.String())
	}
}

// isAtomic reports whether the batcher sends atomic batches (false: one
// message at a time).
func (p *batcher) isAtomic() bool { return p.atomic.Load() }

// Stats returns the counts so far.
func (p *batcher) stats() PublisherStats {
	return PublisherStats{Batches: p.batches.Load(), Batched: p.batched.Load(), Single: p.single.Load(), Fallbacks: p.fallbacks.Load(), Retried: p.retried.Load()}
}

// publish adds one message (an event on its keyed subject) to the open
// batch; done (may be nil) is called once with nil when the stream
// acknowledged it (stored, or known already by its id), else with the
// error. publish blocks while the open batch is full and every batch in
// flight waits for its acknowledgement; it fails only after close.
func (p *batcher) publish(m Msg, done func(error)) error {
	meta := m.Meta
	if meta.MsgID == "" {
		meta.MsgID = p.idBase + strconv.FormatUint(p.seq.Add(1), 10)
	}
	m.Meta = meta
	msg := &nats.Msg{Subject: p.c.storedSubject(m), Data: m.Body, Header: meta.header()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && int64(len(p.open)) >= p.maxBatch.Load() {
		p.room.Wait()
	}
	if p.closed {
		return errPublishAfterClose
	}
	if e, ok := p.openIDs[meta.MsgID]; ok {
		// The same id twice in a batch: the server would refuse the
		// batch; the stream keeps one, so this one rides on the first.
		e.done = append(e.done, done)
		return nil
	}
	e := &batchEvent{msg: msg, done: []func(error){done}}
	p.open = append(p.open, e)
	p.openIDs[meta.MsgID] = e
	if len(p.open) == 1 {
		p.first = time.Now()
		p.wake()
	} else if int64(len(p.open)) >= p.maxBatch.Load() {
		p.wake()
	}
	return nil
}

func (p *batcher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// flushOpen sends the open batch without waiting for Linger.
func (p *batcher) flushOpen() {
	p.mu.Lock()
	p.flush = true
	p.mu.Unlock()
	p.wake()
}

// close sends what is open and waits for every acknowledgement, or for
// ctx's end, which fails the events still waiting. publish must not be
// called after close.
func (p *batcher) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.room.Broadcast()
	p.mu.Unlock()
	p.wake()
	stop := context.AfterFunc(ctx, p.cancel)
	defer stop()
	<-p.loopDone
	p.inFlight.Wait()
	p.cancel()
	_ = p.inboxSub.Unsubscribe()
}

// reply hands a batch's acknowledgement to the goroutine waiting for it.
func (p *batcher) reply(m *nats.Msg) {
	if ch, ok := p.replies.Load(m.Subject[len(p.inbox)+1:]); ok {
		select {
		case ch.(chan *nats.Msg) <- m:
		default:
		}
	}
}

// loop closes batches and sends them, each on a goroutine of its own
// holding one of the InFlight slots.
func (p *batcher) loop() {
	defer close(p.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		p.mu.Lock()
		n, first, closing, flush := len(p.open), p.first, p.closed, p.flush
		p.mu.Unlock()
		if n == 0 {
			if closing {
				return
			}
			select {
			case <-p.kick:
			case <-p.ctx.Done():
				return
			}
			continue
		}
		if p.atomic.Load() && !closing && !flush && int64(n) < p.maxBatch.Load() && len(p.slots) > 0 {
			if wait := p.linger - time.Since(first); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-p.kick:
					timer.Stop()
				}
				continue
			}
		}
		select {
		case p.slots <- struct{}{}: // while every slot is taken, the batch grows
		case <-p.ctx.Done():
			p.failOpen(p.ctx.Err())
			return
		}
		p.mu.Lock()
		take := min(len(p.open), int(p.maxBatch.Load()))
		batch := p.open[:take:take]
		p.open = append([]*batchEvent(nil), p.open[take:]...)
		clear(p.openIDs)
		for _, e := range p.open {
			p.openIDs[e.msg.Header.Get(HeaderMsgID)] = e
		}
		if len(p.open) > 0 {
			p.first = time.Now()
		}
		p.flush = p.flush && len(p.open) > 0
		p.room.Broadcast()
		halted := p.halted
		p.mu.Unlock()
		if halted != nil {
			// Ordered, after a failure: nothing later may be stored
			// before what failed is sent again.
			<-p.slots
			for _, e := range batch {
				e.settle(fmt.Errorf("%s: not sent after an earlier event failed: %w", e.msg.Subject, halted))
			}
			continue
		}
		p.inFlight.Add(1)
		prev, mine := p.wire, make(chan struct{})
		p.wire = mine
		go func() {
			var once sync.Once
			written := func() { once.Do(func() { close(mine) }) }
			defer func() { written(); <-p.slots; p.inFlight.Done(); p.wake() }()
			<-prev
			p.send(batch, written)
		}()
	}
}

// failOpen fails the events of the open batch (Close's context ended).
func (p *batcher) failOpen(err error) {
	p.mu.Lock()
	open := p.open
	p.open = nil
	clear(p.openIDs)
	p.mu.Unlock()
	for _, e := range open {
		e.settle(fmt.Errorf("%s: %w", e.msg.Subject, err))
	}
}

// send publishes one batch and settles its events. It calls written once
// the batch's messages are on the connection, before it waits for their
// acknowledgement: the next batch is written after that, so the stream
// stores batches in order (a batch sent again after a failure comes after
// those written meanwhile).
func (p *batcher) send(batch []*batchEvent, written func()) {
	if int64(len(batch)) < p.minAtomic.Load() || !p.atomic.Load() {
		p.sendEach(batch, written)
		return
	}
	var err error
	first := time.Now()
	for try := 0; ; try++ {
		if try > 0 {
			if !p.backoff(try) {
				err = p.ctx.Err()
				break
			}
			p.retried.Add(int64(len(batch)))
		}
		err = p.sendAtomic(batch, written)
		written()
		if err == nil {
			p.batches.Add(1)
			p.batched.Add(int64(len(batch)))
			for _, e := range batch {
				e.settle(nil)
			}
			return
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || errors.Is(err, nats.ErrMaxPayload) {
			// A refusal: each event's own publish says which are
			// duplicates, and what else is wrong (one event over the
			// max payload fails alone).
			p.fallbacks.Add(1)
			if apiErr != nil {
				p.refused(apiErr, len(batch))
			}
			p.sendEach(batch, written)
			return
		}
		if !transientPublishError(err) && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrConnectionReconnecting) {
			break
		}
		if !p.mayRetry(try+1, first) {
			break
		}
	}
	p.halt(err)
	for _, e := range batch {
		e.settle(fmt.Errorf("publishing a batch of %d events to JetStream (%s first): %w", len(batch), e.msg.Subject, err))
	}
}

// halt stops an ordered batcher after err, until resume.
func (p *batcher) halt(err error) {
	if !p.ordered || errors.Is(err, nats.ErrMaxPayload) {
		// An event over the max payload is the caller's to drop (the
		// bridge's outbox does): sending it again cannot succeed.
		return
	}
	p.mu.Lock()
	if p.halted == nil {
		p.halted = err
	}
	p.mu.Unlock()
}

// resume lets an ordered batcher send again after a failure.
func (p *batcher) resume() {
	p.mu.Lock()
	p.halted = nil
	p.mu.Unlock()
}

// mayRetry reports whether what got no acknowledgement may be sent a
// try-th time (try 1 is the first retry), its first try made at first:
// within Retries, or within RetryFor, and not on a connection closed for
// good.
func (p *batcher) mayRetry(try int, first time.Time) bool {
	if p.c.nc.IsClosed() {
		return false
	}
	return try < p.tries || (p.retryFor > 0 && time.Since(first) < p.retryFor)
}

// backoff waits before the try-th try: 100 ms before the first retry, 4
// times longer each time, at most 2 s; false when the publisher stopped
// meanwhile.
func (p *batcher) backoff(try int) bool {
	d := min(time.Duration(100<<(2*min(try-1, 8)))*time.Millisecond, 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// refused counts a refused batch and acts on the refusals that say
// something of the publisher's settings.
func (p *batcher) refused(apiErr *jetstream.APIError, n int) {
	switch apiErr.ErrorCode {
	case errCodeAtomicDisabled:
		if p.atomic.CompareAndSwap(true, false) {
			p.log.Warn(msgAtomicNotAllowed, "err", apiErr, "needs", AtomicBatchMin.String(),
				"fix", "the stream lacks allow_atomic: the daemon turns it on when it creates or updates the stream on this release or later")
		}
	case errCodeAtomicTooLarge:
		if half := int64(max(n/2, 1)); half < p.maxBatch.Load() {
			p.maxBatch.Store(half)
			if half < p.minAtomic.Load() {
				p.minAtomic.Store(max(half, 2))
			}
			p.log.Warn(msgBatchTooLarge, "max_batch", half, "err", apiErr,
				"fix", "batches of at most max_batch events from now on; raise the server's max_batch_size to allow larger ones")
		}
	}
}

// sendAtomic sends batch as one atomic batch and waits for its
// acknowledgement: the messages before the last without a reply subject,
// the last with the commit and the reply. It calls written once the commit
// is on the connection.
func (p *batcher) sendAtomic(batch []*batchEvent, written func()) error {
	id := p.idBase + "b" + strconv.FormatUint(p.bseq.Add(1), 36)
	ackc := make(chan *nats.Msg, 1)
	p.replies.Store(id, ackc)
	defer p.replies.Delete(id)
	last := len(batch) - 1
	for i, e := range batch {
		h := make(nats.Header, len(e.msg.Header)+3)
		for k, v := range e.msg.Header {
			h[k] = v
		}
		h[headerBatchID] = []string{id}
		h[headerBatchSeq] = []string{strconv.Itoa(i + 1)}
		m := &nats.Msg{Subject: e.msg.Subject, Data: e.msg.Data, Header: h}
		if i < last {
			if err := p.c.nc.PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		h[headerBatchCommit] = []string{"1"}
		m.Reply = p.inbox + "." + id
		if err := p.c.nc.PublishMsg(m); err != nil {
			return err
		}
		written()
		t := time.NewTimer(p.ackTimeout)
		var resp *nats.Msg
		select {
		case resp = <-ackc:
			t.Stop()
		case <-t.C:
			return nats.ErrTimeout
		case <-p.ctx.Done():
			t.Stop()
			return p.ctx.Err()
		case <-p.inboxGone:
			t.Stop()
			select {
			case resp = <-ackc: // it came before the close
			default:
				return nats.ErrConnectionClosed
			}
		}
		if len(resp.Data) == 0 && resp.Header.Get("Status") == "503" {
			return nats.ErrNoResponders // no stream takes the subject
		}
		var ack struct {
			Error  *jetstream.APIError `json:"error"`
			Stream string              `json:"stream"`
			Count  int                 `json:"count"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return fmt.Errorf("reading the batch's acknowledgement %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return ack.Error
		}
		if ack.Stream == "" {
			return fmt.Errorf("the batch's acknowledgement names no stream: %q", resp.Data)
		}
		if ack.Count != 0 && ack.Count != len(batch) {
			return fmt.Errorf("the stream acknowledged %d of a batch of %d", ack.Count, len(batch))
		}
	}
	return nil
}

// sendEach publishes the events one at a time, all at once, and settles
// each with its own acknowledgement; one that gets none is sent again up
// to Retries times, or for RetryFor. It calls written once the first
// try's messages are on the connection.
func (p *batcher) sendEach(batch []*batchEvent, written func()) {
	if p.ordered {
		p.sendInTurn(batch, written)
		return
	}
	p.single.Add(int64(len(batch)))
	todo := batch
	var errs []error
	first := time.Now()
	for try := 0; len(todo) > 0; try++ {
		if try > 0 {
			p.backoff(try) // a stop meanwhile fails them below
			p.retried.Add(int64(len(todo)))
		}
		futs := make([]jetstream.PubAckFuture, len(todo))
		errs = make([]error, len(todo))
		for i, e := range todo {
			if p.ctx.Err() != nil {
				errs[i] = p.ctx.Err()
				continue
			}
			fut, err := p.js.PublishMsgAsync(&nats.Msg{Subject: e.msg.Subject, Data: e.msg.Data, Header: e.msg.Header})
			for errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				fut, err = p.js.PublishMsgAsync(&nats.Msg{Subject: e.msg.Subject, Data: e.msg.Data, Header: e.msg.Header})
			}
			futs[i], errs[i] = fut, err
		}
		written()
		var again []*batchEvent
		var againErrs []error
		for i, e := range todo {
			err := errs[i]
			if err == nil {
				select {
				case <-futs[i].Ok():
				case err = <-futs[i].Err():
				case <-p.ctx.Done():
					err = p.ctx.Err()
				case <-p.inboxGone:
					// The connection closed for good: nats.go fails
					// the futures of a connection that reconnects, not
					// of one that closes, and they would wait for
					// their timeout. An acknowledgement already in
					// counts.
					select {
					case <-futs[i].Ok():
					case err = <-futs[i].Err():
					default:
						err = nats.ErrConnectionClosed
					}
				}
			}
			switch {
			case err == nil:
				e.settle(nil)
			case transientPublishError(err) && p.mayRetry(try+1, first) && p.ctx.Err() == nil:
				again, againErrs = append(again, e), append(againErrs, err)
			default:
				p.halt(err)
				e.settle(fmt.Errorf("publishing %s to JetStream: %w", e.msg.Subject, err))
			}
		}
		todo, errs = again, againErrs
	}
	for i, e := range todo {
		p.halt(errs[i])
		e.settle(fmt.Errorf("publishing %s to JetStream: %w", e.msg.Subject, errs[i]))
	}
}

// sendInTurn is sendEach for an Ordered publisher: one event at a time,
// each sent (and sent again, within the retry bound) until it is
// acknowledged before the next is sent, so that an event that fails for
// a moment (an election) can never be stored after a later one. After an
// event fails for good, the publisher halts and the rest of the batch
// fails unsent. It calls written once it is done.
func (p *batcher) sendInTurn(batch []*batchEvent, written func()) {
	defer written()
	p.single.Add(int64(len(batch)))
	for i, e := range batch {
		p.mu.Lock()
		halted := p.halted
		p.mu.Unlock()
		if halted != nil {
			for _, rest := range batch[i:] {
				rest.settle(fmt.Errorf("%s: not sent after an earlier event failed: %w", rest.msg.Subject, halted))
			}
			return
		}
		err := p.sendOne(e)
		if err != nil {
			p.halt(err)
			err = fmt.Errorf("publishing %s to JetStream: %w", e.msg.Subject, err)
		}
		e.settle(err)
	}
}

// sendOne publishes one event and waits for its acknowledgement, sending
// it again after a transient failure within the retry bound.
func (p *batcher) sendOne(e *batchEvent) error {
	first := time.Now()
	for try := 0; ; try++ {
		if try > 0 {
			if !p.backoff(try) {
				return p.ctx.Err()
			}
			p.retried.Add(1)
		}
		if err := p.ctx.Err(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.ackTimeout)
		_, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: e.msg.Subject, Data: e.msg.Data, Header: e.msg.Header})
		cancel()
		if err == nil || !transientPublishError(err) || !p.mayRetry(try+1, first) {
			return err
		}
	}
}
