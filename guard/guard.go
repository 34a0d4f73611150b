// Package guard keeps reactions from setting themselves off again, and
// the per-rule limits on how often they run: the job-linked loop guard,
// throttle, debounce and the hop counts of events reactions fire. Each
// concern is its own type; Guard puts them together and, with shared
// state, keeps them with the daemon's other replicas.
package guard

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Options configure the loop guard.
type Options struct {
	// Settle is how long, after a reaction's job returned on a minion,
	// that minion's beacons stay held back from the reaction: the time
	// its beacons take to report the job's own changes (default 2s; on
	// real Salt 3006 and 3007 masters with 1s beacon intervals they came
	// at most 0.86s after the return).
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
	// DispatchWait bounds how long an event that may be a consequence of
	// a reaction's dispatch in flight waits for the driver's answer
	// before the guard judges it (Await; default DefaultDispatchWait).
	DispatchWait time.Duration
	// Log receives the shared state's failures; nil discards them.
	Log *slog.Logger
}

// DefaultSettle is the settle window's default (Options.Settle).
const DefaultSettle = 2 * time.Second

// DefaultJobTimeout is the wait for a job's returns by default
// (Options.JobTimeout).
const DefaultJobTimeout = 5 * time.Minute

// Guard is the loop guard and the rules' limits together: it remembers
// which reaction started which job on which minions and suppresses the
// same reaction for those minions until the job returned and a settle
// window passed; it keeps the throttle and debounce state of rules and
// the hop counts of events that reactions are expected to fire. With
// Options.Shared it keeps all of it with the daemon's other replicas. It
// is safe for concurrent use.
type Guard struct {
	opts      Options
	sh        *shared
	jobs      *jobs
	throttles *throttles
	debounces *debounces
	hops      *hops
	progress  *progress
	inflight  *dispatches
	follow    atomic.Pointer[func(jid, minion string, o Outcome, at time.Time)]
}

// New returns a guard with defaults filled in.
func New(o Options) *Guard {
	if o.SharedWait <= 0 {
		o.SharedWait = 2 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = DefaultJobTimeout
	}
	if o.DispatchWait <= 0 {
		o.DispatchWait = DefaultDispatchWait
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	sh := newShared(o.Shared)
	return &Guard{opts: o, sh: sh, jobs: newJobs(o.Settle, o.JobTimeout, sh), throttles: newThrottles(sh, o.SharedWait, o.Log),
		debounces: newDebounces(sh), hops: newHops(sh), progress: newProgress(sh), inflight: newDispatches()}
}

// Settle is the settle window the guard holds a reaction for after its
// job returned.
func (g *Guard) Settle() time.Duration { return g.opts.Settle }

// JobTimeout is how long the guard waits for a job's returns.
func (g *Guard) JobTimeout() time.Duration { return g.opts.JobTimeout }

// Held reports whether reaction r must not run for ev, and on which
// evidence. An event is held back only from the reaction that caused it,
// on evidence (mode ModeBeacons, the default):
//   - an event of a job r started (its return, its progress), by jid;
//   - a beacon of a minion while a job r started runs there, and within
//     the settle window after the job returned there;
//   - a minion's start while a job r started on it has not returned.
//
// (An event r fired itself counts toward the hop limit, which the reactor
// applies to r alone when it knows r fired it: see HopOf.)
// Nothing else: other jobs' returns, auth, presence, custom events are
// never held back as consequences. ModeMinion holds r back from every
// event of its job's minions while the job runs and settles; ModeOff holds
// nothing back. The hop limit applies whatever the mode.
func (g *Guard) Held(r Reaction, mode string, ev Event) (Hold, bool) {
	if g.opts.Disabled || mode == ModeOff {
		return Hold{}, false
	}
	return g.jobs.held(r, mode, ev)
}

// Started records that reaction r of event eventID (the daemon's event
// id, for log lines; may be empty) started job jid on targets.
func (g *Guard) Started(eventID string, r Reaction, jid string, targets []string, now time.Time) {
	if g.opts.Disabled {
		return
	}
	g.jobs.start(eventID, r, jid, targets, now)
}

// Outcome is how a job went on a minion, as its return says: the rules'
// retry and concurrency options read it.
type Outcome int8

// The outcomes of a job return.
const (
	// OutcomeUnknown: the return was not read (no rule needs it).
	OutcomeUnknown Outcome = iota
	// OutcomeOK: success true (or absent) and retcode 0 (or absent).
	OutcomeOK
	// OutcomeFailed: success false, or a non-zero retcode.
	OutcomeFailed
)

// Returned records a job return from minion, with its outcome; the
// reaction that started the job stays suppressed for that minion until the
// settle window ends. It reports whether the return belonged to a guarded
// job. The other replicas learn of a return of a job a reaction started
// (their FollowReturns functions get it when its outcome is known); with
// the job-linked guard off, of every return whose outcome is known.
func (g *Guard) Returned(jid, minion string, o Outcome, now time.Time) bool {
	if g.opts.Disabled {
		if g.sh.on() && o != OutcomeUnknown {
			g.jobs.share(nil, &sharedReturn{JID: jid, Minion: minion, At: now.UnixNano(), Outcome: o}, earlyKeep)
		}
		return false
	}
	return g.jobs.ret(jid, minion, o, now)
}

// FollowReturns makes fn get the job returns other replicas handled
// (with shared state), as they arrive: a reaction's retries and
// concurrency slot follow its job's returns wherever they are handled.
// fn must not block.
func (g *Guard) FollowReturns(fn func(jid, minion string, o Outcome, at time.Time)) {
	g.follow.Store(&fn)
}

// TakeExpired forgets what expired by now (jobs, returns, throttle
// windows, expected events) and returns the jobs whose minions did not
// return within the job timeout: those this process started or, with
// shared state, those one replica claims first (so a job whose replica
// died is reported by another, once).
func (g *Guard) TakeExpired(now time.Time) []Expired {
	g.throttles.expire(now)
	g.hops.expire(now)
	return g.jobs.expire(now)
}

// Throttle reports whether rule (its ID) may react for key now, at most
// count times per period; a true answer counts. With shared state the
// count is the replicas' together.
func (g *Guard) Throttle(rule, key string, count int, per time.Duration, now time.Time) bool {
	return g.throttles.allow(rule, key, count, per, now)
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
func (g *Guard) Debounce(rule, key string, body []byte, hop int, quiet time.Duration, let func(abandon bool), fire func(body []byte, hop int, let func(abandon bool))) {
	g.debounces.hold(rule, key, body, hop, quiet, let, fire)
}

// StopTimers writes what waits for the shared state and cancels pending
// debounces, releasing each held event as abandoned (let(true)); it
// returns how many it cancelled.
func (g *Guard) StopTimers() int {
	g.FlushShared()
	return g.debounces.stop()
}

// AttachShared makes the guard share its state through st from now on:
// a guard made without Options.Shared (the bucket could not be opened at
// start) joins the other replicas once it can. What it decided alone
// until then stays its own; the caller then hands the bucket's entries
// to ApplyShared, as at start.
func (g *Guard) AttachShared(st SharedState) {
	g.sh.state.CompareAndSwap(nil, &stateRef{st})
}

// FlushShared writes the job starts and returns gathered for the shared
// state now (the daemon calls it when it stops).
func (g *Guard) FlushShared() { g.jobs.flush() }

// ExpectEvent records that a reaction (f.By) will fire an event with tag
// (a runner or local event.send), so that event gets its hop count and
// cause though Salt carries no header for it, and is held back from the
// reaction that fired it.
func (g *Guard) ExpectEvent(tag string, f Fired, now time.Time) {
	g.hops.expectEvent(tag, f, now)
}

// HopOf returns what is known of an arriving event a reaction was expected
// to fire with this tag: its hop count, cause and the reaction; zero when
// none was. The expectation is used up (on every replica): one dispatch
// fires one event.
func (g *Guard) HopOf(tag string, now time.Time) Fired {
	return g.hops.hopOf(tag, now)
}

// ApplyShared brings a change of the shared state into the guard: another
// replica's job, return, expected event (or its use), throttle count, or
// debounced event (which replaces the one this replica holds for the same
// rule and key). The guard's own records come back too and change
// nothing.
func (g *Guard) ApplyShared(key string, value []byte, deleted bool) {
	if !g.sh.on() || len(key) < 2 || key[1] != '.' {
		return
	}
	kind := key[0]
	if deleted {
		switch kind {
		case kindExpected:
			g.hops.used(key)
		case kindProgress:
			g.progress.apply(key, nil, true)
		}
		return // the others expire by time here too
	}
	if (kind == kindReturns || kind == kindExpected) && g.sh.own(key) {
		// This replica's own job returns or expected event, back from
		// the bucket (their keys name their origin): nothing to learn.
		return
	}
	switch kind {
	case kindJob:
		if !g.opts.Disabled {
			g.jobs.applyJob(value)
		}
	case kindReturns:
		rs := g.jobs.applyReturns(value, !g.opts.Disabled)
		if fn := g.follow.Load(); fn != nil {
			for _, r := range rs {
				if r.Outcome != OutcomeUnknown {
					(*fn)(r.JID, r.Minion, r.Outcome, time.Unix(0, r.At))
				}
			}
		}
	case kindExpected:
		g.hops.apply(key, value)
	case kindThrottle:
		g.throttles.apply(value)
	case kindDebounce:
		g.debounces.apply(value)
	case kindProgress:
		g.progress.apply(key, value, false)
	}
}

// Progress returns what a reaction recorded under name with SetProgress
// (on this replica or another, before a stop or a crash) for the next
// delivery of its event, while it is due; one this replica has not
// seen is read from the shared state's server (an error: it could not
// be).
func (g *Guard) Progress(ctx context.Context, name string, now time.Time) ([]byte, bool, error) {
	return g.progress.get(ctx, name, now)
}

// SyncShared waits until the shared state's server confirmed the writes
// made so far (records another replica is to find with an event this one
// lets go), or ctx ends; nil at once without shared state.
func (g *Guard) SyncShared(ctx context.Context) error {
	if st := g.sh.st(); st != nil {
		return st.Flush(ctx)
	}
	return nil
}

// SetProgress records value under name for ttl, for whichever replica
// handles the event next (with shared state; else for this process).
func (g *Guard) SetProgress(name string, value []byte, ttl time.Duration, now time.Time) {
	g.progress.set(name, value, ttl, now)
}

// ClearProgress removes name's record: the reaction is through.
func (g *Guard) ClearProgress(name string) { g.progress.clear(name) }
