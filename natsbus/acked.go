package natsbus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackedRetries is how many times AckedPublisher republishes an event whose
// acknowledgement did not come (a timeout, no responders while a stream
// elects a leader).
const ackedRetries = 3

// AckedPublisher publishes events to JetStream without waiting for each
// acknowledgement in turn, through a BatchPublisher (atomic batches where
// the server has them, each written and flushed once): up to maxInFlight
// events wait at once (Publish blocks beyond), and Wait waits for the
// rest. Every event carries a Nats-Msg-Id (the caller's, else one of its
// own), so an event republished after a lost acknowledgement is stored
// once. An event whose acknowledgement does not come (a timeout, no
// responders) is republished up to 3 times; one the stream refuses (full,
// no stream for its subject) or that still gets no acknowledgement is
// counted as failed, with its error. It is for one goroutine.
type AckedPublisher struct {
	bp     *BatchPublisher
	closed bool

	mu    sync.Mutex
	stats AckStats
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

// NewAckedPublisher returns a publisher keeping at most about maxInFlight
// events unacknowledged (at least 1): batches of up to
// min(maxInFlight/DefaultBatchInFlight, DefaultBatchMax), DefaultBatchInFlight
// of them in flight. It logs nothing (the caller reports).
func (c *Conn) NewAckedPublisher(maxInFlight int) (*AckedPublisher, error) {
	maxInFlight = max(maxInFlight, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bp, err := c.NewBatchPublisher(ctx, BatchOptions{MaxBatch: min(max(maxInFlight/DefaultBatchInFlight, 1), DefaultBatchMax),
		Retries: ackedRetries, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	return &AckedPublisher{bp: bp}, nil
}

// Publish sends one event envelope on the tag's subject; it blocks while
// maxInFlight events wait for their acknowledgement. An error means the
// event was not sent (it is not counted in AckStats).
func (p *AckedPublisher) Publish(tag string, body []byte, meta Meta) error {
	if p.closed {
		return errors.New("publishing after Wait")
	}
	return p.bp.Publish(tag, body, meta, p.count)
}

func (p *AckedPublisher) count(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
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
	p.closed = true
	p.bp.Close(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Retried = p.bp.Stats().Retried
	st.Errors = append([]error(nil), st.Errors...)
	return st
}
