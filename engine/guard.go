package engine

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// GuardOptions configure the loop guard.
type GuardOptions struct {
	// Settle is how long, after every target of a reaction's job returned,
	// events from those minions that would fire the same reaction stay
	// suppressed (default 5s).
	Settle time.Duration
	// JobTimeout bounds the wait for a job's returns (default 5m).
	JobTimeout time.Duration
	// Disabled turns the job-linked guard off (throttle, debounce and the
	// hop limit still apply).
	Disabled bool
}

// guardKey names one reaction on one minion.
type guardKey struct {
	sls, id, minion string
}

type guardEntry struct {
	jid      string
	eventID  string    // the event whose reaction started the job
	until    time.Time // suppress while now < until
	returned bool
}

// Guard is the job-linked loop guard: it remembers which reaction started
// which job on which minions and suppresses the same reaction for those
// minions until the job returned and a settle window passed. It also keeps
// the throttle and debounce state of rules and the hop counts of events
// that reactions are expected to fire. It is safe for concurrent use.
type Guard struct {
	opts GuardOptions

	mu       sync.Mutex
	entries  map[guardKey]*guardEntry
	jobs     map[string][]guardKey // jid -> keys waiting for its returns
	throttle map[throttleKey][]time.Time
	debounce map[throttleKey]*debounceState
	expected map[string][]expectedEvent // tag -> hop/cause of events reactions fire, oldest first
	early    map[string][]earlyReturn   // jid -> returns seen before the dispatch was recorded
	lastGC   time.Time
}

// earlyReturn is a job return processed (on another lane) before the lane
// that dispatched the job recorded it.
type earlyReturn struct {
	minion string
	at     time.Time
}

type throttleKey struct {
	rule int
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
}

type expectedEvent struct {
	hop   int
	cause string
	until time.Time
}

// NewGuard returns a guard with defaults filled in.
func NewGuard(o GuardOptions) *Guard {
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 5 * time.Minute
	}
	return &Guard{opts: o, entries: map[guardKey]*guardEntry{}, jobs: map[string][]guardKey{},
		throttle: map[throttleKey][]time.Time{}, debounce: map[throttleKey]*debounceState{}, expected: map[string][]expectedEvent{}, early: map[string][]earlyReturn{}}
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
	defer g.mu.Unlock()
	g.gc(now)
	for _, m := range targets {
		k := guardKey{sls, id, m}
		until := now.Add(g.opts.JobTimeout)
		if jid == "" {
			// No job to wait for (e.g. a driver that returns no jid): hold
			// for the settle window only.
			until = now.Add(g.opts.Settle)
		}
		e := &guardEntry{jid: jid, eventID: eventID, until: until, returned: jid == ""}
		for _, r := range g.early[jid] {
			if r.minion == "" || r.minion == m {
				e.returned, e.until = true, r.at.Add(g.opts.Settle)
			}
		}
		g.entries[k] = e
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

// Returned records a job return from minion; the reaction that started the
// job stays suppressed for that minion until the settle window ends. It
// reports whether the return belonged to a guarded job.
func (g *Guard) Returned(jid, minion string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	found := false
	for _, k := range g.jobs[jid] {
		if minion != "" && k.minion != minion {
			continue // "" is a runner or wheel job: every key returns
		}
		if e := g.entries[k]; e != nil && e.jid == jid {
			e.returned = true
			e.until = now.Add(g.opts.Settle)
			found = true
		}
	}
	if !found && !g.opts.Disabled {
		// The return may have overtaken the dispatch's bookkeeping (it is
		// handled on its own minion's lane): remember it briefly.
		g.early[jid] = append(g.early[jid], earlyReturn{minion: minion, at: now})
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

// TakeExpired removes and returns the jobs whose minions did not return
// within the job timeout.
func (g *Guard) TakeExpired(now time.Time) []Expired {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Expired
	for k, e := range g.entries {
		if e.jid != "" && !e.returned && !now.Before(e.until) {
			out = append(out, Expired{SLS: k.sls, ID: k.id, Minion: k.minion, JID: e.jid, EventID: e.eventID})
			delete(g.entries, k)
		}
	}
	return out
}

// gc forgets expired entries; called with mu held.
func (g *Guard) gc(now time.Time) {
	if len(g.entries) < 4096 || now.Sub(g.lastGC) < time.Second {
		return
	}
	g.lastGC = now
	for k, e := range g.entries {
		if !now.Before(e.until) {
			delete(g.entries, k)
		}
	}
	for jid, rs := range g.early {
		if len(rs) > 0 && now.Sub(rs[len(rs)-1].at) > time.Minute {
			delete(g.early, jid)
		}
	}
	for tag, list := range g.expected {
		if len(list) > 0 && !now.Before(list[len(list)-1].until) {
			delete(g.expected, tag)
		}
	}
	for jid, keys := range g.jobs {
		live := keys[:0]
		for _, k := range keys {
			if e := g.entries[k]; e != nil && e.jid == jid {
				live = append(live, k)
			}
		}
		if len(live) == 0 {
			delete(g.jobs, jid)
		} else {
			g.jobs[jid] = live
		}
	}
}

// Throttle reports whether rule may react for key now, at most count times
// per period; a true answer counts.
func (g *Guard) Throttle(rule int, key string, count int, per time.Duration, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := throttleKey{rule, key}
	times := g.throttle[k]
	live := times[:0]
	for _, t := range times {
		if now.Sub(t) < per {
			live = append(live, t)
		}
	}
	if len(live) >= count {
		g.throttle[k] = live
		return false
	}
	g.throttle[k] = append(live, now)
	return true
}

// Debounce holds an event for rule and key: fire is called with the last
// event's body once no new event came for quiet. let, when not nil, is the
// held event's release: the guard calls let(false) when a newer event for
// the same rule and key replaces it (the newer one stands for it) and
// hands it to fire otherwise, which must call it once the fired event was
// handled (false) or could not be (true); StopTimers calls let(true). So
// a JetStream message stays unacknowledged while a debounce holds it.
func (g *Guard) Debounce(rule int, key string, body []byte, hop int, quiet time.Duration, let func(abandon bool), fire func(body []byte, hop int, let func(abandon bool))) {
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
	if replaced != nil {
		replaced(false)
	}
}

// StopTimers cancels pending debounces, releasing each held event as
// abandoned (let(true)); it returns how many it cancelled.
func (g *Guard) StopTimers() int {
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
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expected[tag] = append(g.expected[tag], expectedEvent{hop: hop, cause: cause, until: now.Add(time.Minute)})
}

// HopOf returns the hop count of an arriving event without a hop header:
// the recorded one when a reaction was expected to fire this tag. The
// expectation is used up: one dispatch fires one event.
func (g *Guard) HopOf(tag string, now time.Time) (int, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for list := g.expected[tag]; len(list) > 0; list = g.expected[tag] {
		e := list[0] // one dispatch fires one event
		if len(list) == 1 {
			delete(g.expected, tag)
		} else {
			g.expected[tag] = list[1:]
		}
		if now.Before(e.until) {
			return e.hop, e.cause
		}
	}
	return 0, ""
}

// firedTag returns the tag an event-sending reaction will fire, if the
// chunk is one (event.send / event.fire_master).
func firedTag(c *event.Chunk) string {
	switch c.Str("fun") {
	case "event.send", "event.fire_master", "event.fire":
	default:
		return ""
	}
	call, err := actions.CallFor(c)
	if err != nil {
		return ""
	}
	if v, ok := call.Kwarg.Get("tag"); ok {
		s, _ := v.(string)
		return s
	}
	if len(call.Arg) > 0 {
		s, _ := call.Arg[0].(string)
		return s
	}
	if v, ok := c.Get("tag"); ok { // legacy runner body: - tag: x
		s, _ := v.(string)
		return s
	}
	return ""
}

// targetsOf returns the minions a dispatched chunk's job runs on: what the
// driver reported, else a literal target, else the event's minion.
func targetsOf(c *event.Chunk, r actions.Result, eventMinion string) []string {
	if len(r.Minions) > 0 {
		return r.Minions
	}
	tgtType := c.Str("tgt_type")
	if tgtType != "" && tgtType != "glob" && tgtType != "list" {
		// nodegroup, grain, compound...: the minions are not known here.
		if eventMinion != "" {
			return []string{eventMinion}
		}
		return nil
	}
	switch t, _ := c.Get("tgt"); tt := t.(type) {
	case string:
		if tgtType == "list" {
			var out []string
			for _, m := range strings.Split(tt, ",") {
				if m = strings.TrimSpace(m); m != "" {
					out = append(out, m)
				}
			}
			if len(out) > 0 {
				return out
			}
		} else if tt != "" && !strings.ContainsAny(tt, "*?[]@,: ") {
			return []string{tt}
		}
	case []any:
		var out []string
		for _, e := range tt {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	if eventMinion != "" {
		return []string{eventMinion}
	}
	return nil
}
