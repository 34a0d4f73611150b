package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Store is an audit store. Implementations are safe for concurrent use.
type Store interface {
	// Write appends a batch in one transaction: either every record of b
	// is stored or none is. Job inserts are idempotent: a jid that is
	// already stored keeps its first load. An error caused by the data
	// rather than by the database being unavailable wraps ErrRejected.
	Write(ctx context.Context, b Batch) error
	// Jobs returns the jobs published at or after since (all when since
	// is zero), newest first by jid, at most limit of them (all when limit
	// is zero or negative).
	Jobs(ctx context.Context, since time.Time, limit int) ([]Job, error)
	// Lookup returns what salt-run jobs.lookup_jid shows of jid: the
	// first return of every minion that answered it (Salt's job cache
	// drops later ones), in the order they returned, with JID, MinionID,
	// Fun, Return, Success and Time set (not FullRet). A runner or wheel
	// job has one return, its master's, whose Return is the function's
	// whole event data, as Salt stores it. It returns an empty slice when
	// no minion returned.
	Lookup(ctx context.Context, jid string) ([]Return, error)
	// Events returns the archived events stored at or after since (all
	// when since is zero) whose tag matches tagGlob with Salt's fnmatch
	// rules (every tag when tagGlob is empty), newest first, at most limit
	// of them (all when limit is zero or negative).
	Events(ctx context.Context, since time.Time, tagGlob string, limit int) ([]Event, error)
	// Trace returns, oldest first, every ledger entry whose jid or event
	// id is id. For an event id it adds the entries of the jobs that event
	// dispatched; for a jid, the entries of the event that dispatched it.
	Trace(ctx context.Context, id string) ([]LedgerEntry, error)
	// Ledger returns the ledger entries of one stage (q.Stage, required)
	// that q selects, oldest first (by Time, then in the order written).
	Ledger(ctx context.Context, q LedgerQuery) ([]LedgerEntry, error)
	// Purge deletes what is older than olderThan, like Salt's keep_jobs:
	// the returns, events and ledger entries stored before it, the jobs
	// those returns belong to, and the jobs whose jid dates from before
	// it. It returns the number of rows deleted from jids, salt_returns,
	// salt_events and reactord_ledger.
	Purge(ctx context.Context, olderThan time.Time) (int64, error)
	// Close closes the database.
	Close() error
}

// Batch is a set of records written in one transaction.
type Batch struct {
	Events  []Event
	Jobs    []Job
	Returns []Return
	Ledger  []LedgerEntry
}

// Len returns the number of records in b.
func (b Batch) Len() int {
	return len(b.Events) + len(b.Jobs) + len(b.Returns) + len(b.Ledger)
}

// Event is one Salt event, stored in salt_events.
type Event struct {
	// ID is reactord's id for the event; it links the event to its ledger
	// entries. Events that Salt wrote itself read back with an empty ID.
	ID string
	// Tag is the event tag.
	Tag string
	// Data is the event data, a JSON document.
	Data json.RawMessage
	// MasterID is the id of the master the event came from.
	MasterID string
	// Time is when the event was received; zero means the time of the
	// write.
	Time time.Time
}

// Job is a published Salt job, stored in jids.
type Job struct {
	// JID is the job id.
	JID string
	// Load is the job's load: the data of its salt/job/<jid>/new event, or
	// the load Salt's master stores for a salt-call, runner or wheel job
	// (see Classify).
	Load json.RawMessage
	// Time is when the job was published. Salt's jids table has no time
	// column: Write stores a non-zero Time as the load's "_stamp" when the
	// load has none, and reads give the load's "_stamp" or, failing that,
	// the time the jid encodes (zero for a jid that is not a time).
	Time time.Time
}

// Return is one minion's return for a job, stored in salt_returns.
type Return struct {
	// JID is the job id.
	JID string
	// MinionID is the id of the minion that returned.
	MinionID string
	// Fun is the function the job ran.
	Fun string
	// Return is what the function returned, a JSON document.
	Return json.RawMessage
	// Success reports whether the minion considered the job successful.
	Success bool
	// FullRet is the whole return: the data of the
	// salt/job/<jid>/ret/<id> event.
	FullRet json.RawMessage
	// Time is when the return arrived; zero means the time of the write.
	Time time.Time
}

// Ledger stages: what reactord did with an event.
const (
	StageMatched    = "matched"    // a reactor rule matched the event's tag (written by earlier versions only; a ledger may still hold such rows)
	StageRendered   = "rendered"   // a reaction file rendered (earlier versions only, as StageMatched)
	StageSuppressed = "suppressed" // the loop guard, throttle or debounce held a reaction back
	StageDispatched = "dispatched" // a reaction was handed to the driver (JID set when known)
	StageFailed     = "failed"     // rendering or dispatch failed
	StageReturned   = "returned"   // a dispatched job's minion returned
	StageTimeout    = "timeout"    // a dispatched job's minion did not return in time
	StageShadow     = "shadow"     // shadow mode's verdict on one decision or Salt job (Detail: a shadow.Record as JSON)
	StageRules      = "rules"      // a rule salt-run reactor.add added or reactor.delete deleted, a master reactor.set_leader paused or resumed
)

// LedgerEntry is one step reactord took for an event, stored in
// reactord_ledger.
type LedgerEntry struct {
	// EventID is reactord's id of the event.
	EventID string
	// Tag is the event tag.
	Tag string
	// Stage is one of the Stage constants.
	Stage string
	// Rule is the reactor rule (tag glob) that matched.
	Rule string
	// File is the reaction file.
	File string
	// ReactionID is the ID of the reaction in its file.
	ReactionID string
	// JID is the job the reaction started, if any.
	JID string
	// Minion is the minion the entry concerns, if any.
	Minion string
	// Detail is free text: an error, a reason, a summary.
	Detail string
	// Time is when the step happened; zero means the time of the write.
	Time time.Time
}

// LedgerQuery selects the ledger entries Store.Ledger returns.
type LedgerQuery struct {
	// Stage is the entries' stage, one of the Stage constants; it is
	// required.
	Stage string
	// Since and Until bound the entries' Time to [Since, Until); a zero
	// time leaves that side unbounded.
	Since, Until time.Time
	// Rule, when not empty, keeps the entries of that rule only (the
	// rule's tag glob, compared as it is, not matched as a glob).
	Rule string
	// Limit is the most entries returned, the oldest ones (all when zero
	// or negative).
	Limit int
}

// ErrNoStage is returned by Store.Ledger for a query without a stage.
var ErrNoStage = errors.New("store: ledger query without a stage")

// ErrRejected is wrapped by the errors of writes that the database refused
// because of the data written (a value too long or malformed for its
// column), as opposed to the database being unavailable. Retrying such a
// write as it is fails again.
var ErrRejected = errors.New("store: the database rejected the data")
