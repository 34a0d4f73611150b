package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// WriterOptions configures a Writer. Zero fields take their defaults.
type WriterOptions struct {
	// Interval is how often buffered records are written. Default 200ms.
	Interval time.Duration
	// MaxBatch is the most records one Write carries; as soon as that
	// many are buffered they are written without waiting for Interval.
	// Default 1000.
	MaxBatch int
	// MaxBuffer is the most records the Writer holds, written or not;
	// beyond it Add refuses records. Default 100000.
	MaxBuffer int
	// RetryMin and RetryMax bound the delay between attempts while the
	// store fails: it starts at RetryMin and doubles up to RetryMax.
	// Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// WriteTimeout limits each Write. Default 30s.
	WriteTimeout time.Duration
	// Logger, if set, receives failed writes and discarded records.
	Logger *slog.Logger
}

// WriterStats are a Writer's counters.
type WriterStats struct {
	// Written is the number of records written.
	Written int64
	// Pending is the number of records held and not yet written.
	Pending int
	// Dropped is the number of records Add refused: the buffer was full
	// or the Writer closed.
	Dropped int64
	// Failures is the number of Write calls that failed (each retry
	// counts).
	Failures int64
	// Rejected is the number of records discarded because the database
	// refused their data (see ErrRejected).
	Rejected int64
}

// ErrWriterClosed is returned by Flush when the Writer stopped before
// everything was written.
var ErrWriterClosed = errors.New("store: writer closed")

// Writer batches records and writes them to a Store in the background: it
// writes every Interval, and as soon as MaxBatch records are waiting. When
// the store fails (the database is down), it keeps the records and retries
// with exponential backoff; it holds at most MaxBuffer records, and beyond
// that Add refuses records and counts them in Dropped, so the caller
// decides what to do with them (JetStream leaves events unacknowledged,
// core NATS counts an overflow). Records are written in the order they were
// added.
//
// When the database refuses a batch because of its data (ErrRejected), the
// Writer halves the batch until it finds the offending record, discards it
// (counted in Rejected, logged) and writes the rest.
//
// Delivery into the store is at least once: when a connection dies while
// COMMIT is under way, the commit may have succeeded without the Writer
// hearing of it, and the retry stores that batch a second time.
//
// A Writer is safe for concurrent use. It does not close its Store.
type Writer struct {
	s    Store
	o    WriterOptions
	kick chan struct{}
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu  sync.Mutex
	buf []any // held records, oldest first; buf[0] is the next to write
	// added counts the records ever accepted and removed those that left
	// buf (written or rejected); records leave in order, so everything
	// added before a moment is out once removed reaches added's value at
	// that moment.
	added, removed uint64
	flushTo        uint64        // write everything until removed reaches it, without waiting for Interval
	closed         bool          // Add refuses records
	progress       chan struct{} // closed and replaced whenever records leave buf
	stats          WriterStats
}

// NewWriter starts a Writer that writes to s.
func NewWriter(s Store, opts WriterOptions) *Writer {
	if opts.Interval <= 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	if opts.MaxBuffer <= 0 {
		opts.MaxBuffer = 100000
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 100 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 10 * time.Second
	}
	opts.RetryMax = max(opts.RetryMax, opts.RetryMin)
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &Writer{
		s:        s,
		o:        opts,
		kick:     make(chan struct{}, 1),
		ctx:      ctx,
		stop:     stop,
		done:     make(chan struct{}),
		progress: make(chan struct{}),
	}
	go w.run()
	return w
}

// Add hands a record to the Writer: an Event, Job, Return or LedgerEntry
// (or a pointer to one), or a Batch, whose records are taken all or none.
// It returns false, and counts the records in Dropped, when the buffer is
// full or the Writer is closed. It panics on any other type.
func (w *Writer) Add(rec any) bool {
	switch r := rec.(type) {
	case Event, Job, Return, LedgerEntry:
		return w.add(rec)
	case *Event:
		return w.add(*r)
	case *Job:
		return w.add(*r)
	case *Return:
		return w.add(*r)
	case *LedgerEntry:
		return w.add(*r)
	case Batch:
		return w.addBatch(r)
	case *Batch:
		return w.addBatch(*r)
	}
	panic(fmt.Sprintf("store: Writer.Add: unsupported record type %T (want Event, Job, Return, LedgerEntry or Batch)", rec))
}

func (w *Writer) add(rec any) bool {
	w.mu.Lock()
	if w.closed || len(w.buf) >= w.o.MaxBuffer {
		w.stats.Dropped++
		w.mu.Unlock()
		return false
	}
	w.buf = append(w.buf, rec)
	w.added++
	full := len(w.buf) >= w.o.MaxBatch
	w.mu.Unlock()
	if full {
		w.signal()
	}
	return true
}

func (w *Writer) addBatch(b Batch) bool {
	n := b.Len()
	if n == 0 {
		return true
	}
	w.mu.Lock()
	if w.closed || len(w.buf)+n > w.o.MaxBuffer {
		w.stats.Dropped += int64(n)
		w.mu.Unlock()
		return false
	}
	for _, r := range b.Jobs {
		w.buf = append(w.buf, r)
	}
	for _, r := range b.Returns {
		w.buf = append(w.buf, r)
	}
	for _, r := range b.Events {
		w.buf = append(w.buf, r)
	}
	for _, r := range b.Ledger {
		w.buf = append(w.buf, r)
	}
	w.added += uint64(n)
	full := len(w.buf) >= w.o.MaxBatch
	w.mu.Unlock()
	if full {
		w.signal()
	}
	return true
}

// signal wakes the background loop.
func (w *Writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending = len(w.buf)
	return s
}

// Flush waits until every record added before the call is written (or
// rejected), or ctx ends. It writes them at once rather than at the next
// Interval.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	target := w.added
	if w.removed >= target {
		w.mu.Unlock()
		return nil
	}
	w.flushTo = max(w.flushTo, target)
	w.mu.Unlock()
	w.signal()
	for {
		w.mu.Lock()
		if w.removed >= target {
			w.mu.Unlock()
			return nil
		}
		progress := w.progress
		w.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			w.mu.Lock()
			ok := w.removed >= target
			w.mu.Unlock()
			if ok {
				return nil
			}
			return ErrWriterClosed
		}
	}
}

// Close stops taking records, writes those it holds and stops. If ctx ends
// first, it stops anyway and returns an error; the records not written
// stay counted in Stats().Pending.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	err := w.Flush(ctx)
	w.stop()
	<-w.done
	if err != nil {
		return fmt.Errorf("store: writer closed with %d records unwritten: %w", w.Stats().Pending, err)
	}
	return nil
}

// run is the background loop.
func (w *Writer) run() {
	defer close(w.done)
	ticker := time.NewTicker(w.o.Interval)
	defer ticker.Stop()
	for {
		all := false
		select {
		case <-w.ctx.Done():
			return
		case <-ticker.C:
			all = true
		case <-w.kick:
		}
		if !w.drain(all) {
			return
		}
	}
}

// drain writes buffered records in batches of MaxBatch, and the last,
// smaller batch too when all is set or a Flush or Close asks for it. It
// retries failed writes until they succeed and returns false only when the
// Writer stops.
func (w *Writer) drain(all bool) bool {
	size := w.o.MaxBatch // halves while looking for a rejected record
	var delay time.Duration
	failed := 0
	for {
		w.mu.Lock()
		n := len(w.buf)
		now := all || w.closed || w.flushTo > w.removed
		if n == 0 || (n < w.o.MaxBatch && !now) {
			w.mu.Unlock()
			return true
		}
		k := min(n, size)
		recs := w.buf[:k:k] // Add only appends after len(buf): these stay put
		w.mu.Unlock()

		err := w.write(recs)
		if err == nil {
			w.commit(k, false)
			if failed > 0 && w.o.Logger != nil {
				w.o.Logger.Info("audit store writes resumed", "failed_attempts", failed)
			}
			size, delay, failed = min(size*2, w.o.MaxBatch), 0, 0
			continue
		}
		w.mu.Lock()
		w.stats.Failures++
		w.mu.Unlock()
		if w.ctx.Err() != nil {
			return false
		}
		if errors.Is(err, ErrRejected) {
			if k > 1 {
				size = k / 2
				continue
			}
			if w.o.Logger != nil {
				w.o.Logger.Error("audit store rejected a record; discarding it", "record", describe(recs[0]), "error", err)
			}
			w.commit(1, true)
			continue
		}
		failed++
		if w.o.Logger != nil {
			w.o.Logger.Warn("audit store write failed; retrying", "records", k, "attempt", failed, "error", err)
		}
		if delay == 0 {
			delay = w.o.RetryMin
		} else {
			delay = min(2*delay, w.o.RetryMax)
		}
		// ±20% so that replicas do not retry in step.
		jittered := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(jittered)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// write writes records in one Write.
func (w *Writer) write(recs []any) error {
	var b Batch
	for _, r := range recs {
		switch v := r.(type) {
		case Event:
			b.Events = append(b.Events, v)
		case Job:
			b.Jobs = append(b.Jobs, v)
		case Return:
			b.Returns = append(b.Returns, v)
		case LedgerEntry:
			b.Ledger = append(b.Ledger, v)
		}
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.o.WriteTimeout)
	defer cancel()
	return w.s.Write(ctx, b)
}

// commit removes the first k records from the buffer.
func (w *Writer) commit(k int, rejected bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.buf[:k])
	w.buf = w.buf[k:]
	if len(w.buf) == 0 {
		w.buf = nil
	}
	w.removed += uint64(k)
	if rejected {
		w.stats.Rejected += int64(k)
	} else {
		w.stats.Written += int64(k)
	}
	close(w.progress)
	w.progress = make(chan struct{})
}

// describe names a record for a log line.
func describe(rec any) string {
	switch v := rec.(type) {
	case Event:
		return fmt.Sprintf("event %q tag %q", v.ID, v.Tag)
	case Job:
		return fmt.Sprintf("job %q", v.JID)
	case Return:
		return fmt.Sprintf("return of %q for job %q", v.MinionID, v.JID)
	case LedgerEntry:
		return fmt.Sprintf("ledger entry %q of event %q", v.Stage, v.EventID)
	}
	return fmt.Sprintf("%T", rec)
}
