package reactor

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

// record archives an event's job publish and returns, and tells whether
// the event itself is to be kept (the reactor adds it with event once it
// was handled). ok is false when the writer's buffer was full — for these
// records or for the event's (the caller leaves the event for redelivery
// or counts it in reactord_archive_dropped_total).
func (a *Archive) record(tag string, raw []byte) (ok, keep bool) {
	jobs, returns, keep := store.Classify(tag, raw, a.MasterID, a.KeepAll)
	keep = keep && a.tagKept(tag)
	need := len(jobs) + len(returns)
	if keep {
		need++
	}
	if need == 0 {
		return true, false
	}
	if !a.W.Reserve(need) {
		return false, keep
	}
	ok = a.W.Add(store.Batch{Jobs: jobs, Returns: returns})
	return ok, keep
}

// event archives the event itself, under id (empty: no id row, nothing
// in the ledger refers to it). record made room for it: it is added even
// when the buffer filled up since, which the lanes bound to one record
// each.
func (a *Archive) event(id, tag string, raw []byte, now time.Time) {
	a.W.Force(store.Event{ID: id, Tag: tag, Data: append([]byte(nil), raw...), MasterID: a.MasterID, Time: now})
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

// Ledger adds one ledger entry (a nil Archive keeps none): the recorder's
// entries, and a listener's own.
func (a *Archive) Ledger(e store.LedgerEntry) {
	if a == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	a.W.Add(&e)
}
