package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactord/reactord/internal/wait"
)

// fakeStore records the batches written to it. fail, if set, decides
// whether a Write fails; gate, if set, holds each Write until it can receive.
type fakeStore struct {
	mu      sync.Mutex
	batches []Batch
	calls   int
	fail    func(call int, b Batch) error
	gate    chan struct{}
	atGate  int // writes that reached the gate
}

func (f *fakeStore) Write(ctx context.Context, b Batch) error {
	if f.gate != nil {
		f.mu.Lock()
		f.atGate++
		f.mu.Unlock()
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		if err := f.fail(f.calls, b); err != nil {
			return err
		}
	}
	f.batches = append(f.batches, b)
	return nil
}

func (f *fakeStore) Jobs(context.Context, time.Time, int) ([]Job, error) { return nil, nil }
func (f *fakeStore) Lookup(context.Context, string) ([]Return, error) {
	return nil, nil
}
func (f *fakeStore) Events(context.Context, time.Time, string, int) ([]Event, error) {
	return nil, nil
}
func (f *fakeStore) Trace(context.Context, string) ([]LedgerEntry, error)       { return nil, nil }
func (f *fakeStore) Ledger(context.Context, LedgerQuery) ([]LedgerEntry, error) { return nil, nil }
func (f *fakeStore) Purge(context.Context, time.Time) (int64, error)            { return 0, nil }
func (f *fakeStore) Close() error                                               { return nil }
func (f *fakeStore) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, b := range f.batches {
		out = append(out, b.Len())
	}
	return out
}

// eventIDsWritten returns the ids of the events written, in order.
func (f *fakeStore) eventIDsWritten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, b := range f.batches {
		out = append(out, eventIDs(b.Events)...)
	}
	return out
}

func ev(i int) Event { return Event{ID: fmt.Sprintf("e%d", i), Tag: "t", Data: raw(`{}`)} }

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("e%d", i))
	}
	return out
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 5*time.Second, what, cond)
}

func closeWriter(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWriterBatchesBySize: full batches go at once, the rest waits for the
// interval. Its clock is a bubble's: once the writer is idle, nothing more
// was written without the interval passing.
func TestWriterBatchesBySize(t *testing.T) { synctest.Test(t, testWriterBatchesBySize) }

func testWriterBatchesBySize(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, WriterOptions{MaxBatch: 100, Interval: time.Hour})
	for i := range 250 {
		w.Add(ev(i))
	}
	// Two full batches go at once; the rest waits for the interval.
	synctest.Wait()
	if st := w.Stats(); st.Written != 200 || st.Pending != 50 {
		t.Fatalf("stats = %+v", st)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.sizes(); !slices.Equal(got, []int{100, 100, 50}) {
		t.Errorf("batch sizes = %v", got)
	}
	if got := f.eventIDsWritten(); !slices.Equal(got, ids(0, 250)) {
		t.Errorf("order = %v", got)
	}
	closeWriter(t, w)
}

func TestWriterBatchesByInterval(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, WriterOptions{Interval: 20 * time.Millisecond})
	defer closeWriter(t, w)
	for i := range 10 {
		w.Add(ev(i))
	}
	waitFor(t, "the interval flush", func() bool { return w.Stats().Written == 10 })
	if got := f.sizes(); !slices.Equal(got, []int{10}) {
		t.Errorf("batch sizes = %v", got)
	}
}

func TestWriterFlush(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, WriterOptions{Interval: time.Hour})
	if err := w.Flush(context.Background()); err != nil {
		t.Fatalf("flush of nothing: %v", err)
	}
	w.Add(ev(0))
	w.Add(Job{JID: "j"})
	w.Add(&Return{JID: "j", MinionID: "m"})
	w.Add(LedgerEntry{EventID: "e0"})
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 4 || st.Pending != 0 {
		t.Errorf("stats = %+v", st)
	}
	b := f.batches[0]
	if len(b.Events) != 1 || len(b.Jobs) != 1 || len(b.Returns) != 1 || len(b.Ledger) != 1 {
		t.Errorf("batch = %+v", b)
	}

	// A Flush that cannot finish ends with its context.
	f.gate = make(chan struct{})
	w.Add(ev(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := w.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush = %v, want deadline exceeded", err)
	}
	close(f.gate)
	closeWriter(t, w)
	if st := w.Stats(); st.Written != 5 {
		t.Errorf("stats = %+v", st)
	}
}

func TestWriterBoundedBuffer(t *testing.T) {
	f := &fakeStore{gate: make(chan struct{})}
	w := NewWriter(f, WriterOptions{MaxBatch: 10, MaxBuffer: 100, Interval: time.Millisecond})
	accepted := 0
	for i := range 150 {
		if w.Add(ev(i)) {
			accepted++
		}
	}
	if accepted != 100 {
		t.Errorf("accepted %d records, want 100", accepted)
	}
	// A batch is taken all or none.
	if w.Add(Batch{Events: []Event{ev(1000), ev(1001)}}) {
		t.Error("a batch was accepted into a full buffer")
	}
	if st := w.Stats(); st.Dropped != 52 || st.Pending != 100 {
		t.Errorf("stats = %+v", st)
	}
	close(f.gate)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Room again.
	if !w.Add(Batch{Events: []Event{ev(100), ev(101)}}) {
		t.Error("a batch was refused by an empty buffer")
	}
	closeWriter(t, w)
	if st := w.Stats(); st.Written != 102 || st.Dropped != 52 || st.Pending != 0 {
		t.Errorf("stats = %+v", st)
	}
	if got := f.eventIDsWritten(); !slices.Equal(got, ids(0, 102)) {
		t.Errorf("order = %v", got)
	}
}

// TestWriterReserveForce: Reserve tells whether records fit (counting
// them dropped when not, as Add would); Force adds a record it made room
// for even when others filled the buffer since.
func TestWriterReserveForce(t *testing.T) {
	f := &fakeStore{gate: make(chan struct{})}
	w := NewWriter(f, WriterOptions{MaxBatch: 10, MaxBuffer: 4, Interval: time.Millisecond})
	if !w.Reserve(2) {
		t.Fatal("Reserve(2) refused by an empty buffer")
	}
	for i := range 4 {
		if !w.Add(ev(i)) {
			t.Fatalf("record %d refused", i)
		}
	}
	if w.Reserve(1) {
		t.Error("Reserve(1) on a full buffer")
	}
	if !w.Force(ev(4)) || !w.Force(&LedgerEntry{EventID: "ev-4", Stage: StageDispatched}) {
		t.Error("Force refused a record on a full buffer")
	}
	if st := w.Stats(); st.Dropped != 1 || st.Pending != 6 {
		t.Errorf("stats = %+v, want 1 dropped (the refused reservation), 6 pending", st)
	}
	close(f.gate)
	closeWriter(t, w)
	if w.Force(ev(5)) {
		t.Error("Force accepted a record after Close")
	}
	if st := w.Stats(); st.Written != 6 || st.Dropped != 2 {
		t.Errorf("stats = %+v, want 6 written, 2 dropped", st)
	}
}

func TestWriterRetriesUntilTheStoreRecovers(t *testing.T) {
	down := errors.New("connection refused")
	f := &fakeStore{fail: func(call int, b Batch) error {
		if call <= 4 {
			return down
		}
		return nil
	}}
	w := NewWriter(f, WriterOptions{MaxBatch: 50, Interval: time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	for i := range 120 {
		w.Add(ev(i))
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 120 || st.Failures != 4 || st.Pending != 0 {
		t.Errorf("stats = %+v", st)
	}
	if got := f.eventIDsWritten(); !slices.Equal(got, ids(0, 120)) {
		t.Errorf("order = %v", got)
	}
	closeWriter(t, w)
}

func TestWriterBackoff(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	f := &fakeStore{fail: func(call int, b Batch) error {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if call <= 5 {
			return errors.New("down")
		}
		return nil
	}}
	w := NewWriter(f, WriterOptions{Interval: time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond})
	w.Add(ev(0))
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	// Delays 10, 20, 40, 40, 40ms (less up to 20%).
	want := []time.Duration{10, 20, 40, 40, 40}
	for i, d := range want {
		got := times[i+1].Sub(times[i])
		if lo := d * time.Millisecond * 8 / 10; got < lo {
			t.Errorf("delay %d = %v, want at least %v", i, got, lo)
		}
	}
}

func TestWriterDiscardsRejectedRecords(t *testing.T) {
	f := &fakeStore{fail: func(call int, b Batch) error {
		for _, e := range b.Events {
			if strings.HasPrefix(e.Tag, "poison") {
				return fmt.Errorf("store: write: %w: Data too long", ErrRejected)
			}
		}
		return nil
	}}
	w := NewWriter(f, WriterOptions{MaxBatch: 64, Interval: time.Hour})
	var want []string
	for i := range 200 {
		e := ev(i)
		if i == 17 || i == 150 {
			e.Tag = "poison"
		} else {
			want = append(want, e.ID)
		}
		w.Add(e)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 198 || st.Rejected != 2 || st.Pending != 0 {
		t.Errorf("stats = %+v", st)
	}
	if got := f.eventIDsWritten(); !slices.Equal(got, want) {
		t.Errorf("written = %v", got)
	}
	closeWriter(t, w)
}

func TestWriterClose(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, WriterOptions{Interval: time.Hour})
	for i := range 5 {
		w.Add(ev(i))
	}
	closeWriter(t, w)
	if st := w.Stats(); st.Written != 5 {
		t.Errorf("close did not flush: %+v", st)
	}
	if w.Add(ev(5)) {
		t.Error("Add after Close accepted a record")
	}
	if st := w.Stats(); st.Dropped != 1 {
		t.Errorf("stats = %+v", st)
	}
	closeWriter(t, w) // twice is fine

	// Closing while the store is down gives up at the deadline.
	f2 := &fakeStore{fail: func(int, Batch) error { return errors.New("down") }}
	w2 := NewWriter(f2, WriterOptions{Interval: time.Millisecond, RetryMin: time.Millisecond})
	w2.Add(ev(0))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w2.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close = %v", err)
	}
	if st := w2.Stats(); st.Pending != 1 || st.Failures == 0 {
		t.Errorf("stats = %+v", st)
	}
	if err := w2.Flush(context.Background()); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("flush after close = %v", err)
	}
}

func TestWriterAddPanicsOnUnknownTypes(t *testing.T) {
	w := NewWriter(&fakeStore{}, WriterOptions{})
	defer closeWriter(t, w)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "string") {
			t.Errorf("recover() = %v", r)
		}
	}()
	w.Add("an event")
}

func TestWriterConcurrentAdds(t *testing.T) {
	f := &fakeStore{}
	w := NewWriter(f, WriterOptions{MaxBatch: 64, Interval: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				w.Add(Event{ID: fmt.Sprintf("g%d-%d", g, i)})
			}
		})
	}
	wg.Wait()
	closeWriter(t, w)
	got := f.eventIDsWritten()
	if len(got) != 8000 {
		t.Fatalf("%d events written", len(got))
	}
	// Each producer's events stay in order.
	next := map[string]int{}
	for _, id := range got {
		var g, i int
		fmt.Sscanf(id, "g%d-%d", &g, &i)
		key := fmt.Sprint(g)
		if i != next[key] {
			t.Fatalf("producer %d: event %d after %d", g, i, next[key]-1)
		}
		next[key]++
	}
	for _, n := range f.sizes() {
		if n > 64 {
			t.Errorf("batch of %d records", n)
		}
	}
}
