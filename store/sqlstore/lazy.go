package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/reactord/reactord/store"
	"sync"
	"time"
)

// ErrNotConnected is returned by a Lazy store's methods while its database
// cannot be opened; a Writer retries (and spools) as for any outage.
var ErrNotConnected = errors.New("store: not connected")

// Lazy is a Store whose database is opened on first use, and again on the
// next use after a failed open: the daemon starts and reacts while its
// database is down, and its Writer holds the records until Lazy connects.
type Lazy struct {
	url  string
	open func(context.Context, string) (store.Store, error)

	mu      sync.Mutex
	s       store.Store
	lastErr error
	tried   time.Time
}

// NewLazy returns a Lazy store for url, opened with OpenWith and o.
func NewLazy(url string, o Options) *Lazy {
	return &Lazy{url: url, open: func(ctx context.Context, url string) (store.Store, error) { return OpenWith(ctx, url, o) }}
}

// get returns the open store, opening it when it is not, at most once a
// second.
func (l *Lazy) get(ctx context.Context) (store.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	if !l.tried.IsZero() && time.Since(l.tried) < time.Second {
		return nil, fmt.Errorf("%w: %v", ErrNotConnected, l.lastErr)
	}
	l.tried = time.Now()
	s, err := l.open(ctx, l.url)
	if err != nil {
		l.lastErr = err
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	l.s = s
	return s, nil
}

// Connected reports whether the database has been opened.
func (l *Lazy) Connected() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s != nil
}

// Write writes b once the database is open.
func (l *Lazy) Write(ctx context.Context, b store.Batch) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Write(ctx, b)
}

// Jobs lists jobs once the database is open.
func (l *Lazy) Jobs(ctx context.Context, since time.Time, limit int) ([]store.Job, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Jobs(ctx, since, limit)
}

// Lookup looks a job up once the database is open.
func (l *Lazy) Lookup(ctx context.Context, jid string) ([]store.Return, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Lookup(ctx, jid)
}

// Events lists events once the database is open.
func (l *Lazy) Events(ctx context.Context, since time.Time, tagGlob string, limit int) ([]store.Event, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Events(ctx, since, tagGlob, limit)
}

// Trace traces an id once the database is open.
func (l *Lazy) Trace(ctx context.Context, id string) ([]store.LedgerEntry, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Trace(ctx, id)
}

// Ledger reads ledger entries once the database is open.
func (l *Lazy) Ledger(ctx context.Context, q store.LedgerQuery) ([]store.LedgerEntry, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Ledger(ctx, q)
}

// Purge purges once the database is open.
func (l *Lazy) Purge(ctx context.Context, olderThan time.Time) (int64, error) {
	s, err := l.get(ctx)
	if err != nil {
		return 0, err
	}
	return s.Purge(ctx, olderThan)
}

// Close closes the database if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil {
		return nil
	}
	return l.s.Close()
}
