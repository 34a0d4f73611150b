package reactor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
)

// collects applies the rules' collect option: a rule's events are gathered
// per key for a window from the first (or until a quiet period passed),
// then the rule reacts once, for the last event, with all of them as
// events. Each event gathered stays unacknowledged until that reaction was
// handled, so a stop or a crash leaves them to JetStream's redelivery.
type collects struct {
	mu     sync.Mutex
	groups map[ruleKey]*collection
}

// collection is one rule and key's events gathered so far.
type collection struct {
	bodies [][]byte
	lets   []func(abandon bool)
	// last is the last event gathered, which the rule reacts to (with
	// the highest hop of the events gathered).
	last     held
	left     int // events left out past max
	deadline *time.Timer
	quiet    *time.Timer
	gen      int
}

func newCollects() *collects { return &collects{groups: map[ruleKey]*collection{}} }

// add gathers an event; fire is called once with the collection when its
// window or quiet period ends. It reports false when the collection was
// full (max) and the event left out.
func (c *collects) add(rule, key string, opts config.Collect, h held, let func(bool), fire func(*collection)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := ruleKey{rule, key}
	g := c.groups[k]
	if g == nil {
		g = &collection{}
		c.groups[k] = g
		g.deadline = time.AfterFunc(opts.Within, func() { c.take(k, g, -1, fire) })
	}
	if opts.Quiet > 0 {
		// Any event of the key, one left out too, means it is not quiet.
		g.gen++
		gen := g.gen
		if g.quiet != nil {
			g.quiet.Stop()
		}
		g.quiet = time.AfterFunc(opts.Quiet, func() { c.take(k, g, gen, fire) })
	}
	if len(g.bodies) >= opts.Max {
		g.left++
		return false
	}
	g.bodies = append(g.bodies, h.body)
	g.lets = append(g.lets, let)
	h.hop = max(g.last.hop, h.hop)
	g.last = h
	return true
}

// take ends the collection g of k and fires it, unless it was taken
// already, or (gen >= 0, its quiet timer) a newer event came since.
func (c *collects) take(k ruleKey, g *collection, gen int, fire func(*collection)) {
	c.mu.Lock()
	if c.groups[k] != g || (gen >= 0 && g.gen != gen) {
		c.mu.Unlock()
		return
	}
	delete(c.groups, k)
	g.deadline.Stop()
	if g.quiet != nil {
		g.quiet.Stop()
	}
	c.mu.Unlock()
	fire(g)
}

// let ends every event of the collection.
func (g *collection) let(abandon bool) {
	for _, l := range g.lets {
		l(abandon)
	}
}

// events are the collection's events as {"tag", "data"} maps, in order.
func (g *collection) events() []any {
	out := make([]any, 0, len(g.bodies))
	for _, b := range g.bodies {
		tag, raw, err := event.SplitEnvelope(b)
		if err != nil {
			continue
		}
		data, err := event.DecodeData(raw)
		if err != nil {
			continue
		}
		out = append(out, map[string]any{"tag": tag, "data": data})
	}
	return out
}

// stop gives every collection's events back unhandled and returns how
// many events that was.
func (c *collects) stop() int {
	c.mu.Lock()
	var gs []*collection
	for k, g := range c.groups {
		g.deadline.Stop()
		if g.quiet != nil {
			g.quiet.Stop()
		}
		gs = append(gs, g)
		delete(c.groups, k)
	}
	c.mu.Unlock()
	n := 0
	for _, g := range gs {
		n += len(g.lets)
		g.let(true)
	}
	return n
}

// collect gathers the event for the rule and key (the whole rule without
// a key option), held unacknowledged; the rule reacts once, for the last
// event, when the collection ends.
func (r *Reactor) collect(ctx context.Context, ev *inflight, a engine.Admitted) (Decision, bool) {
	rl, opts, key := a.Rule, a.Rule.Options.Collect, a.Key
	if rl.Options.Key == "" {
		key = "" // one collection for the rule
	}
	// Those JetStream redelivers are counted by collects.stop.
	let := r.letter(ev, nil, &r.left.collectLost)
	added := r.collects.add(rl.ID, key, opts, holding(ev, rl.ID), let, func(g *collection) { r.runTask(func() { r.collected(ctx, rl, key, g) }) })
	if !added {
		let(false)
		return Decision{Reason: CollectFull, Detail: fmt.Sprintf("collect: the collection for key %q is full (max %d); left out", key, opts.Max),
			Attrs: []any{"max", opts.Max}}, false
	}
	return Decision{Reason: Collected, Detail: fmt.Sprintf("collect: gathered for key %q; the rule reacts once when the collection ends (within %s)", key, opts.Within)}, false
}

// collected ends collection g of rule rl and key: the rule reacts once,
// for its last event, with all of them as events.
func (r *Reactor) collected(ctx context.Context, rl *config.Rule, key string, g *collection) {
	if g.left > 0 {
		r.opts.Log.Warn(msgCollectLeftOut, "rule", rl.Glob, "key", key, "max", rl.Options.Collect.Max, "left_out", g.left, "fix", fixCollectFull)
	}
	last := g.last
	last.collected = g.events()
	r.opts.Log.Info(msgCollectEnded, "rule", rl.Glob, "key", key, "events", len(g.bodies))
	r.resubmit(ctx, last, g.let) // a refused one is settled: g.let(true)
}
