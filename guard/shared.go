package guard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// SharedState is a key-value store the replicas of the daemon share
// (kv.State, a JetStream key-value bucket). Keys are made of
// letters, digits, dots and dashes. Every replica hands every change of
// it (its own too) to Guard.ApplyShared.
type SharedState interface {
	// Put writes key's value, kept for ttl, without waiting.
	Put(key string, value []byte, ttl time.Duration)
	// Delete removes key without waiting; its marker is kept for ttl.
	Delete(key string, ttl time.Duration)
	// Update changes key atomically across replicas: fn gets the current
	// value (nil: none) and returns the new one and true, or false to
	// leave it (Update then reports false).
	Update(ctx context.Context, key string, ttl time.Duration, fn func(old []byte) ([]byte, bool)) (bool, error)
	// Get reads key's current value from the server, not from a watch:
	// false when it has none.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Flush waits until the writes sent so far are confirmed, or ctx
	// ends.
	Flush(ctx context.Context) error
}

// The kinds of shared records: a key's first letter, then a dot.
const (
	kindJob      = 'j' // a job started (jobRecord; earlier versions: jobs now go in r records)
	kindReturns  = 'r' // job starts and returns, gathered (returnsRecord)
	kindExpected = 'e' // an event a reaction will fire (expectedRecord)
	kindThrottle = 't' // a throttle's count (throttleRecord)
	kindDebounce = 'd' // a debounce's last event (debounceRecord)
	kindTimeout  = 'x' // a job's timeout, claimed by the replica that reports it (its origin only)
	kindProgress = 'y' // what a reaction left for the next delivery of its event (progressRecord)
)

// origin names the replica that wrote a record.
type origin struct {
	Origin string `json:"o,omitempty"`
}

// jobRecord is a j record: reaction (Rule, ID) of event Event started job
// JID on Targets at At (unix ns).
type jobRecord struct {
	origin
	JID     string   `json:"jid,omitempty"`
	Rule    string   `json:"rule,omitempty"`
	ID      string   `json:"id,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Event   string   `json:"event,omitempty"`
	At      int64    `json:"at,omitempty"`
}

// returnsRecord is an r record: the job starts and returns of one replica
// gathered for returnsEvery. A record of one return (JID, Minion, At) is
// read too.
type returnsRecord struct {
	origin
	JID     string         `json:"jid,omitempty"`
	Minion  string         `json:"minion,omitempty"`
	At      int64          `json:"at,omitempty"`
	Jobs    []sharedJob    `json:"js,omitempty"`
	Returns []sharedReturn `json:"rs,omitempty"`
}

// sharedJob is one job start in a returnsRecord: reaction (Rule, ID) of
// event Event started job JID on Targets at At (unix ns).
type sharedJob struct {
	JID     string   `json:"j,omitempty"`
	Rule    string   `json:"r,omitempty"`
	ID      string   `json:"i,omitempty"`
	Targets []string `json:"ts,omitempty"`
	Event   string   `json:"e,omitempty"`
	At      int64    `json:"t,omitempty"`
}

// sharedReturn is one job return in a returnsRecord.
type sharedReturn struct {
	JID    string `json:"j"`
	Minion string `json:"m,omitempty"`
	At     int64  `json:"t"`
	// Outcome is how the job went there (OutcomeUnknown: not read, a
	// start of the minion ended the job, an earlier version's record).
	Outcome Outcome `json:"o,omitempty"`
}

// expectedRecord is an e record: reaction (Rule, ID) will fire an event
// with Tag, which gets Hop and Cause; it is expected until At (unix ns).
type expectedRecord struct {
	origin
	Tag   string `json:"tag,omitempty"`
	Hop   int    `json:"hop,omitempty"`
	Cause string `json:"cause,omitempty"`
	// Rule and ID name the reaction that fires it.
	Rule string `json:"rule,omitempty"`
	ID   string `json:"id,omitempty"`
	At   int64  `json:"at,omitempty"`
}

// throttleRecord is a t record: the times (unix ns) rule Rule reacted
// for Key within Per, across the replicas.
type throttleRecord struct {
	origin
	Rule  string        `json:"rule,omitempty"`
	Key   string        `json:"key,omitempty"`
	Per   time.Duration `json:"per,omitempty"`
	Times []int64       `json:"times,omitempty"`
}

// debounceRecord is a d record: Tok names the last event a replica holds
// for rule Rule and Key.
type debounceRecord struct {
	origin
	Rule string `json:"rule,omitempty"`
	Key  string `json:"key,omitempty"`
	Tok  string `json:"tok,omitempty"`
}

// shared is the guard's side of the shared state: who this replica is in
// the records it writes, and how it writes them. Until a state is
// attached (New's Options.Shared, or Guard.AttachShared once the bucket
// could be opened) it writes nothing.
type shared struct {
	state  atomic.Pointer[stateRef]
	origin string
	seq    atomic.Uint64
}

// stateRef holds a SharedState for atomic.Pointer.
type stateRef struct{ SharedState }

func newShared(st SharedState) *shared {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &shared{origin: hex.EncodeToString(b[:])}
	if st != nil {
		s.state.Store(&stateRef{st})
	}
	return s
}

// st returns the attached state, nil before one is.
func (s *shared) st() SharedState {
	if r := s.state.Load(); r != nil {
		return r.SharedState
	}
	return nil
}

// on reports whether a state is attached.
func (s *shared) on() bool { return s.state.Load() != nil }

// token returns a name unique to this replica and write: its origin and
// a sequence number.
func (s *shared) token() string {
	return s.origin + "." + strconv.FormatUint(s.seq.Add(1), 10)
}

// put writes rec, a record of this replica, under key for ttl.
func (s *shared) put(key string, rec any, ttl time.Duration) {
	st := s.st()
	if st == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	st.Put(key, b, ttl)
}

// own reports whether key names a record of this replica (r and e keys
// carry their origin).
func (s *shared) own(key string) bool {
	return strings.Contains(key, "."+s.origin+".")
}

// ResendShared reports whether a failed write of the shared-state key
// should be sent again (kv.StateOptions.Resend): a job's record, a batch
// of job starts and returns, and a reaction's pending retry, which only
// the replica that made them writes (the one handling the event). A
// throttle count and a debounce's winner go through compare-and-set or
// are written by any replica; an expected event is deleted by whichever
// replica uses it.
func ResendShared(key string) bool {
	return len(key) > 1 && key[1] == '.' && (key[0] == kindJob || key[0] == kindReturns || key[0] == kindProgress)
}

// sharedKey names a record: its kind, a dot and a hash of what it is
// about.
func sharedKey(kind byte, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return string(kind) + "." + hex.EncodeToString(h.Sum(nil)[:16])
}

func toNanos(ts []time.Time) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.UnixNano()
	}
	return out
}

func fromNanos(ns []int64) []time.Time {
	out := make([]time.Time, len(ns))
	for i, n := range ns {
		out[i] = time.Unix(0, n)
	}
	return out
}
