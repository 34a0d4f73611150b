package reactor

import (
	"sync"
	"time"
)

// limits applies the rules' concurrency option: at most N reactions of a
// rule in flight per key, the others queued in order. A reaction is in
// flight from the moment its event takes a slot until every job it started
// returned from every target (or the job timeout passed); an event whose
// reactions started no job gives its slot back when its handling ends.
// A queued event stays unacknowledged (held, as a debounce holds one), so
// a stop or a crash leaves it to JetStream's redelivery.
type limits struct {
	mu      sync.Mutex
	keys    map[ruleKey]*limitKey
	slots   map[slotID]*slot
	jobs    map[string][]*limitJob // by jid: reactions merged into one job share it
	timeout time.Duration
	early   *earlyReturns
	// spawn runs a released event's resubmission (Reactor.spawnTask).
	spawn func(func())
}

type ruleKey struct{ rule, key string }

// slotID is one event's slot in one rule.
type slotID struct{ event, rule string }

// limitKey is a rule and key's slots in use and queue.
type limitKey struct {
	inFlight int
	queue    []*queued
}

// queued is an event waiting for a slot.
type queued struct {
	event string
	// release resubmits the event for the rule alone once it has a slot;
	// abandon gives it back unhandled (the reactor stops).
	release func()
	abandon func()
}

// slot is an event's place among a rule's reactions in flight.
type slot struct {
	k     ruleKey
	jobs  int  // jobs started and not yet done
	ended bool // the event's handling ended: no more jobs come
}

// limitJob is a job a slot waits for: the targets still to return.
type limitJob struct {
	slot     slotID
	waiting  map[string]bool
	deadline time.Time
}

func newLimits(timeout time.Duration, early *earlyReturns, spawn func(func())) *limits {
	return &limits{keys: map[ruleKey]*limitKey{}, slots: map[slotID]*slot{}, jobs: map[string][]*limitJob{}, timeout: timeout, early: early, spawn: spawn}
}

// acquire gives the event a slot of rule and key when fewer than max are
// in flight, or queues it (release and abandon, see queued) and returns
// false with its place in the queue (1 for the next).
func (l *limits) acquire(event, rule, key string, max int, release, abandon func()) (ok bool, place int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := slotID{event, rule}
	if _, has := l.slots[id]; has {
		return true, 0 // the event came back with the slot it was given
	}
	k := ruleKey{rule, key}
	lk := l.keys[k]
	if lk == nil {
		lk = &limitKey{}
		l.keys[k] = lk
	}
	if lk.inFlight < max && len(lk.queue) == 0 {
		lk.inFlight++
		l.slots[id] = &slot{k: k}
		return true, 0
	}
	lk.queue = append(lk.queue, &queued{event: event, release: release, abandon: abandon})
	return false, len(lk.queue)
}

// started links a job to the event's slot in rule, if it has one: the
// slot stays taken until every target returned or the timeout passed.
// Returns that came before count.
func (l *limits) started(event, rule, jid string, targets []string, now time.Time) {
	l.mu.Lock()
	// Read under l.mu: a return handled meanwhile is either among these or
	// finds the job below (its lane adds it here before it asks limits).
	early := l.early.of(jid)
	id := slotID{event, rule}
	s := l.slots[id]
	if s == nil || jid == "" || len(targets) == 0 {
		l.mu.Unlock()
		return
	}
	j := &limitJob{slot: id, waiting: map[string]bool{}, deadline: now.Add(l.timeout)}
	for _, t := range targets {
		if _, came := early[t]; !came {
			j.waiting[t] = true
		}
	}
	var next []*queued
	if len(j.waiting) == 0 {
		s.jobs++
		next = l.jobDone(id)
	} else {
		s.jobs++
		l.jobs[jid] = append(l.jobs[jid], j)
	}
	l.mu.Unlock()
	l.release(next)
}

// hold keeps the event's slot in rule taken while something outside its
// jobs (a retry waiting for its backoff) belongs to it; unhold lets go.
func (l *limits) hold(event, rule string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.slots[slotID{event, rule}]; s != nil {
		s.jobs++
	}
}

func (l *limits) unhold(event, rule string) {
	l.mu.Lock()
	next := l.jobDone(slotID{event, rule})
	l.mu.Unlock()
	l.release(next)
}

// returned records a minion's return of jid.
func (l *limits) returned(jid, minion string) {
	l.mu.Lock()
	js := l.jobs[jid]
	var next []*queued
	filterJobs(l.jobs, jid, js, func(j *limitJob) bool {
		delete(j.waiting, minion)
		if len(j.waiting) == 0 {
			next = append(next, l.jobDone(j.slot)...)
			return false
		}
		return true
	})
	l.mu.Unlock()
	l.release(next)
}

// ended records that the event's handling ended: slots with no job in
// flight are given back.
func (l *limits) ended(event string, rules []string) {
	l.mu.Lock()
	var next []*queued
	for _, r := range rules {
		id := slotID{event, r}
		if s := l.slots[id]; s != nil {
			s.ended = true
			if s.jobs == 0 {
				next = append(next, l.free(id)...)
			}
		}
	}
	l.mu.Unlock()
	l.release(next)
}

// expire ends the jobs past their deadline (targets that never returned).
func (l *limits) expire(now time.Time) {
	l.mu.Lock()
	var next []*queued
	for jid, js := range l.jobs {
		filterJobs(l.jobs, jid, js, func(j *limitJob) bool {
			if now.After(j.deadline) {
				next = append(next, l.jobDone(j.slot)...)
				return false
			}
			return true
		})
	}
	l.mu.Unlock()
	l.release(next)
}

// jobDone counts a job of the slot done, freeing the slot when it was the
// last and the event's handling ended. Called with mu held.
func (l *limits) jobDone(id slotID) []*queued {
	s := l.slots[id]
	if s == nil {
		return nil
	}
	s.jobs--
	if s.jobs > 0 || !s.ended {
		return nil
	}
	return l.free(id)
}

// free gives the slot back and hands it to the next queued event, whose
// slot it becomes at once (so no newer event overtakes it). Called with mu
// held; the caller releases what it returns after unlocking.
func (l *limits) free(id slotID) []*queued {
	s := l.slots[id]
	delete(l.slots, id)
	lk := l.keys[s.k]
	if lk == nil {
		return nil
	}
	if len(lk.queue) == 0 {
		lk.inFlight--
		if lk.inFlight == 0 {
			delete(l.keys, s.k)
		}
		return nil
	}
	q := lk.queue[0]
	lk.queue = lk.queue[1:]
	l.slots[slotID{q.event, s.k.rule}] = &slot{k: s.k}
	return []*queued{q}
}

// stop gives every queued event back unhandled and returns how many.
func (l *limits) stop() int {
	l.mu.Lock()
	var all []*queued
	for k, lk := range l.keys {
		all = append(all, lk.queue...)
		lk.queue = nil
		if lk.inFlight == 0 {
			delete(l.keys, k)
		}
	}
	l.mu.Unlock()
	for _, q := range all {
		q.abandon()
	}
	return len(all)
}

// release hands the freed slots to their queued events, each from a
// goroutine of its own (spawn: the reactor's tasks): resubmitting may
// block on a full lane, and the caller may be that lane.
func (l *limits) release(qs []*queued) {
	for _, q := range qs {
		l.spawn(q.release)
	}
}
