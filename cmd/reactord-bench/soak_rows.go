package main

import (
	"context"
	"sync"
	"time"
)

// auditRows counts the audit store's rows for the samples, one count at a
// time, in a goroutine of its own. A count scans every audit table (a
// gigabyte after an hour of a soak); started at every sample while the
// last still ran, the counts piled up on the database server (20 scans at
// once in a two-hour run of 2026-12-08: the replicas' writes starved, the
// events waited minutes for their reactions). A sample reads the last
// count; the next starts no sooner than rowsGap, or five times what the
// last one took, after it ended.
type auditRows struct {
	c    rowCounter
	busy chan struct{} // holds a token through a count: never two at once

	mu sync.Mutex
	n  int64 // the last count's total, 0 before the first
}

// newAuditRows returns the counter of c's rows.
func newAuditRows(c rowCounter) *auditRows {
	return &auditRows{c: c, busy: make(chan struct{}, 1)}
}

// rowsGap is the least time between two counts of the audit rows.
const rowsGap = time.Minute

// run counts until ctx ends.
func (a *auditRows) run(ctx context.Context) {
	for {
		begin := time.Now()
		_ = a.count(ctx) // a sample reads the last total; the end's count says why one failed
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(rowsGap, 5*time.Since(begin))):
		}
	}
}

// count counts the rows now, after a count that runs, and keeps the total
// (a count that failed keeps the last one, and is returned).
func (a *auditRows) count(ctx context.Context) error {
	a.busy <- struct{}{}
	defer func() { <-a.busy }()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rows, err := a.c.Rows(cctx)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range rows {
		total += n
	}
	a.mu.Lock()
	a.n = total
	a.mu.Unlock()
	return nil
}

// last is the last count's total.
func (a *auditRows) last() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
