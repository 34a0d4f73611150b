package sqlstore

import (
	"context"
	"errors"
	"github.com/reactord/reactord/store"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestLazyStoreConnectsLater: a Writer on a Lazy store whose database is
// not there yet keeps (and spools) the records, and writes them once the
// database can be opened.
func TestLazyStoreConnectsLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.db")
	var up atomic.Bool
	var opens atomic.Int64
	l := &Lazy{url: "sqlite://" + path, open: func(ctx context.Context, url string) (store.Store, error) {
		opens.Add(1)
		if !up.Load() {
			return nil, errors.New("dial tcp 127.0.0.1:3306: connection refused")
		}
		return Open(ctx, url)
	}}
	w, err := store.OpenWriter(l, store.WriterOptions{Interval: 5 * time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		w.Add(ev(i))
	}
	waitFor(t, "records spooled while the database is unreachable", func() bool { return w.Stats().Spooled == 50 })
	if l.Connected() {
		t.Fatal("Connected before the database is up")
	}
	if _, err := l.Jobs(context.Background(), time.Time{}, 0); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Jobs while down = %v, want ErrNotConnected", err)
	}
	if n := opens.Load(); n > 3 {
		t.Errorf("%d opens within a few hundred milliseconds: Lazy retries more than once a second", n)
	}
	up.Store(true)
	waitFor(t, "records written once the database is up", func() bool { return w.Stats().Written == 50 })
	closeWriter(t, w)
	evs, err := l.Events(context.Background(), time.Time{}, "", 0)
	if err != nil || len(evs) != 50 {
		t.Fatalf("stored %d events (%v), want 50", len(evs), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), "nosuch://x"); !errors.Is(err, ErrBadURL) {
		t.Errorf("Open(nosuch://) = %v, want ErrBadURL", err)
	}
}
