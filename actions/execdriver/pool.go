package execdriver

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// maxTargetLen bounds the -L argument of a shared run, well below Linux's
// 128 KiB limit on one argument.
const maxTargetLen = 32 << 10

// pool bounds the programs running at once and queues the reactions that
// wait for a free slot.
type pool struct {
	max     int
	mu      sync.Mutex
	queue   []*job
	running int // slots in use, at most max
}

// job is one reaction waiting for, or in, a run.
type job struct {
	ctx  context.Context
	inv  invocation
	key  string   // coalescing key; empty when the reaction runs alone
	ids  []string // its minion ids, when key is set
	done chan reply
	// Guarded by pool.mu: taken once it left the queue for a run, shared
	// when that run serves other reactions too.
	taken, shared bool
}

// reply is the outcome of one job.
type reply struct {
	res actions.Result
	err error
}

// dispatch queues j in p and waits for its reply; see Driver.Do for what
// the end of ctx does.
func (d *Driver) dispatch(ctx context.Context, p *pool, j *job) (actions.Result, error) {
	d.enqueue(p, j)
	select {
	case r := <-j.done:
		return r.res, r.err
	case <-ctx.Done():
	}
	p.mu.Lock()
	taken, shared := j.taken, j.shared
	if !taken {
		p.queue = slices.DeleteFunc(p.queue, func(q *job) bool { return q == j })
		j.taken = true
	}
	p.mu.Unlock()
	if !taken {
		return d.finish(j.inv, outcome{stop: stopCanceled, ctxErr: ctx.Err()})
	}
	if !shared {
		// A run of its own watches ctx: it stops the program and
		// reports how.
		r := <-j.done
		return r.res, r.err
	}
	select {
	case r := <-j.done:
		return r.res, r.err
	default:
	}
	return actions.Result{}, fmt.Errorf("%s stopped waiting: %w (the run it shares with other reactions goes on; its job may still start)", filepath.Base(j.inv.prog.name), ctx.Err())
}

// enqueue adds j to p's queue and, when a slot is free, starts a runner
// that takes j, with the reactions that arrive within gatherWindow and may
// share its run.
func (d *Driver) enqueue(p *pool, j *job) {
	p.mu.Lock()
	p.queue = append(p.queue, j)
	if p.running >= p.max {
		p.mu.Unlock()
		return
	}
	p.running++
	p.mu.Unlock()
	go d.runner(p)
}

// gatherWindow is how long a free slot waits for other reactions before it
// starts a run. Reactions come in waves (lanes whose shared run just ended
// all send their next one at once), and a run costs a Python start of
// about half a CPU-second, so a few milliseconds to let a wave arrive make
// one run out of many.
const gatherWindow = 5 * time.Millisecond

// runner waits gatherWindow, then runs groups from p's queue until it is
// empty and frees its slot.
func (d *Driver) runner(p *pool) {
	time.Sleep(gatherWindow)
	for {
		p.mu.Lock()
		group := d.takeLocked(p)
		if len(group) == 0 {
			p.running--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		d.runGroup(group)
	}
}

// takeLocked takes the oldest job from p's queue and, when it is
// coalescable, the waiting jobs that may share its run: same key, live
// context, no minion in common. p.mu is held.
func (d *Driver) takeLocked(p *pool) []*job {
	if len(p.queue) == 0 {
		return nil
	}
	first := p.queue[0]
	group := []*job{first}
	if first.key != "" && first.ctx.Err() == nil {
		seen := map[string]bool{}
		size := 0
		for _, id := range first.ids {
			seen[id] = true
			size += len(id) + 1
		}
	scan:
		for _, j := range p.queue[1:] {
			if len(group) >= d.maxCoalesce {
				break
			}
			if j.key != first.key || j.ctx.Err() != nil {
				continue
			}
			n := size
			for _, id := range j.ids {
				if seen[id] {
					continue scan
				}
				n += len(id) + 1
			}
			if n > maxTargetLen {
				continue
			}
			for _, id := range j.ids {
				seen[id] = true
			}
			size = n
			group = append(group, j)
		}
	}
	for _, j := range group {
		j.taken, j.shared = true, len(group) > 1
	}
	p.queue = slices.DeleteFunc(p.queue, func(j *job) bool { return j.taken })
	return group
}

// runGroup runs one job under its own context, or a group as one salt run
// with their minions as a list target, under a context that ends once
// every member's has, and hands each job its reply.
func (d *Driver) runGroup(group []*job) {
	if len(group) == 1 {
		j := group[0]
		res, err := d.finish(j.inv, d.run(j.ctx, j.inv.prog.path, j.inv.args))
		j.done <- reply{res: res, err: err}
		return
	}
	var ids []string
	for _, j := range group {
		ids = append(ids, j.ids...)
	}
	inv := group[0].inv
	inv.args = listTargetArgs(inv, ids)
	ctx, cancel := groupContext(group)
	res, err := d.finish(inv, d.run(ctx, inv.prog.path, inv.args))
	cancel()
	if err != nil {
		err = fmt.Errorf("run shared by %d reactions (-L %s): %w", len(group), abbreviate(strings.Join(ids, ","), 80), err)
	}
	for _, j := range group {
		r := reply{res: res, err: err}
		if err == nil {
			r.res.Minions = slices.Clone(j.ids)
		}
		j.done <- r
	}
}

// groupContext returns a context that is canceled once every job's
// context has ended.
func groupContext(group []*job) (context.Context, context.CancelFunc) {
	ctxs := make([]context.Context, len(group))
	for i, j := range group {
		ctxs[i] = j.ctx
	}
	return actions.AllDone(ctxs)
}

// listTargetArgs rewrites a local command line for a list target of ids:
// the target-type flag becomes -L and the target the ids joined by commas.
func listTargetArgs(inv invocation, ids []string) []string {
	skip := inv.flagAt
	if inv.hasFlag {
		skip++
	}
	out := make([]string, 0, len(inv.args)+1)
	out = append(out, inv.args[:inv.flagAt]...)
	out = append(out, "-L")
	out = append(out, inv.args[skip:inv.tgtAt]...)
	out = append(out, strings.Join(ids, ","))
	return append(out, inv.args[inv.tgtAt+1:]...)
}

// coalesceKey returns, for a local reaction whose target is literal minion
// ids, the key that reactions sharing a run must have in common, and those
// ids; the key is empty for any other reaction. The key holds the
// function, arg, kwarg, ret and every other chunk key but tgt, tgt_type
// and the compiler's bookkeeping (__id__, __sls__ and other __ keys,
// order, and name when it repeats __id__), and the command line without
// its target and target-type flag.
func coalesceKey(call actions.Call, c *event.Chunk, inv invocation) (string, []string) {
	if call.Client != "local" {
		return "", nil
	}
	ids := actions.LiteralMinions(call.Tgt, call.TgtType)
	if ids == nil {
		return "", nil
	}
	other := event.NewMap(call.Extra.Len())
	for i := 0; i < call.Extra.Len(); i++ {
		k, v := call.Extra.At(i)
		if strings.HasPrefix(k, "__") || k == "order" || (k == "name" && c.Str("name") == c.Str("__id__")) {
			continue
		}
		other.Set(k, v)
	}
	b, err := event.AppendJSON(nil, []any{call.Fun, call.Arg, call.Kwarg, call.Ret, other})
	if err != nil {
		return "", nil
	}
	rest := slices.Concat(inv.args[:inv.flagAt], inv.args[inv.flagAt+btoi(inv.hasFlag):inv.tgtAt], inv.args[inv.tgtAt+1:])
	return string(b) + "\x00" + strings.Join(rest, "\x00"), ids
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// abbreviate shortens s to at most n bytes, marking the cut.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
