package engine

import (
	"time"

	"github.com/reactord/reactord/matchers"
	"github.com/reactord/reactord/store"
)

// Archive keeps the daemon's audit trail: events (optionally filtered),
// job publishes and returns in Salt's job-cache tables, and the reaction
// ledger, through a batching store.Writer.
type Archive struct {
	// W is the batching writer.
	W *store.Writer
	// KeepAll keeps saltutil.find_job polling (its events, jobs and
	// returns) and Salt's legacy duplicate tags, which are left out by
	// default.
	KeepAll bool
	// Tags, when set, restricts archived events to these globs (job
	// returns and publishes are always kept).
	Tags []*matchers.Glob
	// MasterID is Salt's master id: it is stored with each event (Salt's
	// salt_events.master_id) and runner and wheel jobs return under it, as
	// in Salt's job cache.
	MasterID string
}

// record archives one event; it reports false when the writer's buffer was
// full (the caller leaves the event for redelivery or counts it in reactord_archive_dropped_total).
func (a *Archive) record(id, tag string, raw []byte, now time.Time) bool {
	jobs, returns, keep := store.Classify(tag, raw, a.MasterID, a.KeepAll)
	ok := true
	for i := range jobs {
		ok = a.W.Add(&jobs[i]) && ok
	}
	for i := range returns {
		ok = a.W.Add(&returns[i]) && ok
	}
	if keep && a.tagKept(tag) {
		ok = a.W.Add(&store.Event{ID: id, Tag: tag, Data: append([]byte(nil), raw...), MasterID: a.MasterID, Time: now}) && ok
	}
	return ok
}

func (a *Archive) tagKept(tag string) bool {
	if len(a.Tags) == 0 {
		return true
	}
	for _, g := range a.Tags {
		if g.Match(tag) {
			return true
		}
	}
	return false
}

// ledger adds one ledger entry (a nil Archive keeps none).
func (a *Archive) ledger(e store.LedgerEntry) {
	if a == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	a.W.Add(&e)
}
