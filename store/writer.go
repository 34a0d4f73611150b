package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
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
	// SpoolDir, when set, is where records go when the database fails: a
	// disk FIFO (appended and fsynced) that the Writer empties into the
	// database, oldest first, once it answers again. Records in the spool
	// count as durable (see OnDurable), and what it holds at Close, or
	// after a crash, is written by the next Writer on the same directory.
	SpoolDir string
	// SpoolLimit bounds the spool file, in bytes (zero:
	// DefaultSpoolLimit).
	SpoolLimit int64
	// Logger, if set, receives failed writes and discarded records: the
	// first failure at once, then a summary at most once a minute, and
	// the end of an outage with its length.
	Logger *slog.Logger
}

// DefaultSpoolLimit bounds the spool file when WriterOptions.SpoolLimit is
// zero: 1 GiB.
const DefaultSpoolLimit = 1 << 30

// WriterStats are a Writer's counters.
type WriterStats struct {
	// Written is the number of records written.
	Written int64
	// Pending is the number of records held in memory and not yet
	// written.
	Pending int
	// Spooled is the number of records in the disk spool, waiting for the
	// database.
	Spooled int
	// SpoolBytes is the size of those records in the spool file.
	SpoolBytes int64
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

// ErrSpooled is wrapped by Close's error when the records it could not
// write are all in the disk spool: nothing is lost, the next Writer on the
// same SpoolDir writes them.
var ErrSpooled = errors.New("store: records kept in the spool for the next start")

// Writer batches records and writes them to a Store in the background: it
// writes every Interval, and as soon as MaxBatch records are waiting. When
// the store fails (the database is down), it keeps the records and retries
// with exponential backoff. With a SpoolDir it moves them to a disk spool
// meanwhile, so that they are durable and memory stays free; without one,
// or once the spool is full, it holds at most MaxBuffer records, and beyond
// that Add refuses records and counts them in Dropped, so the caller
// decides what to do with them (JetStream leaves events unacknowledged,
// core NATS counts an overflow). Records are written in the order they were
// added, the spool's first.
//
// When the database refuses a batch because of its data (ErrRejected), the
// Writer halves the batch until it finds the offending record, discards it
// (counted in Rejected, logged) and writes the rest.
//
// Delivery into the store is at least once: when a connection dies while
// COMMIT is under way, the commit may have succeeded without the Writer
// hearing of it, and the retry stores that batch a second time; a crash
// writes the spool's batch in flight again.
//
// A Writer is safe for concurrent use. It does not close its Store.
type Writer struct {
	s    Store
	o    WriterOptions
	kick chan struct{}
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	// sp is touched by the background loop only (and by Close once the
	// loop has ended).
	sp *spool

	mu  sync.Mutex
	buf []any // held records, oldest first; buf[0] is the next to write
	// Every record has a sequence number, its place in the order of Add.
	// added counts the records ever accepted; removed those that left
	// memory (written, rejected or spooled); stored those the database
	// took or refused. Records leave in order, so everything added before
	// a moment is durable once removed reaches added's value at that
	// moment, and written once stored does.
	added, removed, stored uint64
	spooled                int           // records in the spool: sequence numbers stored+1..removed
	spoolBytes             int64         // their size in the file
	flushTo                uint64        // write everything until stored reaches it, without waiting for Interval
	closed                 bool          // Add refuses records
	progress               chan struct{} // closed and replaced whenever records are written
	waiters                []waiter      // OnDurable callbacks, by mark
	stats                  WriterStats

	failing   time.Time      // when the current outage began (zero: none)
	failed    int            // attempts failed in the current outage
	failLog   *ratelog.Every // the current outage's lines: its first, then one a minute
	spoolErrs int            // spool appends failed in the current outage
}

// waiter is an OnDurable callback: fn runs once removed reaches mark.
type waiter struct {
	mark uint64
	fn   func()
}

// NewWriter starts a Writer that writes to s. A SpoolDir that cannot be
// opened is logged and the Writer runs without a spool; OpenWriter
// returns that error instead.
func NewWriter(s Store, opts WriterOptions) *Writer {
	w, err := OpenWriter(s, opts)
	if err != nil {
		if opts.Logger != nil {
			opts.Logger.Error("audit store: no disk spool; records wait in memory only", "err", err)
		}
		opts.SpoolDir = ""
		w, _ = OpenWriter(s, opts)
	}
	return w
}

// OpenWriter starts a Writer that writes to s, opening its spool first when
// opts.SpoolDir is set; records an earlier run left in the spool are
// written before any new one.
func OpenWriter(s Store, opts WriterOptions) (*Writer, error) {
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
	if opts.SpoolLimit <= 0 {
		opts.SpoolLimit = DefaultSpoolLimit
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
	if opts.SpoolDir != "" {
		sp, restored, torn, err := openSpool(opts.SpoolDir, opts.SpoolLimit)
		if err != nil {
			stop()
			return nil, err
		}
		w.sp = sp
		// The restored records take the first sequence numbers: they
		// are durable (removed) and not yet stored.
		w.spooled, w.spoolBytes = restored, sp.bytes()
		w.added, w.removed = uint64(restored), uint64(restored)
		if opts.Logger != nil && (restored > 0 || torn > 0) {
			opts.Logger.Warn("audit store: records an earlier run left in the spool are written first", "records", restored, "spool", sp.Path(), "torn_bytes_cut", torn)
		}
		if restored > 0 {
			w.kick <- struct{}{}
		}
	}
	go w.run()
	return w, nil
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

// Reserve reports whether n more records fit in the buffer now; when
// they do not, it counts them in Dropped, as Add would. A caller that must
// not be refused a record later (it acts on an event before archiving it)
// asks first and adds that record with Force.
func (w *Writer) Reserve(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.buf)+n > w.o.MaxBuffer {
		w.stats.Dropped += int64(n)
		return false
	}
	return true
}

// Force adds a record as Add does, beyond MaxBuffer if need be: for a
// record Reserve made room for that others took since. It refuses (false,
// counted in Dropped) only when the Writer is closed.
func (w *Writer) Force(rec any) bool {
	switch r := rec.(type) {
	case Event, Job, Return, LedgerEntry:
	case *Event:
		rec = *r
	case *Job:
		rec = *r
	case *Return:
		rec = *r
	case *LedgerEntry:
		rec = *r
	default:
		panic(fmt.Sprintf("store: Writer.Force: unsupported record type %T (want Event, Job, Return or LedgerEntry)", rec))
	}
	return w.put(rec, true)
}

func (w *Writer) add(rec any) bool { return w.put(rec, false) }

// put appends one record, beyond MaxBuffer when force is set.
func (w *Writer) put(rec any, force bool) bool {
	w.mu.Lock()
	if w.closed || (!force && len(w.buf) >= w.o.MaxBuffer) {
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

// OnDurable calls fn once every record added before the call is durable:
// written to the database (or refused by it), or in the disk spool. It
// calls fn at once when they already are, and never when the Writer closes
// with some of them only in memory. JetStream acknowledges an event here,
// so that a crash cannot lose the event's archive records.
func (w *Writer) OnDurable(fn func()) {
	w.mu.Lock()
	mark := w.added
	if w.removed >= mark {
		w.mu.Unlock()
		fn()
		return
	}
	w.waiters = append(w.waiters, waiter{mark: mark, fn: fn})
	w.mu.Unlock()
}

// Durable waits until the OnDurable callbacks registered before the call
// have run, writing the records the Writer holds at once rather than at
// the next Interval, or until ctx ends or the Writer closes. The callbacks
// run in the order they were registered, so the last one's running means
// all of them ran. The daemon calls it as it stops: the events it
// acknowledges once their records are durable are then acknowledged
// before it hands its partitions over and closes its consumer.
func (w *Writer) Durable(ctx context.Context) error {
	fired := make(chan struct{})
	w.mu.Lock()
	// Not OnDurable's at-once path, even when all is durable: the
	// background loop runs this callback, after the ones it took before
	// (which it may be running still).
	mark := w.added
	w.waiters = append(w.waiters, waiter{mark: mark, fn: func() { close(fired) }})
	w.flushTo = max(w.flushTo, mark)
	w.mu.Unlock()
	w.signal()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
	case <-w.done:
		w.mu.Lock()
		durable := w.removed >= mark
		w.mu.Unlock()
		if durable {
			return nil
		}
		return ErrWriterClosed
	}
	st := w.Stats()
	return fmt.Errorf("store: %d records not durable yet (%d write failures so far): %w", st.Pending, st.Failures, ctx.Err())
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
	s.Spooled = w.spooled
	s.SpoolBytes = w.spoolBytes
	return s
}

// DownSince returns when the current run of failed writes began; zero
// while the store answers.
func (w *Writer) DownSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failing
}

// Flush waits until every record added before the call is written (or
// rejected), or ctx ends. It writes them at once rather than at the next
// Interval.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	target := w.added
	if w.stored >= target {
		w.mu.Unlock()
		return nil
	}
	w.flushTo = max(w.flushTo, target)
	w.mu.Unlock()
	w.signal()
	for {
		w.mu.Lock()
		if w.stored >= target {
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
			ok := w.stored >= target
			w.mu.Unlock()
			if ok {
				return nil
			}
			return ErrWriterClosed
		}
	}
}

// Close stops taking records, writes those it holds and stops. If ctx ends
// first, it stops anyway: the records not written go to the disk spool,
// and the error wraps ErrSpooled and says how many; records that could not
// be spooled either (no SpoolDir, spool full) are lost, and the error says
// how many.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	err := w.Flush(ctx)
	w.stop()
	<-w.done
	if err == nil {
		if w.sp != nil {
			return w.sp.close()
		}
		return nil
	}
	if w.sp == nil {
		return fmt.Errorf("store: writer closed with %d records unwritten (no spool): %w", w.Stats().Pending, err)
	}
	spillErr := w.spill()
	st := w.Stats()
	closeErr := w.sp.close()
	if st.Pending > 0 {
		return fmt.Errorf("store: writer closed with %d records unwritten (%d kept in the spool %s; spooling the rest failed: %v): %w",
			st.Pending, st.Spooled, w.sp.Path(), errors.Join(spillErr, closeErr), err)
	}
	if closeErr != nil {
		return fmt.Errorf("store: writer closed; closing the spool: %w", closeErr)
	}
	return fmt.Errorf("%d records in %s, written at the next start: %w", st.Spooled, w.sp.Path(), ErrSpooled)
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
// smaller batch too when all is set or a Flush or Close asks for it; the
// spool's records first, with what memory holds moved behind them. It
// retries failed writes until they succeed and returns false only when the
// Writer stops.
func (w *Writer) drain(all bool) bool {
	size := w.o.MaxBatch // halves while looking for a rejected record
	// The jitter keeps replicas from retrying in step.
	delay := retry.Backoff{Min: w.o.RetryMin, Max: w.o.RetryMax, Jitter: 0.2}
	for {
		w.mu.Lock()
		n := len(w.buf)
		spooled := w.spooled
		now := all || w.closed || w.flushTo > w.stored
		if spooled == 0 && (n == 0 || (n < w.o.MaxBatch && !now)) {
			fns := w.ready() // a Durable's, when all was durable already
			w.mu.Unlock()
			for _, fn := range fns {
				fn()
			}
			return true
		}
		var recs []any
		k := 0
		if spooled == 0 {
			k = min(n, size)
			recs = w.buf[:k:k] // Add only appends after len(buf): these stay put
		}
		w.mu.Unlock()

		var off int64
		if spooled > 0 {
			// Keep the order: memory's records go behind the spool's.
			if n > 0 {
				_ = w.spill()
			}
			var err error
			recs, off, err = w.sp.peek(size)
			if err != nil {
				w.loseSpool(err)
				continue
			}
			k = len(recs)
		}

		err := w.write(recs)
		if err == nil {
			w.commit(k, false, spooled > 0, off)
			w.resumed()
			size = min(size*2, w.o.MaxBatch)
			delay.Reset()
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
			if spooled > 0 {
				// The record's end is the next frame's start.
				_, off, _ = w.sp.peek(1)
			}
			w.commit(1, true, spooled > 0, off)
			continue
		}
		w.failure(err, k)
		if spooled == 0 && w.sp != nil {
			// The database is down: make the records durable on disk
			// meanwhile, and free the memory.
			_ = w.spill()
		}
		if !w.backoff(delay.Next()) {
			return false
		}
	}
}

// backoff waits d after a failed write, and reports false if the Writer
// stops meanwhile. A Flush or Durable meanwhile moves the records held in
// memory to the spool at once, which makes them durable, without writing
// before d is over.
func (w *Writer) backoff(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return false
		case <-t.C:
			return true
		case <-w.kick:
			w.mu.Lock()
			spill := w.sp != nil && w.flushTo > w.stored && len(w.buf) > 0
			w.mu.Unlock()
			if spill {
				_ = w.spill()
			}
		}
	}
}

// failure records a failed write and logs the first of an outage at once,
// then a summary at most once a minute.
func (w *Writer) failure(err error, records int) {
	w.mu.Lock()
	first := w.failing.IsZero()
	if first {
		w.failing = time.Now()
		w.failLog = ratelog.New(time.Minute)
	}
	w.failed++
	_, logNow := w.failLog.Tick()
	summary := !first && logNow
	failed, since, pending, spooled := w.failed, w.failing, len(w.buf), w.spooled
	w.mu.Unlock()
	if w.o.Logger == nil {
		return
	}
	switch {
	case first:
		w.o.Logger.Warn("audit store write failed; holding the records and retrying", "records", records, "spool", w.sp != nil, "error", err)
	case summary:
		w.o.Logger.Warn("audit store still failing; records held", "for", time.Since(since).Round(time.Second).String(), "failed_attempts", failed,
			"in_memory", pending, "in_spool", spooled, "error", err)
	}
}

// resumed ends an outage, logging its length.
func (w *Writer) resumed() {
	w.mu.Lock()
	since, failed := w.failing, w.failed
	w.failing, w.failed, w.spoolErrs = time.Time{}, 0, 0
	w.mu.Unlock()
	if !since.IsZero() && w.o.Logger != nil {
		w.o.Logger.Info("audit store writes resumed", "outage", time.Since(since).Round(time.Millisecond).String(), "failed_attempts", failed)
	}
}

// spill moves every record held in memory to the spool, in one fsynced
// append. Called by the background loop, or by Close once it has ended.
func (w *Writer) spill() error {
	if w.sp == nil {
		return nil
	}
	w.mu.Lock()
	k := len(w.buf)
	recs := w.buf[:k:k]
	w.mu.Unlock()
	if k == 0 {
		return nil
	}
	before := w.sp.bytes()
	if err := w.sp.append(recs); err != nil {
		w.mu.Lock()
		w.spoolErrs++
		first := w.spoolErrs == 1
		w.mu.Unlock()
		if first && w.o.Logger != nil {
			w.o.Logger.Error("audit store: cannot spool records to disk: kept in memory",
				"detail", "beyond the memory bound they are refused and counted", "records", k, "spool", w.sp.Path(), "limit_bytes", w.o.SpoolLimit, "err", err)
		}
		return err
	}
	w.mu.Lock()
	clear(w.buf[:k])
	w.buf = w.buf[k:]
	if len(w.buf) == 0 {
		w.buf = nil
	}
	w.removed += uint64(k)
	w.spooled += k
	w.spoolBytes += w.sp.bytes() - before
	fns := w.ready()
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return nil
}

// loseSpool gives up a spool that cannot be read back: its records are
// counted as dropped and logged.
func (w *Writer) loseSpool(err error) {
	w.mu.Lock()
	lost := w.spooled
	w.stored += uint64(lost)
	w.stats.Dropped += int64(lost)
	w.spooled, w.spoolBytes = 0, 0
	close(w.progress)
	w.progress = make(chan struct{})
	w.mu.Unlock()
	rerr := w.sp.reset()
	if w.o.Logger != nil {
		w.o.Logger.Error("audit store: the spool cannot be read back; its records are lost", "records", lost, "err", errors.Join(err, rerr))
	}
}

// commit takes the first k records off the memory buffer, or off the spool
// (up to off in its file), once the database took them (or rejected them).
func (w *Writer) commit(k int, rejected, fromSpool bool, off int64) {
	if fromSpool {
		before := w.sp.bytes()
		if err := w.sp.advance(k, off); err != nil && w.o.Logger != nil {
			w.o.Logger.Error("audit store: spool", "err", err)
		}
		w.mu.Lock()
		w.spooled -= k
		w.spoolBytes -= before - w.sp.bytes()
	} else {
		w.mu.Lock()
		clear(w.buf[:k])
		w.buf = w.buf[k:]
		if len(w.buf) == 0 {
			w.buf = nil
		}
		w.removed += uint64(k)
	}
	w.stored += uint64(k)
	if rejected {
		w.stats.Rejected += int64(k)
	} else {
		w.stats.Written += int64(k)
	}
	close(w.progress)
	w.progress = make(chan struct{})
	fns := w.ready()
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// ready pops the OnDurable callbacks whose records are all durable; w.mu is
// held.
func (w *Writer) ready() []func() {
	i := 0
	for i < len(w.waiters) && w.waiters[i].mark <= w.removed {
		i++
	}
	if i == 0 {
		return nil
	}
	fns := make([]func(), i)
	for j := range i {
		fns[j] = w.waiters[j].fn
	}
	w.waiters = w.waiters[i:]
	if len(w.waiters) == 0 {
		w.waiters = nil
	}
	return fns
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
