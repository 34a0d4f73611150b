package guard

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// earlyKeep is how long a job return whose job is not (yet) known is
// kept for the dispatch that may record it.
const earlyKeep = time.Minute

// remoteGrace is how long after another replica's job timed out a
// replica waits for that one to report it before claiming the report.
const remoteGrace = 10 * time.Second

// returnsEvery is how long job starts and returns gather before they go
// to the shared state as one record, and returnsMax the most one record
// holds: a master emits thousands of returns a second and a burst starts
// as many jobs, one key each would be a JetStream write each, which every
// replica then reads. A return another replica learns of this late only
// starts its job's settle window as late; a job it learns of this late
// finds its early returns (see returned).
const (
	returnsEvery = 10 * time.Millisecond
	returnsMax   = 512
)

// jobKey names one reaction (its rule's ID and its ID) on one minion.
type jobKey struct {
	rule, id, minion string
}

// jobEntry is a reaction held on one minion by the job it started.
type jobEntry struct {
	jid      string
	eventID  string    // the event whose reaction started the job
	started  time.Time // when the job was started
	until    time.Time // suppress while now < until
	returned bool
	// local is set when this process started the job: it logs the job's
	// timeout (another replica's job is forgotten quietly).
	local bool
}

// earlyReturn is a job return processed (on another lane, or another
// replica) before the dispatch was recorded.
type earlyReturn struct {
	minion string
	at     time.Time
	// outcome is the return's (a sharedReturn's); own is set for a return
	// this replica handled and has not shared (see ret).
	outcome Outcome
	own     bool
}

// jobDeadline is what may expire in jobs: an entry's hold, the early
// returns of a jid, or a jid known.
type jobDeadline struct {
	key   jobKey
	early string // jid, for early returns
	known string // jid, for known
}

// Expired is a guarded job whose minion did not return within the job
// timeout.
type Expired struct {
	// Rule and ID name the reaction (Reaction).
	Rule, ID, Minion, JID string
	// EventID is the id of the event whose reaction started the job.
	EventID string
}

// jobs is the job-linked loop guard: which reaction started which job on
// which minions, held until the job returned and a settle window passed.
type jobs struct {
	settle, timeout time.Duration
	sh              *shared

	mu        sync.Mutex
	entries   map[jobKey]*jobEntry
	byJID     map[string][]jobKey      // jid -> keys waiting for its returns
	early     map[string][]earlyReturn // jid -> returns seen before the dispatch was recorded
	known     map[string]time.Time     // jid -> until when: a job whose entries a newer one replaced, its returns still shared
	deadlines deadlines[jobDeadline]

	// returnsMu guards the job starts and returns waiting to be written
	// to the shared state together (see share).
	returnsMu      sync.Mutex
	pendingJobs    []sharedJob
	pendingReturns []sharedReturn
	returnsTTL     time.Duration
}

func newJobs(settle, timeout time.Duration, sh *shared) *jobs {
	return &jobs{settle: settle, timeout: timeout, sh: sh, entries: map[jobKey]*jobEntry{}, byJID: map[string][]jobKey{},
		early: map[string][]earlyReturn{}, known: map[string]time.Time{}}
}

// start records that reaction r of event eventID started job jid on
// targets, and shares it.
func (j *jobs) start(eventID string, r Reaction, jid string, targets []string, now time.Time) {
	j.mu.Lock()
	late := j.started(eventID, r, jid, targets, now, true)
	j.mu.Unlock()
	if j.sh.on() && len(targets) > 0 {
		j.share(&sharedJob{JID: jid, Rule: r.Rule, ID: r.ID, Targets: targets, Event: eventID, At: now.UnixNano()}, nil, j.timeout+j.settle+time.Minute)
	}
	j.shareLate(late)
}

// shareLate shares the job returns this replica handled before it knew
// their job (see ret).
func (j *jobs) shareLate(rs []sharedReturn) {
	if !j.sh.on() {
		return
	}
	for i := range rs {
		j.share(nil, &rs[i], j.timeout+j.settle+time.Minute)
	}
}

// started records a job; called with mu held. A record of the same job,
// or of an older one, does not replace an entry (another replica's record
// of a job comes back after this one's). It returns the returns of the job
// this replica handled before and did not share yet, now to share.
func (j *jobs) started(eventID string, r Reaction, jid string, targets []string, now time.Time, local bool) (late []sharedReturn) {
	if jid != "" {
		for i, e := range j.early[jid] {
			if e.own && (e.minion == "" || slices.Contains(targets, e.minion)) {
				late = append(late, sharedReturn{JID: jid, Minion: e.minion, At: e.at.UnixNano(), Outcome: e.outcome})
				j.early[jid][i].own = false
			}
		}
	}
	for _, m := range targets {
		k := jobKey{r.Rule, r.ID, m}
		if old := j.entries[k]; old != nil {
			if (jid != "" && old.jid == jid) || old.started.After(now) {
				continue
			}
			j.forgetJobKey(old.jid, k)
			if old.jid != "" {
				// Its returns still come, and are still shared (see ret).
				j.remember(old.jid, old.started.Add(j.timeout+j.settle))
			}
		}
		until := now.Add(j.timeout)
		if jid == "" {
			// No job to wait for (e.g. a driver that returns no jid): hold
			// for the settle window only.
			until = now.Add(j.settle)
		}
		e := &jobEntry{jid: jid, eventID: eventID, started: now, until: until, returned: jid == "", local: local}
		for _, r := range j.early[jid] {
			if r.minion == "" || r.minion == m {
				e.returned, e.until = true, r.at.Add(j.settle)
			}
		}
		j.entries[k] = e
		j.deadlines.push(e.until, jobDeadline{key: k})
		if jid != "" {
			j.byJID[jid] = append(j.byJID[jid], k)
		}
	}
	// Early returns of other minions stay: a driver may run several
	// reactions as one job (a merged list target), each recorded here with
	// its own minions.
	rest := j.early[jid][:0]
	for _, r := range j.early[jid] {
		if r.minion != "" && !slices.Contains(targets, r.minion) {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		delete(j.early, jid)
	} else {
		j.early[jid] = rest
	}
	return late
}

// remember keeps jid known until until: a job whose entries a newer job
// of its reaction replaced; called with mu held.
func (j *jobs) remember(jid string, until time.Time) {
	if until.After(j.known[jid]) {
		j.known[jid] = until
		j.deadlines.push(until, jobDeadline{known: jid})
	}
}

// forgetJobKey removes k from the keys waiting for job jid; called with
// mu held.
func (j *jobs) forgetJobKey(jid string, k jobKey) {
	if jid == "" {
		return
	}
	keys := slices.DeleteFunc(j.byJID[jid], func(x jobKey) bool { return x == k })
	if len(keys) == 0 {
		delete(j.byJID, jid)
	} else {
		j.byJID[jid] = keys
	}
}

// ret records a job return from minion, with its outcome (a
// sharedReturn's), and shares it; it reports whether the return belonged
// to a guarded job.
//
// A return of a job no replica told this one of is kept here only: most
// are of jobs no reaction started (a master's every job returns), and
// sharing them would have every replica read every return. Should the
// job's record come later (another replica started it and told this one
// after the return came), the return is shared then (see started).
func (j *jobs) ret(jid, minion string, outcome Outcome, now time.Time) bool {
	j.mu.Lock()
	found := j.returned(jid, minion, now)
	_, known := j.known[jid]
	if !found && !known {
		rs := j.early[jid] // returned appended it
		rs[len(rs)-1].outcome, rs[len(rs)-1].own = outcome, true
	}
	j.mu.Unlock()
	if (found || known) && j.sh.on() {
		j.share(nil, &sharedReturn{JID: jid, Minion: minion, At: now.UnixNano(), Outcome: outcome}, j.timeout+j.settle+time.Minute)
	}
	return found
}

// returned records a return; called with mu held.
func (j *jobs) returned(jid, minion string, now time.Time) bool {
	found := false
	for _, k := range j.byJID[jid] {
		if minion != "" && k.minion != minion {
			continue // "" is a runner or wheel job: every key returns
		}
		if e := j.entries[k]; e != nil && e.jid == jid {
			if !e.returned || now.Add(j.settle).After(e.until) {
				e.returned = true
				e.until = now.Add(j.settle)
				j.deadlines.push(e.until, jobDeadline{key: k})
			}
			found = true
		}
	}
	if !found {
		// The return may have overtaken the dispatch's bookkeeping (it is
		// handled on its own minion's lane, or on another replica):
		// remember it briefly.
		j.early[jid] = append(j.early[jid], earlyReturn{minion: minion, at: now})
		j.deadlines.push(now.Add(earlyKeep), jobDeadline{early: jid})
	}
	return found
}

// share queues a job start or a job return for the shared state: they
// gather for returnsEvery (or up to returnsMax) and go as one r record,
// kept for the longest ttl among them.
func (j *jobs) share(job *sharedJob, ret *sharedReturn, ttl time.Duration) {
	j.returnsMu.Lock()
	first := len(j.pendingJobs)+len(j.pendingReturns) == 0
	if job != nil {
		j.pendingJobs = append(j.pendingJobs, *job)
	}
	if ret != nil {
		j.pendingReturns = append(j.pendingReturns, *ret)
	}
	j.returnsTTL = max(j.returnsTTL, ttl)
	full := len(j.pendingJobs)+len(j.pendingReturns) >= returnsMax
	j.returnsMu.Unlock()
	switch {
	case full:
		j.flush()
	case first:
		time.AfterFunc(returnsEvery, j.flush)
	}
}

// flush writes the job starts and returns gathered for the shared state
// now.
func (j *jobs) flush() {
	if !j.sh.on() {
		return
	}
	j.returnsMu.Lock()
	js, rs, ttl := j.pendingJobs, j.pendingReturns, j.returnsTTL
	j.pendingJobs, j.pendingReturns, j.returnsTTL = nil, nil, 0
	j.returnsMu.Unlock()
	if len(js)+len(rs) == 0 {
		return
	}
	j.sh.put(string(kindReturns)+"."+j.sh.token(), returnsRecord{origin: origin{j.sh.origin}, Jobs: js, Returns: rs}, ttl)
}

// expire forgets what expired by now and returns the jobs whose minions
// did not return within the job timeout: those this process started or,
// with shared state, those one replica claims first (so a job whose
// replica died is reported by another, once).
func (j *jobs) expire(now time.Time) []Expired {
	out, remote := j.expired(now)
	if !j.sh.on() {
		return out
	}
	all := append(out, remote...)
	out = out[:0:0]
	for i, x := range all {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		claimed, err := j.sh.st().Update(ctx, sharedKey(kindTimeout, x.JID, x.Minion, x.Rule, x.ID), j.timeout, func(old []byte) ([]byte, bool) {
			if old != nil {
				return nil, false
			}
			return []byte(j.sh.origin), true
		})
		cancel()
		if claimed || (err != nil && i < len(all)-len(remote)) {
			out = append(out, x)
		}
	}
	return out
}

// expired is expire's work under the lock: the expired jobs this process
// started, and those other replicas started.
func (j *jobs) expired(now time.Time) (out, remote []Expired) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, d := range j.deadlines.due(now) {
		if d.known != "" {
			if !now.Before(j.known[d.known]) {
				delete(j.known, d.known)
			}
			continue
		}
		if d.early != "" {
			rs := slices.DeleteFunc(j.early[d.early], func(r earlyReturn) bool { return !now.Before(r.at.Add(earlyKeep)) })
			if len(rs) == 0 {
				delete(j.early, d.early)
			} else {
				j.early[d.early] = rs
			}
			continue
		}
		e := j.entries[d.key]
		if e == nil || now.Before(e.until) {
			continue // gone, or held longer since
		}
		if e.jid != "" && !e.returned {
			x := Expired{Rule: d.key.rule, ID: d.key.id, Minion: d.key.minion, JID: e.jid, EventID: e.eventID}
			switch {
			case e.local:
				out = append(out, x)
			case now.Before(e.until.Add(remoteGrace)):
				// Its replica reports it if it lives: look again after
				// the grace.
				j.deadlines.push(e.until.Add(remoteGrace), d)
				continue
			default:
				remote = append(remote, x)
			}
		}
		delete(j.entries, d.key)
		j.forgetJobKey(e.jid, d.key)
	}
	return out, remote
}

// applyJob brings another replica's j record in (one job; written by
// an earlier version: jobs now go in r records).
func (j *jobs) applyJob(value []byte) {
	var rec jobRecord
	if json.Unmarshal(value, &rec) != nil || rec.Origin == j.sh.origin {
		return
	}
	j.mu.Lock()
	late := j.started(rec.Event, Reaction{Rule: rec.Rule, ID: rec.ID}, rec.JID, rec.Targets, time.Unix(0, rec.At), false)
	j.mu.Unlock()
	j.shareLate(late)
}

// applyReturns brings another replica's r record in: its jobs first,
// then its returns (a return of a job in the same record finds it); it
// returns the record's job returns with their outcome, for Guard's
// followers. Guarding off (guard false), it only reads those.
func (j *jobs) applyReturns(value []byte, guard bool) []sharedReturn {
	var rec returnsRecord
	if json.Unmarshal(value, &rec) != nil || rec.Origin == j.sh.origin {
		return nil
	}
	if !guard {
		return rec.Returns
	}
	j.mu.Lock()
	var late []sharedReturn
	for _, s := range rec.Jobs {
		late = append(late, j.started(s.Event, Reaction{Rule: s.Rule, ID: s.ID}, s.JID, s.Targets, time.Unix(0, s.At), false)...)
	}
	if rec.JID != "" {
		j.returned(rec.JID, rec.Minion, time.Unix(0, rec.At))
	}
	for _, r := range rec.Returns {
		j.returned(r.JID, r.Minion, time.Unix(0, r.At))
	}
	j.mu.Unlock()
	j.shareLate(late)
	return rec.Returns
}
