package guard

import (
	"container/heap"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
)

// Options configure the loop guard.
type Options struct {
	// Settle is how long, after every target of a reaction's job returned,
	// events from those minions that would fire the same reaction stay
	// suppressed (default 5s).
	Settle time.Duration
	// JobTimeout bounds the wait for a job's returns (default 5m).
	JobTimeout time.Duration
	// Disabled turns the job-linked guard off (throttle, debounce and the
	// hop limit still apply).
	Disabled bool
	// Shared, when set, is the state the daemon's replicas share: the
	// guard writes its jobs, returns, expected events, throttle counts and
	// debounce winners there, and ApplyShared brings the other replicas'
	// writes into its memory, where it reads them.
	Shared SharedState
	// SharedWait is how long a throttle keeps asking a failing shared
	// state (a NATS node died and the bucket elects a new leader) before
	// it counts in its replica alone for a while (default 2s). The daemon
	// waits longer with JetStream, whose stream holds the events meanwhile.
	SharedWait time.Duration
	// Log receives the shared state's failures; nil discards them.
	Log *slog.Logger
}

// SharedState is a key-value store the replicas of the daemon share
// (natsbus.State, a JetStream key-value bucket). Keys are made of
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
}

// earlyKeep is how long a job return whose job is not (yet) known is
// kept for the dispatch that may record it.
const earlyKeep = time.Minute

// remoteGrace is how long after another replica's job timed out a
// replica waits for that one to report it before claiming the report.
const remoteGrace = 10 * time.Second

// expectKeep is how long an expected event is waited for.
const expectKeep = time.Minute

// guardKey names one reaction on one minion.
type guardKey struct {
	sls, id, minion string
}

type guardEntry struct {
	jid      string
	eventID  string    // the event whose reaction started the job
	started  time.Time // when the job was started
	until    time.Time // suppress while now < until
	returned bool
	// local is set when this process started the job: it logs the job's
	// timeout (another replica's job is forgotten quietly).
	local bool
}

// Guard is the job-linked loop guard: it remembers which reaction started
// which job on which minions and suppresses the same reaction for those
// minions until the job returned and a settle window passed. It also keeps
// the throttle and debounce state of rules and the hop counts of events
// that reactions are expected to fire. With Options.Shared it keeps
// all of it with the daemon's other replicas. It is safe for concurrent
// use.
type Guard struct {
	opts   Options
	origin string // this process, in the shared records it writes
	seq    atomic.Uint64

	mu       sync.Mutex
	entries  map[guardKey]*guardEntry
	jobs     map[string][]guardKey // jid -> keys waiting for its returns
	throttle map[throttleKey][]time.Time
	debounce map[throttleKey]*debounceState
	expected map[string][]expectedEvent // tag -> hop/cause of events reactions fire, oldest first
	early    map[string][]earlyReturn   // jid -> returns seen before the dispatch was recorded
	// expectKey maps a shared expected event's key to its tag.
	expectKey map[string]string
	// deadlines expire all of the above by time.
	deadlines deadlineHeap
	// sharedFailed limits the lines about the shared state failing.
	sharedFailed *ratelog.Every
	// sharedDown is when (unix ns) a throttle may ask the shared state
	// again after it failed: until then it counts in this replica, so an
	// outage does not hold every throttled event for a timeout.
	sharedDown atomic.Int64

	// returnsMu guards the job returns waiting to be written to the shared
	// state together (see Returned).
	returnsMu      sync.Mutex
	pendingReturns []sharedReturn
	returnsTTL     time.Duration
}

// sharedReturn is one job return in a shared r record.
type sharedReturn struct {
	JID    string `json:"j"`
	Minion string `json:"m,omitempty"`
	At     int64  `json:"t"`
}

// returnsEvery is how long job returns gather before they go to the
// shared state as one record, and returnsMax the most one record holds:
// a master emits thousands of returns a second, one key each would be a
// JetStream write each. A return another replica learns of this late
// only starts its job's settle window as late.
const (
	returnsEvery = 10 * time.Millisecond
	returnsMax   = 512
)

// sharedRetry is how long a throttle counts locally after the shared
// state failed.
const sharedRetry = 5 * time.Second

// earlyReturn is a job return processed (on another lane, or another
// replica) before the dispatch was recorded.
type earlyReturn struct {
	minion string
	at     time.Time
}

// throttleKey names a throttle count or a debounce: the rule's ID
// (config.Rule.ID, stable across reloads and replicas) and the key.
type throttleKey struct {
	rule string
	key  string
}

type debounceState struct {
	last  []byte // body of the last event
	timer *time.Timer
	hop   int
	gen   int // bumped on every event; a timer fires only for its own
	// let releases the held event (see Debounce); nil when nothing holds
	// its acknowledgement.
	let func(abandon bool)
	// tok names the last event in the shared state; seen is set once the
	// shared state handed it back: a later one is another replica's newer
	// event.
	tok  string
	seen bool
}

type expectedEvent struct {
	hop   int
	cause string
	until time.Time
	key   string // in the shared state, when there is one
}

// New returns a guard with defaults filled in.
func New(o Options) *Guard {
	if o.SharedWait <= 0 {
		o.SharedWait = 2 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 5 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Guard{opts: o, origin: hex.EncodeToString(b[:]), entries: map[guardKey]*guardEntry{}, jobs: map[string][]guardKey{},
		throttle: map[throttleKey][]time.Time{}, debounce: map[throttleKey]*debounceState{}, expected: map[string][]expectedEvent{},
		early: map[string][]earlyReturn{}, expectKey: map[string]string{}, sharedFailed: ratelog.New(time.Minute)}
}

// Suppressed reports whether the reaction (sls, id) must not run for an
// event from minion now, with the jid of the job that holds it and the
// phase ("job running" or "settling").
func (g *Guard) Suppressed(sls, id, minion string, now time.Time) (jid, phase string, ok bool) {
	if g.opts.Disabled || minion == "" {
		return "", "", false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entries[guardKey{sls, id, minion}]
	if e == nil || !now.Before(e.until) {
		return "", "", false
	}
	if e.returned {
		return e.jid, "settling", true
	}
	return e.jid, "job running", true
}

// Started records that reaction (sls, id) of event eventID (the daemon's
// event id, for log lines; may be empty) started job jid on targets.
func (g *Guard) Started(eventID, sls, id, jid string, targets []string, now time.Time) {
	if g.opts.Disabled {
		return
	}
	g.mu.Lock()
	g.started(eventID, sls, id, jid, targets, now, true)
	g.mu.Unlock()
	if g.opts.Shared != nil && len(targets) > 0 {
		g.put(sharedKey('j', jid, sls, id), sharedRecord{JID: jid, SLS: sls, ID: id, Targets: targets, Event: eventID, At: now.UnixNano()},
			g.opts.JobTimeout+g.opts.Settle+time.Minute)
	}
}

// started records a job; called with mu held. A record of the same job,
// or of an older one, does not replace an entry (another replica's record
// of a job comes back after this one's).
func (g *Guard) started(eventID, sls, id, jid string, targets []string, now time.Time, local bool) {
	for _, m := range targets {
		k := guardKey{sls, id, m}
		if old := g.entries[k]; old != nil {
			if (jid != "" && old.jid == jid) || old.started.After(now) {
				continue
			}
			g.forgetJobKey(old.jid, k)
		}
		until := now.Add(g.opts.JobTimeout)
		if jid == "" {
			// No job to wait for (e.g. a driver that returns no jid): hold
			// for the settle window only.
			until = now.Add(g.opts.Settle)
		}
		e := &guardEntry{jid: jid, eventID: eventID, started: now, until: until, returned: jid == "", local: local}
		for _, r := range g.early[jid] {
			if r.minion == "" || r.minion == m {
				e.returned, e.until = true, r.at.Add(g.opts.Settle)
			}
		}
		g.entries[k] = e
		g.deadlines.push(deadline{at: e.until, kind: dlEntry, gk: k})
		if jid != "" {
			g.jobs[jid] = append(g.jobs[jid], k)
		}
	}
	// Early returns of other minions stay: a driver may run several
	// reactions as one job (a merged list target), each recorded here with
	// its own minions.
	rest := g.early[jid][:0]
	for _, r := range g.early[jid] {
		if r.minion != "" && !slices.Contains(targets, r.minion) {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		delete(g.early, jid)
	} else {
		g.early[jid] = rest
	}
}

// forgetJobKey removes k from the keys waiting for job jid; called with
// mu held.
func (g *Guard) forgetJobKey(jid string, k guardKey) {
	if jid == "" {
		return
	}
	keys := slices.DeleteFunc(g.jobs[jid], func(x guardKey) bool { return x == k })
	if len(keys) == 0 {
		delete(g.jobs, jid)
	} else {
		g.jobs[jid] = keys
	}
}

// Returned records a job return from minion; the reaction that started the
// job stays suppressed for that minion until the settle window ends. It
// reports whether the return belonged to a guarded job.
func (g *Guard) Returned(jid, minion string, now time.Time) bool {
	if g.opts.Disabled {
		return false
	}
	g.mu.Lock()
	found := g.returned(jid, minion, now)
	g.mu.Unlock()
	if g.opts.Shared != nil {
		// Another replica may have started the job and not told this
		// one yet: the return is shared either way, briefly when no job
		// is known for it.
		ttl := earlyKeep
		if found {
			ttl = g.opts.JobTimeout + g.opts.Settle + time.Minute
		}
		g.shareReturn(sharedReturn{JID: jid, Minion: minion, At: now.UnixNano()}, ttl)
	}
	return found
}

// shareReturn queues a job return for the shared state: returns gather
// for returnsEvery (or up to returnsMax) and go as one r record, kept for
// the longest ttl among them.
func (g *Guard) shareReturn(r sharedReturn, ttl time.Duration) {
	g.returnsMu.Lock()
	first := len(g.pendingReturns) == 0
	g.pendingReturns = append(g.pendingReturns, r)
	g.returnsTTL = max(g.returnsTTL, ttl)
	full := len(g.pendingReturns) >= returnsMax
	g.returnsMu.Unlock()
	switch {
	case full:
		g.FlushShared()
	case first:
		time.AfterFunc(returnsEvery, g.FlushShared)
	}
}

// FlushShared writes the job returns gathered for the shared state now
// (the daemon calls it when it stops).
func (g *Guard) FlushShared() {
	g.returnsMu.Lock()
	rs, ttl := g.pendingReturns, g.returnsTTL
	g.pendingReturns, g.returnsTTL = nil, 0
	g.returnsMu.Unlock()
	if len(rs) == 0 {
		return
	}
	g.put("r."+g.origin+"."+strconv.FormatUint(g.seq.Add(1), 10), sharedRecord{Returns: rs}, ttl)
}

// returned records a return; called with mu held.
func (g *Guard) returned(jid, minion string, now time.Time) bool {
	found := false
	for _, k := range g.jobs[jid] {
		if minion != "" && k.minion != minion {
			continue // "" is a runner or wheel job: every key returns
		}
		if e := g.entries[k]; e != nil && e.jid == jid {
			if !e.returned || now.Add(g.opts.Settle).After(e.until) {
				e.returned = true
				e.until = now.Add(g.opts.Settle)
				g.deadlines.push(deadline{at: e.until, kind: dlEntry, gk: k})
			}
			found = true
		}
	}
	if !found {
		// The return may have overtaken the dispatch's bookkeeping (it is
		// handled on its own minion's lane, or on another replica):
		// remember it briefly.
		g.early[jid] = append(g.early[jid], earlyReturn{minion: minion, at: now})
		g.deadlines.push(deadline{at: now.Add(earlyKeep), kind: dlEarly, name: jid})
	}
	return found
}

// Expired is a guarded job whose minion did not return within the job
// timeout.
type Expired struct {
	SLS, ID, Minion, JID string
	// EventID is the id of the event whose reaction started the job.
	EventID string
}

// TakeExpired forgets what expired by now (jobs, returns, throttle
// windows, expected events) and returns the jobs whose minions did not
// return within the job timeout: those this process started or, with
// shared state, those one replica claims first (so a job whose replica
// died is reported by another, once).
func (g *Guard) TakeExpired(now time.Time) []Expired {
	out, remote := g.takeExpired(now)
	if g.opts.Shared == nil {
		return out
	}
	all := append(out, remote...)
	out = out[:0:0]
	for i, x := range all {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		claimed, err := g.opts.Shared.Update(ctx, sharedKey('x', x.JID, x.Minion, x.SLS, x.ID), g.opts.JobTimeout, func(old []byte) ([]byte, bool) {
			if old != nil {
				return nil, false
			}
			return []byte(g.origin), true
		})
		cancel()
		if claimed || (err != nil && i < len(all)-len(remote)) {
			out = append(out, x)
		}
	}
	return out
}

// takeExpired is TakeExpired's work under the lock: the expired jobs this
// process started, and those other replicas started.
func (g *Guard) takeExpired(now time.Time) (out, remote []Expired) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.deadlines) > 0 && !now.Before(g.deadlines[0].at) {
		d := g.deadlines.pop()
		switch d.kind {
		case dlEntry:
			e := g.entries[d.gk]
			if e == nil || now.Before(e.until) {
				continue // gone, or held longer since
			}
			if e.jid != "" && !e.returned {
				x := Expired{SLS: d.gk.sls, ID: d.gk.id, Minion: d.gk.minion, JID: e.jid, EventID: e.eventID}
				switch {
				case e.local:
					out = append(out, x)
				case now.Before(e.until.Add(remoteGrace)):
					// Its replica reports it if it lives: look again
					// after the grace.
					g.deadlines.push(deadline{at: e.until.Add(remoteGrace), kind: dlEntry, gk: d.gk})
					continue
				default:
					remote = append(remote, x)
				}
			}
			delete(g.entries, d.gk)
			g.forgetJobKey(e.jid, d.gk)
		case dlEarly:
			rs := slices.DeleteFunc(g.early[d.name], func(r earlyReturn) bool { return !now.Before(r.at.Add(earlyKeep)) })
			if len(rs) == 0 {
				delete(g.early, d.name)
			} else {
				g.early[d.name] = rs
			}
		case dlExpected:
			list := slices.DeleteFunc(g.expected[d.name], func(e expectedEvent) bool {
				if now.Before(e.until) {
					return false
				}
				delete(g.expectKey, e.key)
				return true
			})
			if len(list) == 0 {
				delete(g.expected, d.name)
			} else {
				g.expected[d.name] = list
			}
		case dlThrottle:
			times := slices.DeleteFunc(g.throttle[d.tk], func(t time.Time) bool { return !t.Add(d.per).After(now) })
			if len(times) == 0 {
				delete(g.throttle, d.tk)
			} else {
				g.throttle[d.tk] = times
			}
		}
	}
	return out, remote
}

// Throttle reports whether rule (its ID) may react for key now, at most count times
// per period; a true answer counts. With shared state the count is the
// replicas' together.
func (g *Guard) Throttle(rule string, key string, count int, per time.Duration, now time.Time) bool {
	k := throttleKey{rule, key}
	g.mu.Lock()
	live := liveTimes(g.throttle[k], per, now)
	g.throttle[k] = live
	if len(live) >= count {
		// Full here is full everywhere: the shared count only grows
		// faster than this copy of it.
		g.mu.Unlock()
		return false
	}
	if g.opts.Shared == nil || time.Now().UnixNano() < g.sharedDown.Load() {
		g.throttle[k] = append(live, now)
		g.deadlines.push(deadline{at: now.Add(per), kind: dlThrottle, tk: k, per: per})
		g.mu.Unlock()
		return true
	}
	g.mu.Unlock()
	var times []time.Time
	ok, err := g.sharedUpdate(sharedKey('t', rule, key), per, func(old []byte) ([]byte, bool) {
		var rec sharedRecord
		_ = json.Unmarshal(old, &rec)
		times = liveTimes(fromNanos(rec.Times), per, now)
		if len(times) >= count {
			return nil, false
		}
		times = append(times, now)
		b, _ := json.Marshal(sharedRecord{Origin: g.origin, Rule: rule, Key: key, Per: per, Times: toNanos(times)})
		return b, true
	})
	if err != nil {
		g.sharedDown.Store(time.Now().Add(sharedRetry).UnixNano())
		if n, ok := g.sharedFailed.Tick(); ok {
			g.opts.Log.Warn("throttle: the shared count could not be read or written; counting in this replica only (logged at most once a minute)", "key", key, "err", err, "failures_since_last_line", n)
		}
		times = append(liveTimes(g.throttle[k], per, now), now)
		ok = true
	}
	g.mu.Lock()
	g.throttle[k] = times
	g.deadlines.push(deadline{at: now.Add(per), kind: dlThrottle, tk: k, per: per})
	g.mu.Unlock()
	return ok
}

// sharedUpdate is Shared.Update, asked again (after 50ms, then up to 1s
// apart) while it fails, for up to SharedWait: a NATS cluster that lost a
// node answers again once the bucket has a new leader. Each try gets 2s at
// most, so a request lost with a dead node's connection does not use up
// the wait.
func (g *Guard) sharedUpdate(key string, ttl time.Duration, fn func(old []byte) ([]byte, bool)) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.SharedWait)
	defer cancel()
	var ok bool
	err := retry.Until(ctx, func() error {
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		defer tcancel()
		var err error
		ok, err = g.opts.Shared.Update(tctx, key, ttl, fn)
		return err
	}, nil)
	return ok && err == nil, err
}

// liveTimes returns the times within per of now, in place.
func liveTimes(times []time.Time, per time.Duration, now time.Time) []time.Time {
	return slices.DeleteFunc(times, func(t time.Time) bool { return now.Sub(t) >= per })
}

// Debounce holds an event for rule and key: fire is called with the last
// event's body once no new event came for quiet. let, when not nil, is the
// held event's release: the guard calls let(false) when a newer event for
// the same rule and key replaces it (the newer one stands for it) and
// hands it to fire otherwise, which must call it once the fired event was
// handled (false) or could not be (true); StopTimers calls let(true). So
// a JetStream message stays unacknowledged while a debounce holds it.
// With shared state a newer event held by another replica replaces it
// too: the last event of the key in the shared state fires, once.
func (g *Guard) Debounce(rule string, key string, body []byte, hop int, quiet time.Duration, let func(abandon bool), fire func(body []byte, hop int, let func(abandon bool))) {
	g.mu.Lock()
	k := throttleKey{rule, key}
	st := g.debounce[k]
	if st == nil {
		st = &debounceState{}
		g.debounce[k] = st
	}
	replaced := st.let
	st.last, st.hop, st.let = body, hop, let
	st.gen++
	gen := st.gen
	if g.opts.Shared != nil {
		st.tok, st.seen = g.origin+"."+strconv.FormatUint(g.seq.Add(1), 10), false
	}
	tok := st.tok
	if st.timer != nil {
		st.timer.Stop()
	}
	st.timer = time.AfterFunc(quiet, func() {
		g.mu.Lock()
		cur := g.debounce[k]
		if cur != st || st.gen != gen {
			g.mu.Unlock()
			return
		}
		delete(g.debounce, k)
		last, h, l := st.last, st.hop, st.let
		g.mu.Unlock()
		if l == nil {
			l = func(bool) {}
		}
		fire(last, h, l)
	})
	g.mu.Unlock()
	if g.opts.Shared != nil {
		g.put(sharedKey('d', rule, key), sharedRecord{Rule: rule, Key: key, Tok: tok}, quiet+time.Minute)
	}
	if replaced != nil {
		replaced(false)
	}
}

// StopTimers cancels pending debounces, releasing each held event as
// abandoned (let(true)); it returns how many it cancelled.
func (g *Guard) StopTimers() int {
	g.FlushShared()
	g.mu.Lock()
	var lets []func(bool)
	n := 0
	for k, st := range g.debounce {
		// A timer that already fired finds its entry gone and does
		// nothing: the entry is released here either way.
		if st.timer != nil {
			st.timer.Stop()
		}
		if st.let != nil {
			lets = append(lets, st.let)
		}
		n++
		delete(g.debounce, k)
	}
	g.mu.Unlock()
	for _, l := range lets {
		l(true)
	}
	return n
}

// ExpectEvent records that a reaction will fire an event with tag (a
// runner or local event.send), so that event gets hop+1 and its cause even
// though Salt carries no header for it.
func (g *Guard) ExpectEvent(tag string, hop int, cause string, now time.Time) {
	e := expectedEvent{hop: hop, cause: cause, until: now.Add(expectKeep)}
	if g.opts.Shared != nil {
		e.key = sharedKey('e', tag) + "." + g.origin + "." + strconv.FormatUint(g.seq.Add(1), 10)
	}
	g.mu.Lock()
	g.expect(tag, e)
	g.mu.Unlock()
	if e.key != "" {
		g.put(e.key, sharedRecord{Tag: tag, Hop: hop, Cause: cause, At: e.until.UnixNano()}, expectKeep)
	}
}

// expect adds an expected event; called with mu held.
func (g *Guard) expect(tag string, e expectedEvent) {
	g.expected[tag] = append(g.expected[tag], e)
	if e.key != "" {
		g.expectKey[e.key] = tag
	}
	g.deadlines.push(deadline{at: e.until, kind: dlExpected, name: tag})
}

// HopOf returns the hop count of an arriving event without a hop header:
// the recorded one when a reaction was expected to fire this tag. The
// expectation is used up (on every replica): one dispatch fires one
// event.
func (g *Guard) HopOf(tag string, now time.Time) (int, string) {
	g.mu.Lock()
	var used []string
	hop, cause := 0, ""
	for list := g.expected[tag]; len(list) > 0; list = g.expected[tag] {
		e := list[0] // one dispatch fires one event
		if len(list) == 1 {
			delete(g.expected, tag)
		} else {
			g.expected[tag] = list[1:]
		}
		if e.key != "" {
			delete(g.expectKey, e.key)
			used = append(used, e.key)
		}
		if now.Before(e.until) {
			hop, cause = e.hop, e.cause
			break
		}
	}
	g.mu.Unlock()
	for _, k := range used {
		g.opts.Shared.Delete(k, expectKeep)
	}
	return hop, cause
}

// sharedRecord is the value of a shared state key; the key's first letter
// tells which fields it uses: j (a job started), r (job returns), e (an
// expected event), t (a throttle count), d (a debounce's last event). An
// x key (a job's timeout, claimed by the replica that reports it) holds
// the claiming replica's origin only.
type sharedRecord struct {
	Origin  string        `json:"o,omitempty"`
	JID     string        `json:"jid,omitempty"`
	SLS     string        `json:"sls,omitempty"`
	ID      string        `json:"id,omitempty"`
	Targets []string      `json:"targets,omitempty"`
	Minion  string        `json:"minion,omitempty"`
	Event   string        `json:"event,omitempty"`
	At      int64         `json:"at,omitempty"`
	Tag     string        `json:"tag,omitempty"`
	Hop     int           `json:"hop,omitempty"`
	Cause   string        `json:"cause,omitempty"`
	Rule    string        `json:"rule,omitempty"`
	Key     string        `json:"key,omitempty"`
	Per     time.Duration `json:"per,omitempty"`
	Times   []int64       `json:"times,omitempty"`
	Tok     string        `json:"tok,omitempty"`
	// Returns are the job returns of an r record (a record of one return,
	// JID and Minion, is read too).
	Returns []sharedReturn `json:"rs,omitempty"`
}

// ResendShared reports whether a failed write of the shared-state key
// should be sent again (natsbus.StateOptions.Resend): a job's record and
// a batch of job returns, which only the replica that made them writes. A
// throttle count and a debounce's winner go through compare-and-set or
// are written by any replica; an expected event is deleted by whichever
// replica uses it.
func ResendShared(key string) bool {
	return strings.HasPrefix(key, "j.") || strings.HasPrefix(key, "r.")
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

// put writes a record of this process to the shared state.
func (g *Guard) put(key string, rec sharedRecord, ttl time.Duration) {
	rec.Origin = g.origin
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	g.opts.Shared.Put(key, b, ttl)
}

// ApplyShared brings a change of the shared state into the guard: another
// replica's job, return, expected event (or its use), throttle count, or
// debounced event (which replaces the one this replica holds for the same
// rule and key). The guard's own records come back too and change
// nothing.
func (g *Guard) ApplyShared(key string, value []byte, deleted bool) {
	if len(key) < 2 || key[1] != '.' {
		return
	}
	if deleted {
		if key[0] == 'e' {
			g.mu.Lock()
			if tag, ok := g.expectKey[key]; ok {
				delete(g.expectKey, key)
				list := slices.DeleteFunc(g.expected[tag], func(e expectedEvent) bool { return e.key == key })
				if len(list) == 0 {
					delete(g.expected, tag)
				} else {
					g.expected[tag] = list
				}
			}
			g.mu.Unlock()
		}
		return // the others expire by time here too
	}
	if (key[0] == 'r' || key[0] == 'e') && strings.Contains(key, "."+g.origin+".") {
		// This replica's own job returns or expected event, back from
		// the bucket (their keys name their origin): nothing to learn.
		return
	}
	var rec sharedRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return
	}
	own := rec.Origin == g.origin
	switch key[0] {
	case 'j':
		if own || g.opts.Disabled {
			return
		}
		g.mu.Lock()
		g.started(rec.Event, rec.SLS, rec.ID, rec.JID, rec.Targets, time.Unix(0, rec.At), false)
		g.mu.Unlock()
	case 'r':
		if own || g.opts.Disabled {
			return
		}
		g.mu.Lock()
		if rec.JID != "" {
			g.returned(rec.JID, rec.Minion, time.Unix(0, rec.At))
		}
		for _, r := range rec.Returns {
			g.returned(r.JID, r.Minion, time.Unix(0, r.At))
		}
		g.mu.Unlock()
	case 'e':
		if own {
			return
		}
		g.mu.Lock()
		if _, ok := g.expectKey[key]; !ok {
			g.expect(rec.Tag, expectedEvent{hop: rec.Hop, cause: rec.Cause, until: time.Unix(0, rec.At), key: key})
		}
		g.mu.Unlock()
	case 't':
		if rec.Per <= 0 {
			return
		}
		k := throttleKey{rec.Rule, rec.Key}
		times := fromNanos(rec.Times)
		g.mu.Lock()
		if len(times) > 0 {
			g.throttle[k] = times
			g.deadlines.push(deadline{at: times[len(times)-1].Add(rec.Per), kind: dlThrottle, tk: k, per: rec.Per})
		}
		g.mu.Unlock()
	case 'd':
		k := throttleKey{rec.Rule, rec.Key}
		g.mu.Lock()
		st := g.debounce[k]
		if st == nil || st.tok == "" {
			g.mu.Unlock()
			return
		}
		if rec.Tok == st.tok {
			st.seen = true
			g.mu.Unlock()
			return
		}
		if !st.seen {
			// Written before this replica's own event, which is newer.
			g.mu.Unlock()
			return
		}
		// Another replica holds a newer event of the key: it fires, and
		// this one's event is released as replaced.
		if st.timer != nil {
			st.timer.Stop()
		}
		delete(g.debounce, k)
		l := st.let
		g.mu.Unlock()
		if l != nil {
			l(false)
		}
	}
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

// Deadline kinds.
const (
	dlEntry    = iota // a guard entry's until
	dlEarly           // an early return's keep
	dlExpected        // an expected event's until
	dlThrottle        // a throttle window's end
)

// deadline is a time something in the guard may expire; TakeExpired
// checks it still does (a later deadline may have replaced it).
type deadline struct {
	at   time.Time
	kind int
	gk   guardKey
	name string // jid or tag
	tk   throttleKey
	per  time.Duration
}

// deadlineHeap is a min-heap of deadlines by time.
type deadlineHeap []deadline

func (h *deadlineHeap) Len() int           { return len(*h) }
func (h *deadlineHeap) Less(i, j int) bool { return (*h)[i].at.Before((*h)[j].at) }
func (h *deadlineHeap) Swap(i, j int)      { (*h)[i], (*h)[j] = (*h)[j], (*h)[i] }

// Push and Pop are heap.Interface's; use push and pop.
func (h *deadlineHeap) Push(x any) { *h = append(*h, x.(deadline)) }

// Pop is heap.Interface's.
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *deadlineHeap) push(d deadline) { heap.Push(h, d) }
func (h *deadlineHeap) pop() deadline   { return heap.Pop(h).(deadline) }

// Settle is the settle window the guard holds a reaction for after its
// job returned.
func (g *Guard) Settle() time.Duration { return g.opts.Settle }
