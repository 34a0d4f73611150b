package consume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// share is how many of the active units (see active) this replica should
// hold (p.mu held).
func (p *Partitioned) share() int {
	live := 1
	for id, n := range p.members {
		if id != p.o.Replica && n == p.o.Partitions {
			live++
		}
	}
	n := 0
	for _, u := range p.active() {
		if !u.plain {
			n++
		}
	}
	return (n + live - 1) / live
}

// preference orders the active units for this replica (rendezvous
// hashing), so that each replica prefers different ones and keeps them
// (p.mu held).
func (p *Partitioned) preference() []*unit {
	units := slices.Clone(p.active())
	score := make(map[int]uint32, len(units))
	for _, u := range units {
		h := fnv.New32a()
		_, _ = h.Write([]byte(p.o.Replica + "/" + u.name))
		score[u.i] = h.Sum32()
	}
	slices.SortFunc(units, func(a, b *unit) int { return cmp.Compare(score[b.i], score[a.i]) })
	return units
}

// balance takes free partitions up to this replica's share, or hands one
// over when it holds more.
func (p *Partitioned) balance() {
	p.mu.Lock()
	share := p.share()
	pref := p.preference()
	held := 0
	for _, r := range p.owned {
		if !r.u.plain {
			held++
		}
	}
	if held > share && p.release == nil {
		for _, u := range slices.Backward(pref) {
			if r := p.owned[u.i]; r != nil && !u.plain {
				p.release = r
				why := fmt.Sprintf("balancing: %d partitions to share, %d each at most", len(pref), share)
				p.tasks.Go(func() { p.handOver(r, why) }) // manage runs: not released yet
				break
			}
		}
	}
	var free []*unit
	for _, u := range pref {
		i := u.i
		// A lease held by a replica no longer present is tried
		// too: its expiry may not have reached this replica (a
		// watch cut by a node's death), and past twice its time a
		// lease the server failed to expire is stale.
		if owner := p.leases[i]; p.owned[i] == nil && (owner == "" || p.members[owner] == 0) && (u.plain || held < share) {
			free = append(free, u)
		}
	}
	p.mu.Unlock()
	for _, u := range free {
		i := u.i
		if held >= share && !u.plain {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
		began := time.Now()
		var stale string
		ok, err := p.state.UpdateAt(ctx, u.lease, p.o.LeaseTTL, func(old []byte, written time.Time) ([]byte, bool) {
			stale = ""
			if len(old) > 0 && time.Since(written) > 2*p.o.LeaseTTL {
				stale = string(old)
			}
			return []byte(p.o.Replica), len(old) == 0 || stale != ""
		})
		cancel()
		if err != nil || !ok {
			continue
		}
		if stale != "" {
			p.log.Warn("partition lease of a replica gone was not expired by the server: taken over", "consumer", u.name, "holder", stale)
		}
		if !u.plain {
			held++
		}
		r := newPartRun(p, u)
		r.renewed.Store(began.UnixNano())
		p.mu.Lock()
		stopping := p.stopping
		if !stopping {
			p.owned[i] = r
			p.leases[i] = p.o.Replica
		}
		p.mu.Unlock()
		if stopping {
			p.writeFree(u)
			return
		}
		p.tasks.Go(func() { r.start("acquired") }) // manage runs: not released yet
	}
}

// handOver stops pulling partition r, waits until the events handed to
// the handler are settled (the lease renewed meanwhile), acknowledges
// them and frees the lease for another replica: a next owner starting
// while events of the partition still wait here would handle later events
// of a minion before them. The wait lasts as long as the reactor holds an
// event (a debounce's quiet period, a collect window, a retry waiting for
// its job), and no other hand-over starts meanwhile: balancing waits for
// order.
func (p *Partitioned) handOver(r *partRun, why string) {
	r.halt()
	r.settle(-1)
	p.mu.Lock()
	mine := p.owned[r.i] == r
	if mine {
		delete(p.owned, r.i)
	}
	if p.release == r {
		p.release = nil
	}
	p.mu.Unlock()
	if !mine {
		return
	}
	p.writeFree(r.u)
	p.log.Info("partition handed over", "consumer", r.u.name, "replica", p.o.Replica, "reason", why)
	p.changed("released", r.i)
	p.poke()
}

// drained ends the drain of another number's partition r: its consumer is
// deleted, its lease freed, and this number's partitions start once none
// is left.
func (p *Partitioned) drained(r *partRun, why string) {
	r.halt()
	r.settle(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := p.deleteConsumers(ctx, []string{r.u.name})
	cancel()
	if err != nil {
		p.log.Warn("drained partition: deleting its consumer failed; retried by the next holder", "consumer", r.u.name, "err", err)
		p.lose(r, "its consumer could not be deleted")
		return
	}
	p.mu.Lock()
	if p.owned[r.i] == r {
		delete(p.owned, r.i)
	}
	delete(p.old, r.i)
	left := len(p.old)
	p.mu.Unlock()
	p.state.Delete(r.u.lease, time.Second)
	p.log.Info("partition of the former number drained: consumer deleted", "consumer", r.u.name, "reason", why, "left", left)
	if left == 0 {
		p.log.Info("the former number's partitions are drained: this number's partitions start", "partitions", p.o.Partitions)
	}
	p.changed("drained", r.i)
	p.poke()
}

// forgetDrained drops the units of another number whose consumer another
// replica deleted, once drained.
func (p *Partitioned) forgetDrained(ctx context.Context) {
	p.mu.Lock()
	var names []*unit
	for _, u := range p.old {
		if p.owned[u.i] == nil {
			names = append(names, u)
		}
	}
	p.mu.Unlock()
	for _, u := range names {
		_, err := p.c.JetStream().Consumer(ctx, p.o.Stream, u.name)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		p.mu.Lock()
		if p.owned[u.i] == nil {
			delete(p.old, u.i)
		}
		p.mu.Unlock()
		p.poke()
	}
}
