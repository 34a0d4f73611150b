package natsbus

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errPublishAfterClose refuses a message handed to a closed Publisher.
var errPublishAfterClose = errors.New("publishing after Close")

// Publisher publishes many messages without waiting for each one's
// acknowledgement: the way to publish in bulk (the bridge's outbox,
// `reactord fire --events`, the benchmark), where Conn.Publish sends one
// at a time. Messages go to JetStream (Stored) in atomic batches
// (nats-server 2.12+): they gather in an open batch while another batch
// is in flight, and it is sent when it holds MaxBatch events, Linger after
// its first one or when no batch is in flight any more (group commit: a
// lone event goes at once, a burst gathers while the writes before it are
// flushed); up to InFlight batches wait for their acknowledgement. A batch
// of fewer than MinAtomic events is published one message at a time. The
// stream stores a batch whole or not at all and, with each write flushed
// (sync_interval always), flushes it once: that is what makes it cheaper
// than one acknowledged publish per event. Every event carries its
// Nats-Msg-Id (the caller's, else one of the publisher's, kept when it is
// sent again): the server refuses a batch that holds an id it stored
// within its duplicate window, and the publisher then publishes that
// batch's events one at a time, so that duplicates are dropped and
// acknowledged as the per-message path does; an event given twice in one
// open batch is sent once and acknowledged with it. What gets no
// acknowledgement (a timeout, no responders while a stream elects a
// leader, a connection lost) is sent again Retries times, or for
// RetryFor.
//
// On a server older than AtomicBatchMin (asked once, at the first
// JetStream publish), or a stream without allow_atomic (found at the first
// refusal), it publishes each event on its own, several at once, and says
// so in one log line.
//
// Batches are written to the connection one after another, so the stream
// stores events in the order Publish took them; only a batch sent again
// (refused, or unacknowledged) comes after those written meanwhile, and
// the events of several batches sent again may interleave.
//
// With How Event, while no stream captures the event subjects, each
// message is published with core NATS as Conn.Publish with Event does.
//
// Publish may be called from several goroutines; each message's done
// function is called once, from the publisher's goroutines (or, published
// with core NATS, before Publish returns).
type Publisher struct {
	c *Conn
	o PublisherOptions

	mu     sync.Mutex // guards b and closed
	b      *batcher   // made at the first JetStream publish
	closed bool

	statsMu sync.Mutex
	acked   int64
	failed  int64
	errs    []error
}

// NewPublisher returns a Publisher. With How Stored (the default) it sets
// up its JetStream side at once, asking the server's version (the lowest
// of a cluster's, see ServerVersion) to choose atomic batches or one
// message at a time, and logs the choice; with Event, at the first
// message that goes to a stream.
func (c *Conn) NewPublisher(ctx context.Context, o PublisherOptions) (*Publisher, error) {
	o = o.withDefaults()
	if o.How != Stored && o.How != Event {
		return nil, errors.New("a Publisher publishes Stored or Event, not " + o.How.String())
	}
	p := &Publisher{c: c, o: o}
	if o.How == Stored {
		if _, err := p.batcher(ctx); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// batcher returns the publisher's JetStream side, made on first use.
func (p *Publisher) batcher(ctx context.Context) (*batcher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.c.closing.Load() {
		return nil, errPublishAfterClose
	}
	if p.b == nil {
		b, err := p.c.newBatcher(ctx, p.o)
		if err != nil {
			return nil, err
		}
		p.b = b
	}
	return p.b, nil
}

// Publish hands one message to the publisher; done (may be nil) is called
// once with nil when the stream acknowledged it (stored, or known already
// by its id), or a subscriber received it (core NATS, How Event), else
// with the error. Publish blocks while the open batch is full and every
// batch in flight waits for its acknowledgement. An error returned means
// the message was not taken (done is not called, and it is not counted):
// after Close, or when the JetStream side could not be set up.
func (p *Publisher) Publish(ctx context.Context, m Msg, done func(error)) error {
	if m.Tag == "" && m.Subject == "" {
		return errNoTarget
	}
	settle := func(err error) {
		if streamGone(err) {
			// The stream went away since it was looked up (or has
			// no leader yet): ask again before the next message.
			p.c.forgetStream()
		}
		p.count(err)
		if done != nil {
			done(err)
		}
	}
	if p.o.How == Event && p.c.EventStream(ctx) == "" {
		if p.isClosed() {
			return errPublishAfterClose
		}
		settle(p.c.publishDelivered(ctx, m))
		return nil
	}
	b, err := p.batcher(ctx)
	if err != nil {
		return err
	}
	return b.publish(m, settle)
}

// Resume lets an Ordered publisher send again after a failure: call it
// once the events from the first that failed on are about to be
// published again. It does nothing to a publisher that is not Ordered.
func (p *Publisher) Resume() {
	p.mu.Lock()
	b := p.b
	p.mu.Unlock()
	if b != nil {
		b.resume()
	}
}

func (p *Publisher) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// count counts one settled message.
func (p *Publisher) count(err error) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if err == nil {
		p.acked++
		return
	}
	p.failed++
	if len(p.errs) < 5 {
		p.errs = append(p.errs, err)
	}
}

// Atomic reports whether the publisher sends atomic batches (false: one
// message at a time, or no JetStream publish yet).
func (p *Publisher) Atomic() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b != nil && p.b.isAtomic()
}

// Stats returns the counts so far.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	b := p.b
	p.mu.Unlock()
	var st PublisherStats
	if b != nil {
		st = b.stats()
	}
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	st.Acked, st.Failed, st.Errors = p.acked, p.failed, append([]error(nil), p.errs...)
	return st
}

// Flush sends the open batch without waiting for Linger.
func (p *Publisher) Flush() {
	p.mu.Lock()
	b := p.b
	p.mu.Unlock()
	if b != nil {
		b.flushOpen()
	}
}

// Close sends what is open and waits for every acknowledgement, or for
// ctx's end, which fails the messages still waiting. Publish fails after
// Close.
func (p *Publisher) Close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	b := p.b
	p.mu.Unlock()
	if b != nil {
		b.close(ctx)
	}
}

// transientPublishError reports a publish that may succeed if sent again:
// no acknowledgement in time, or no stream answering yet.
func transientPublishError(err error) bool {
	// An API error (the stream is full, refuses the message) is final. A
	// reconnection fails every acknowledgement pending on the connection
	// with ErrDisconnected (a node's death, the stream leader's among
	// them): sent again under its message id, the event is stored once.
	return errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting)
}
