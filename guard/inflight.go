package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultDispatchWait bounds how long an event waits for a dispatch in
// flight it could be a consequence of (Options.DispatchWait).
const DefaultDispatchWait = time.Minute

// ErrDispatchWait is Await's and AwaitFired's answer when a dispatch in
// flight did not report within Options.DispatchWait: the guard then judges
// without it.
var ErrDispatchWait = errors.New("a reaction's dispatch in flight did not report its job in time")

// InFlight describes a reaction's dispatch before the driver answers:
// what an event arriving meanwhile may be a consequence of.
type InFlight struct {
	// EventID is the event the reaction reacts to (its own dispatches
	// never wait for each other).
	EventID string
	// Reaction is the reaction dispatched.
	Reaction Reaction
	// Kind is the reaction's type ("local", "runner", "wheel", "caller"):
	// the family of the job events it may cause (salt/job, salt/run,
	// salt/wheel); "" when unknown (any).
	Kind string
	// Targets are the minions its job may run on, when the reaction names
	// them literally; nil when they are known only once the driver
	// answers (a glob, a grain, a compound target): any minion.
	Targets []string
	// Fires is the tag of the event the reaction sends (event.send), if
	// it sends one.
	Fires string
	// At is when the dispatch began.
	At time.Time
}

// Dispatch is a reaction's dispatch in flight (Guard.Dispatching): the
// events that may be its consequences wait for its Done before the guard
// judges them.
type Dispatch struct {
	f    InFlight
	d    *dispatches
	done chan struct{}
	once sync.Once
}

// dispatches are the dispatches in flight, by reaction and by the tag
// they fire.
type dispatches struct {
	mu         sync.Mutex
	byReaction map[Reaction][]*Dispatch
	byFired    map[string][]*Dispatch
}

func newDispatches() *dispatches {
	return &dispatches{byReaction: map[Reaction][]*Dispatch{}, byFired: map[string][]*Dispatch{}}
}

// Dispatching records that a reaction's dispatch began and its driver
// has not answered yet. The caller calls Done on the handle once it told
// the guard what the dispatch started (Started, ExpectEvent) or that it
// failed.
func (g *Guard) Dispatching(f InFlight) *Dispatch {
	d := &Dispatch{f: f, d: g.inflight, done: make(chan struct{})}
	ds := g.inflight
	ds.mu.Lock()
	ds.byReaction[f.Reaction] = append(ds.byReaction[f.Reaction], d)
	if f.Fires != "" {
		ds.byFired[f.Fires] = append(ds.byFired[f.Fires], d)
	}
	ds.mu.Unlock()
	return d
}

// Done ends the dispatch's record: the events waiting for it are judged
// now. It is safe to call twice.
func (d *Dispatch) Done() {
	d.once.Do(func() {
		ds := d.d
		ds.mu.Lock()
		drop(ds.byReaction, d.f.Reaction, d)
		if d.f.Fires != "" {
			drop(ds.byFired, d.f.Fires, d)
		}
		ds.mu.Unlock()
		close(d.done)
	})
}

// drop removes d from m[k]; called with the dispatches' mu held.
func drop[K comparable](m map[K][]*Dispatch, k K, d *Dispatch) {
	list := slices.DeleteFunc(m[k], func(x *Dispatch) bool { return x == d })
	if len(list) == 0 {
		delete(m, k)
	} else {
		m[k] = list
	}
}

// Await waits until no dispatch of reaction r that began before ev (and
// not for the same event, eventID) is in flight that ev could be a
// consequence of, as Held weighs it in mode: then Held judges ev with
// what those dispatches started. It waits at most Options.DispatchWait
// (ErrDispatchWait) or until ctx ends (its error). With the job-linked
// guard off, or in ModeOff, it returns at once.
func (g *Guard) Await(ctx context.Context, eventID string, r Reaction, mode string, ev Event) error {
	if g.opts.Disabled || mode == ModeOff {
		return nil
	}
	ds := g.inflight
	ds.mu.Lock()
	var wait []*Dispatch
	for _, d := range ds.byReaction[r] {
		if d.f.EventID != eventID && !d.f.At.After(ev.At) && d.couldCause(mode, ev) {
			wait = append(wait, d)
		}
	}
	ds.mu.Unlock()
	return g.await(ctx, wait)
}

// AwaitFired waits until no dispatch in flight that began before at
// fires an event with tag, so that HopOf finds what such a dispatch
// expects (its hop count and the reaction that fired it). Bounded as
// Await.
func (g *Guard) AwaitFired(ctx context.Context, tag string, at time.Time) error {
	ds := g.inflight
	ds.mu.Lock()
	var wait []*Dispatch
	for _, d := range ds.byFired[tag] {
		if !d.f.At.After(at) {
			wait = append(wait, d)
		}
	}
	ds.mu.Unlock()
	return g.await(ctx, wait)
}

// await waits for each dispatch's Done, within Options.DispatchWait.
func (g *Guard) await(ctx context.Context, wait []*Dispatch) error {
	if len(wait) == 0 {
		return nil
	}
	t := time.NewTimer(g.opts.DispatchWait)
	defer t.Stop()
	for i, d := range wait {
		select {
		case <-d.done:
		case <-t.C:
			return fmt.Errorf("%w (%d of %d dispatches of %s after %s)", ErrDispatchWait, len(wait)-i, len(wait), d.f.Reaction.Rule+"/"+d.f.Reaction.ID, g.opts.DispatchWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// families are the job events each reaction type causes.
var families = map[string]string{"local": "job", "runner": "run", "wheel": "wheel"}

// couldCause reports whether ev could be a consequence of the dispatch
// as Held weighs it in mode: an event of the dispatch's minions Held
// holds back without a jid (a beacon, a start; any in ModeMinion), or an
// event of a job of the family and, for a local job, the minions the
// dispatch may start.
func (d *Dispatch) couldCause(mode string, ev Event) bool {
	mine := ev.Minion != "" && (d.f.Targets == nil || slices.Contains(d.f.Targets, ev.Minion))
	if mine && (mode == ModeMinion || ev.Beacon || ev.Start) {
		return true
	}
	if ev.JID == "" {
		return false
	}
	fam := families[d.f.Kind]
	switch {
	case fam == "" || ev.JobKind == "":
		return true
	case fam != ev.JobKind:
		return false
	case fam == "job" && ev.Minion != "":
		return mine
	}
	return true
}
