package sqlstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/store"
)

// TestDatabaseDownMidStream streams events through a Writer while the
// database becomes unavailable for a second (SQLite: another connection
// holds the write lock; MySQL and PostgreSQL: the store's connections are
// killed over and over from a second connection), and checks that once it
// recovers every event is stored.
//
// (Making the SQLite file or its directory read-only is no test of this on
// a machine where the tests run as root, who writes regardless, nor with an
// open WAL database, whose files are already open for writing.)
func TestDatabaseDownMidStream(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		t.Parallel() // each backend on a database of its own; mostly waiting out the outage
		s := db.open(t)
		w := store.NewWriter(s, store.WriterOptions{
			Interval:     10 * time.Millisecond,
			MaxBatch:     200,
			RetryMin:     10 * time.Millisecond,
			RetryMax:     100 * time.Millisecond,
			WriteTimeout: 5 * time.Second,
			SpoolDir:     t.TempDir(),
		})
		var durable atomic.Int64
		const n = 6000
		stop := make(chan struct{})
		outageDone := make(chan struct{})
		stopped := false
		// The events' rates: about 3000 a second (pace: 30 a tick), one
		// a tick while waiting for a failure (slow), and a retry a tick
		// while the buffer is full (room).
		pace, slow, room := time.NewTicker(10*time.Millisecond), time.NewTicker(20*time.Millisecond), time.NewTicker(time.Millisecond)
		defer pace.Stop()
		defer slow.Stop()
		defer room.Stop()
		for i := range n {
			if i == n/4 {
				go func() {
					defer close(outageDone)
					db.outage(t, stop)
				}()
			}
			// The outage must have taken effect before it ends: on a
			// loaded machine the SQLite outage's BEGIN EXCLUSIVE can
			// wait behind the writer's own transactions for longer than
			// the second the events take (it once took over 15 s with
			// the race detector and another test run on the machine).
			// From three quarters on, the events come slowly (the writer
			// idles between them, so the lock can be taken, and still
			// has writes to fail) until one write has failed; then the
			// outage ends.
			if !stopped && i >= n/4*3 {
				if w.Stats().Failures > 0 {
					close(stop)
					stopped = true
				} else {
					<-slow.C
				}
			}
			for !w.Add(benchEvent(i)) {
				<-room.C // the buffer is full: try again at the next tick
			}
			w.OnDurable(func() { durable.Add(1) })
			// About 3000 events a second: the outage lasts a second.
			if i%30 == 0 {
				<-pace.C
			}
		}
		if !stopped {
			waitForFailure(t, w, 60*time.Second)
			close(stop)
		}
		<-outageDone
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		t.Logf("writer: %+v", st)
		if st.Failures == 0 {
			t.Error("no write failed: the outage did not happen")
		}
		if durable.Load() != n {
			t.Errorf("OnDurable fired for %d of %d records", durable.Load(), n)
		}
		if st.Written != n || st.Pending != 0 || st.Spooled != 0 || st.Dropped != 0 || st.Rejected != 0 {
			t.Errorf("stats = %+v", st)
		}
		// A commit can succeed while its acknowledgement is lost with
		// the connection; the retry then stores the batch again.
		checkAllEvents(t, s, n, db.name != "sqlite")
	})
}

// waitForFailure waits until the writer has seen a failed write, or until
// limit has passed (the test then fails on its check of Failures).
func waitForFailure(t *testing.T, w *store.Writer, limit time.Duration) {
	t.Helper()
	_ = wait.Poll(limit, func() error {
		if w.Stats().Failures == 0 {
			return errors.New("no failed write yet")
		}
		return nil
	})
}
