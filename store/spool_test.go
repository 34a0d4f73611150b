package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestSpoolRecordRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	recs := []any{
		Event{ID: "a-1", Tag: "salt/minion/web1/start", Data: raw(`{"id":"web1"}`), MasterID: "m", Time: at},
		Event{Tag: "t"},
		Job{JID: "20240101", Load: raw(`{"fun":"test.ping"}`), Time: at},
		Return{JID: "j", MinionID: "web1", Fun: "test.ping", Return: raw(`true`), Success: true, FullRet: raw(`{}`), Time: at},
		Return{JID: "j", MinionID: "web2"},
		LedgerEntry{EventID: "a-1", Tag: "t", Stage: StageDispatched, Rule: "salt/*", File: "/srv/r.sls", ReactionID: "x", JID: "j", Minion: "web1", Detail: "ok", Time: at},
	}
	for _, r := range recs {
		got, err := decodeRecord(encodeRecord(nil, r))
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		// time.Unix loses the monotonic reading and location only.
		if !reflect.DeepEqual(normal(got), normal(r)) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, r)
		}
	}
	for _, bad := range [][]byte{nil, {'X'}, {kindEvent, 200}, encodeRecord(nil, recs[0])[:10]} {
		if _, err := decodeRecord(bad); err == nil {
			t.Errorf("decodeRecord(%q) accepted damaged input", bad)
		}
	}
}

// normal gives times in UTC so that DeepEqual compares instants.
func normal(r any) any {
	switch v := r.(type) {
	case Event:
		v.Time = v.Time.UTC()
		return v
	case Job:
		v.Time = v.Time.UTC()
		return v
	case Return:
		v.Time = v.Time.UTC()
		return v
	case LedgerEntry:
		v.Time = v.Time.UTC()
		return v
	}
	return r
}

// TestWriterSpoolsDuringOutage: while the database is down, records go to
// the disk spool and count as durable (OnDurable fires, memory empties);
// once it is back, the spool is written first, in order, and emptied.
func TestWriterSpoolsDuringOutage(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	f := &fakeStore{fail: func(int, Batch) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}
	dir := t.TempDir()
	w, err := OpenWriter(f, WriterOptions{Interval: 5 * time.Millisecond, MaxBatch: 50, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var durable atomic.Int64
	for i := range 300 {
		w.Add(ev(i))
		w.OnDurable(func() { durable.Add(1) })
	}
	waitFor(t, "every record durable in the spool while the store is down", func() bool { return durable.Load() == 300 })
	if st := w.Stats(); st.Spooled != 300 || st.Pending != 0 || st.Written != 0 || st.SpoolBytes == 0 {
		t.Fatalf("during the outage: %+v", st)
	}
	// Records added during the outage queue behind the spool.
	for i := 300; i < 400; i++ {
		w.Add(ev(i))
	}
	down.Store(false)
	waitFor(t, "the spool written", func() bool { st := w.Stats(); return st.Written == 400 })
	if got := f.eventIDsWritten(); !slices.Equal(got, ids(0, 400)) {
		t.Fatalf("written out of order or incomplete: %d ids, first %v", len(got), got[:min(5, len(got))])
	}
	if st := w.Stats(); st.Spooled != 0 || st.SpoolBytes != 0 {
		t.Errorf("after recovery: %+v", st)
	}
	closeWriter(t, w)
	if fi, err := os.Stat(filepath.Join(dir, spoolFile)); err != nil || fi.Size() != 0 {
		t.Errorf("spool file after recovery: %v, %v", fi, err)
	}
}

// TestWriterCloseSpoolsForTheNextStart: a stop while the database is down
// keeps the records in the spool (Close says how many, wrapping
// ErrSpooled), and the next Writer writes them before its own.
func TestWriterCloseSpoolsForTheNextStart(t *testing.T) {
	dir := t.TempDir()
	down := &fakeStore{fail: func(int, Batch) error { return errors.New("connection refused") }}
	w, err := OpenWriter(down, WriterOptions{Interval: time.Hour, RetryMin: time.Hour, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		w.Add(ev(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = w.Close(ctx)
	if !errors.Is(err, ErrSpooled) {
		t.Fatalf("Close = %v, want ErrSpooled", err)
	}
	t.Logf("Close: %v", err)
	if st := w.Stats(); st.Spooled != 40 || st.Pending != 0 {
		t.Fatalf("stats = %+v", st)
	}

	// The store holds each write until the test lets it through.
	up := &fakeStore{gate: make(chan struct{})}
	w2, err := OpenWriter(up, WriterOptions{Interval: 5 * time.Millisecond, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st := w2.Stats(); st.Spooled != 40 {
		t.Fatalf("restored %d records, want 40", st.Spooled)
	}
	waitFor(t, "the spool's batch at the gate", func() bool { up.mu.Lock(); defer up.mu.Unlock(); return up.atGate > 0 })
	w2.Add(ev(40))
	flushed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		flushed <- w2.Flush(ctx)
	}()
	up.gate <- struct{}{} // the restored records
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) before the record added after the restart was written", err)
	case <-time.After(100 * time.Millisecond):
	}
	up.gate <- struct{}{} // the new record
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got := up.eventIDsWritten(); !slices.Equal(got, ids(0, 41)) {
		t.Fatalf("written = %v", got)
	}
	close(up.gate)
	closeWriter(t, w2)
	if got := up.eventIDsWritten(); !slices.Equal(got, ids(0, 41)) {
		t.Fatalf("written = %v", got)
	}
}

// TestWriterSpoolSurvivesATornAppend: a crash in the middle of an append
// leaves part of a frame; the next start cuts it and keeps the rest. A
// crash after the database took a batch but before the head moved writes
// that batch again (at least once), never skips one.
func TestWriterSpoolSurvivesATornAppend(t *testing.T) {
	dir := t.TempDir()
	sp, _, _, err := openSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := sp.append([]any{ev(i)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, off, err := sp.peek(3)
	if err != nil || len(recs) != 3 {
		t.Fatalf("peek = %d, %v", len(recs), err)
	}
	if err := sp.advance(3, off); err != nil {
		t.Fatal(err)
	}
	end := sp.bytes()
	sp.close()
	// Half a frame at the end.
	f, err := os.OpenFile(filepath.Join(dir, spoolFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{40, 0, 0, 0, 1, 2, 3, 4, 'E', 1})
	f.Close()

	sp2, restored, torn, err := openSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sp2.close()
	if _, _, _, err := openSpool(dir, 0); err == nil {
		t.Fatal("a second open of a spool in use succeeded")
	}
	if restored != 7 || torn != 10 || sp2.bytes() != end {
		t.Fatalf("reopen: restored %d torn %d end %d; want 7, 10, %d", restored, torn, sp2.bytes(), end)
	}
	recs, _, err = sp2.peek(100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.(Event).ID)
	}
	if !slices.Equal(got, ids(3, 10)) {
		t.Fatalf("records after reopen = %v", got)
	}
}

// TestWriterSpoolFull: past its bound the spool refuses, records wait in
// memory (not durable: OnDurable waits), and beyond MaxBuffer Add refuses
// and counts them. Its clock is a bubble's: the records come 200 µs apart
// whatever the machine's load.
func TestWriterSpoolFull(t *testing.T) { synctest.Test(t, testWriterSpoolFull) }

func testWriterSpoolFull(t *testing.T) {
	f := &fakeStore{fail: func(int, Batch) error { return errors.New("connection refused") }}
	w, err := OpenWriter(f, WriterOptions{Interval: 5 * time.Millisecond, MaxBatch: 10, MaxBuffer: 20, RetryMin: 5 * time.Millisecond, RetryMax: 5 * time.Millisecond,
		SpoolDir: t.TempDir(), SpoolLimit: 2000})
	if err != nil {
		t.Fatal(err)
	}
	var durable atomic.Int64
	added := 0
	for i := range 200 {
		if w.Add(ev(i)) {
			added++
			w.OnDurable(func() { durable.Add(1) })
		}
		time.Sleep(200 * time.Microsecond)
	}
	waitFor(t, "the buffer to fill", func() bool { return w.Stats().Pending > 0 })
	st := w.Stats()
	t.Logf("stats = %+v, added %d, durable %d", st, added, durable.Load())
	if st.SpoolBytes > 2000 || st.Spooled == 0 {
		t.Errorf("spool bound not kept: %+v", st)
	}
	if st.Dropped == 0 || int(st.Dropped)+added != 200 {
		t.Errorf("dropped %d + added %d != 200", st.Dropped, added)
	}
	if int(durable.Load()) > st.Spooled {
		t.Errorf("%d callbacks fired for %d spooled records: records in memory counted as durable", durable.Load(), st.Spooled)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); err == nil || errors.Is(err, ErrSpooled) {
		t.Errorf("Close with records neither written nor spooled = %v; want an error that is not ErrSpooled", err)
	}
}

// TestWriterOnDurableWithoutSpool: without a spool, durable means written.
func TestWriterOnDurableWithoutSpool(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	f := &fakeStore{fail: func(int, Batch) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	}}
	w := NewWriter(f, WriterOptions{Interval: 5 * time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond})
	var fired atomic.Int64
	w.Add(ev(0))
	w.OnDurable(func() { fired.Add(1) })
	waitFor(t, "two failed writes", func() bool { return w.Stats().Failures >= 2 })
	if fired.Load() != 0 {
		t.Fatal("OnDurable fired while the record was only in memory")
	}
	down.Store(false)
	waitFor(t, "OnDurable after the write", func() bool { return fired.Load() == 1 })
	w.OnDurable(func() { fired.Add(1) }) // nothing pending: at once
	if fired.Load() != 2 {
		t.Fatal("OnDurable with nothing pending did not fire at once")
	}
	closeWriter(t, w)
}

// TestWriterDurable: Durable writes at once what waits for the next
// Interval and returns once every OnDurable callback registered before
// it ran; with the store down and no spool it ends with its context, the
// callbacks not run.
func TestWriterDurable(t *testing.T) {
	var down atomic.Bool
	f := &fakeStore{fail: func(int, Batch) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	}}
	w := NewWriter(f, WriterOptions{Interval: time.Hour, RetryMin: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Durable(ctx); err != nil {
		t.Fatalf("nothing pending: %v", err)
	}
	var fired atomic.Int64
	for i := range 3 {
		w.Add(ev(i))
		w.OnDurable(func() { fired.Add(1) })
	}
	if err := w.Durable(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fired.Load(); n != 3 || w.Stats().Written != 3 {
		t.Fatalf("Durable returned with %d of 3 callbacks run and %d records written", n, w.Stats().Written)
	}

	down.Store(true)
	w.Add(ev(3))
	w.OnDurable(func() { fired.Add(1) })
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := w.Durable(short); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 records not durable") {
		t.Errorf("Durable with the store down = %v; want the deadline, and how many records wait", err)
	}
	if fired.Load() != 3 {
		t.Error("a callback ran for a record only in memory")
	}
	down.Store(false)
	closeWriter(t, w)
	if fired.Load() != 4 {
		t.Errorf("%d callbacks ran after the store came back, want 4", fired.Load())
	}
}

// TestWriterDurableWaitsForTheCallbacksUnderWay: Durable returns only once
// the callbacks the background loop took before it have run, though every
// record was durable already when it was called (the daemon's stop: the
// events' acknowledgements must all be sent when it returns).
func TestWriterDurableWaitsForTheCallbacksUnderWay(t *testing.T) {
	w := NewWriter(&fakeStore{}, WriterOptions{Interval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	var second atomic.Bool
	w.Add(ev(0))
	w.OnDurable(func() { close(entered); <-release })
	w.OnDurable(func() { second.Store(true) })
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	<-entered // the first callback runs; the second waits behind it
	returned := make(chan error, 1)
	go func() { returned <- w.Durable(ctx) }()
	select {
	case err := <-returned:
		t.Fatalf("Durable returned (%v) while a callback taken before it was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if !second.Load() {
		t.Fatal("Durable returned before the callbacks registered before it ran")
	}
	closeWriter(t, w)
}

// TestWriterDurableSpoolsDuringAnOutage: with the database down, Durable
// moves what memory holds to the spool at once instead of waiting for the
// next retry (up to RetryMax).
func TestWriterDurableSpoolsDuringAnOutage(t *testing.T) {
	f := &fakeStore{fail: func(int, Batch) error { return errors.New("connection refused") }}
	w, err := OpenWriter(f, WriterOptions{Interval: 5 * time.Millisecond, RetryMin: time.Hour, RetryMax: time.Hour, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w.Add(ev(0))
	waitFor(t, "a failed write", func() bool { return w.Stats().Failures >= 1 && w.Stats().Spooled == 1 })
	var fired atomic.Bool
	w.Add(ev(1)) // in memory: the loop waits an hour before its next try
	w.OnDurable(func() { fired.Store(true) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Durable(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); !fired.Load() || st.Spooled != 2 || st.Pending != 0 {
		t.Fatalf("after Durable: callback run %v, %+v", fired.Load(), st)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := w.Close(short); !errors.Is(err, ErrSpooled) {
		t.Fatalf("Close = %v, want the records kept in the spool", err)
	}
}
