package natsbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackedRetries is how many times AckedPublisher republishes an event whose
// acknowledgement did not come (a timeout, no responders while a stream
// elects a leader).
const ackedRetries = 3

// ackedTimeout bounds the wait for one acknowledgement.
var ackedTimeout = 10 * time.Second

// ackedRetryBudget bounds the time an AckedPublisher spends republishing.
const ackedRetryBudget = 30 * time.Second

// AckedPublisher publishes events to JetStream without waiting for each
// acknowledgement in turn: up to maxInFlight wait at once (Publish blocks
// beyond), and Wait waits for the rest. Every event carries a
// Nats-Msg-Id (the caller's, else one of its own), so an event
// republished after a lost acknowledgement is stored once. An event whose
// acknowledgement does not come (a timeout, no responders) is republished
// up to 3 times (for at most 30 s in all); one the stream refuses (full,
// no stream for its subject) or that still gets no acknowledgement is
// counted as failed, with its error. It is for one goroutine.
type AckedPublisher struct {
	c       *Conn
	js      jetstream.JetStream
	pending chan *ackedMsg
	done    chan struct{}
	idBase  string
	seq     uint64
	closed  bool

	// collect's: when republishing began, and its last pause.
	firstRetry, lastPause time.Time

	mu     sync.Mutex
	stats  AckStats
	cancel context.CancelFunc
	ctx    context.Context
}

type ackedMsg struct {
	fut jetstream.PubAckFuture
	msg *nats.Msg
}

// AckStats counts an AckedPublisher's events.
type AckStats struct {
	// Acked is the events the stream acknowledged (duplicates included:
	// the stream had them already).
	Acked int64
	// Failed is the events the stream refused or never acknowledged.
	Failed int64
	// Retried is the republications after a missing acknowledgement.
	Retried int64
	// Errors holds the first few failures' errors.
	Errors []error
}

// NewAckedPublisher returns a publisher keeping at most maxInFlight
// events unacknowledged (at least 1).
func (c *Conn) NewAckedPublisher(maxInFlight int) (*AckedPublisher, error) {
	maxInFlight = max(maxInFlight, 1)
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(maxInFlight+1), jetstream.WithPublishAsyncTimeout(ackedTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	p := &AckedPublisher{c: c, js: js, pending: make(chan *ackedMsg, maxInFlight), done: make(chan struct{}),
		idBase: "reactord-" + hex.EncodeToString(b[:]) + "-", ctx: ctx, cancel: cancel}
	go p.collect()
	return p, nil
}

// Publish sends one event envelope on the tag's subject; it blocks while
// maxInFlight events wait for their acknowledgement. An error means the
// event was not sent (it is not counted in AckStats).
func (p *AckedPublisher) Publish(tag string, body []byte, meta Meta) error {
	if p.closed {
		return errors.New("publishing after Wait")
	}
	p.seq++
	if meta.MsgID == "" {
		meta.MsgID = p.idBase + strconv.FormatUint(p.seq, 10)
	}
	msg := &nats.Msg{Subject: p.c.streamSubject(tag, body, meta), Data: body, Header: meta.header()}
	fut, err := p.js.PublishMsgAsync(msg)
	for errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		// The server acknowledges slower than we publish (it flushes each
		// write to disk): each try waited for room; wait on.
		fut, err = p.js.PublishMsgAsync(msg)
	}
	if err != nil {
		return fmt.Errorf("publishing %s to JetStream: %w", tag, err)
	}
	p.pending <- &ackedMsg{fut: fut, msg: msg}
	return nil
}

// collect waits for each acknowledgement in publication order.
func (p *AckedPublisher) collect() {
	defer close(p.done)
	for m := range p.pending {
		p.settle(m)
	}
}

func (p *AckedPublisher) settle(m *ackedMsg) {
	var err error
	select {
	case <-m.fut.Ok():
		p.count(nil, 0)
		return
	case err = <-m.fut.Err():
	case <-p.ctx.Done():
		p.count(fmt.Errorf("%s: %w", m.msg.Subject, p.ctx.Err()), 0)
		return
	}
	retries := 0
	for ; retries < ackedRetries && transientPublishError(err) && p.retryAllowed(); retries++ {
		if wait := time.Duration(100<<(2*retries)) * time.Millisecond; time.Since(p.lastPause) > wait {
			// Pause once per wave of failures (a node dying fails all
			// in flight), not once per event.
			select {
			case <-time.After(wait):
			case <-p.ctx.Done():
				p.count(fmt.Errorf("%s: %w", m.msg.Subject, p.ctx.Err()), retries)
				return
			}
			p.lastPause = time.Now()
		}
		ctx, cancel := context.WithTimeout(p.ctx, ackedTimeout)
		_, err = p.js.PublishMsg(ctx, &nats.Msg{Subject: m.msg.Subject, Data: m.msg.Data, Header: m.msg.Header})
		cancel()
		if err == nil {
			p.count(nil, retries+1)
			return
		}
	}
	p.count(fmt.Errorf("%s: %w", m.msg.Subject, err), retries)
}

// retryAllowed bounds the time spent republishing: after ackedRetryBudget
// from the first republication, failures are counted without more tries.
func (p *AckedPublisher) retryAllowed() bool {
	if p.firstRetry.IsZero() {
		p.firstRetry = time.Now()
	}
	return time.Since(p.firstRetry) < ackedRetryBudget
}

func (p *AckedPublisher) count(err error, retries int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Retried += int64(retries)
	if err == nil {
		p.stats.Acked++
		return
	}
	p.stats.Failed++
	if len(p.stats.Errors) < 5 {
		p.stats.Errors = append(p.stats.Errors, err)
	}
}

// transientPublishError reports a publish that may succeed if sent again:
// no acknowledgement in time, or no stream answering yet.
func transientPublishError(err error) bool {
	// An API error (the stream is full, refuses the message) is final.
	return errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// Wait waits for every acknowledgement (or ctx's end, which counts those
// still missing as failed) and returns the counts. Publish must not be
// called after Wait.
func (p *AckedPublisher) Wait(ctx context.Context) AckStats {
	if !p.closed {
		p.closed = true
		close(p.pending)
	}
	stop := context.AfterFunc(ctx, p.cancel)
	defer stop()
	<-p.done
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Errors = append([]error(nil), st.Errors...)
	return st
}
