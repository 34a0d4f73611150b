package consume

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/natsbus/kv"
)

// apply takes a change of the bucket: a replica's presence or a lease.
func (p *Partitioned) apply(e kv.StateEntry) {
	p.mu.Lock()
	switch {
	case strings.HasPrefix(e.Key, "member."):
		id := strings.TrimPrefix(e.Key, "member.")
		if n, err := strconv.Atoi(string(e.Value)); err == nil && !e.Deleted {
			p.members[id] = n
			if n != p.o.Partitions && !p.warned[id] {
				p.warned[id] = true
				p.log.Error("a replica runs with another number of partitions",
					"detail", "per-minion order does not hold between the two",
					"fix", "stop every replica to change the number",
					"replica", id, "its_partitions", n, "partitions", p.o.Partitions)
			}
		} else {
			delete(p.members, id)
		}
	case strings.HasPrefix(e.Key, "lease."):
		i, ok := p.byLease[e.Key]
		if !ok {
			break
		}
		if e.Deleted || len(e.Value) == 0 {
			delete(p.leases, i)
		} else {
			p.leases[i] = string(e.Value)
		}
	}
	p.mu.Unlock()
	p.poke()
}

func (p *Partitioned) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// refresh reads the replicas present and the leases from the server: the
// bucket's watch makes changes known at once, but a watch can stall or end
// when a node of the cluster dies, and the balance must not rest on it.
func (p *Partitioned) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
	defer cancel()
	members, err := p.state.Scan(ctx, "member.")
	if err != nil {
		return
	}
	leases, err := p.state.Scan(ctx, "lease.")
	if err != nil {
		return
	}
	p.forgetDrained(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.members)
	for k, v := range members {
		if n, err := strconv.Atoi(string(v)); err == nil {
			p.members[strings.TrimPrefix(k, "member.")] = n
		}
	}
	clear(p.leases)
	for k, v := range leases {
		if i, ok := p.byLease[k]; ok && len(v) > 0 {
			p.leases[i] = string(v)
		}
	}
	for i, r := range p.owned { // a lease acquired since the scan began
		if p.leases[i] == "" && r != nil {
			p.leases[i] = p.o.Replica
		}
	}
	now := time.Now()
	p.readAt = now
	active := map[int]bool{}
	for _, u := range p.active() {
		active[u.i] = true
		if p.leases[u.i] != "" {
			delete(p.unowned, u.i)
		} else if _, ok := p.unowned[u.i]; !ok {
			p.unowned[u.i] = now
		}
	}
	for i := range p.unowned {
		if !active[i] {
			delete(p.unowned, i)
		}
	}
}

// Health reports what keeps this replica's partitioned consumption from
// working, for its /healthz: the leases could not be read from the
// bucket for two lease times (the replica can neither take nor keep
// partitions), or a partition has had no owner for three lease times (the
// events of its minions wait, and no replica takes it over). nil when
// neither holds; a replica that owns no partition (more replicas than
// partitions) is healthy.
func (p *Partitioned) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil
	}
	if d := time.Since(p.readAt); d > 2*p.o.LeaseTTL {
		return fmt.Errorf("the partition leases (bucket %s) could not be read for %s", p.o.Bucket, d.Round(time.Second))
	}
	worst, since := -1, time.Time{}
	for i, t := range p.unowned {
		if worst < 0 || t.Before(since) {
			worst, since = i, t
		}
	}
	if d := time.Since(since); worst >= 0 && d > 3*p.o.LeaseTTL {
		what := fmt.Sprintf("unit %d", worst)
		if u := p.unitLocked(worst); u != nil {
			what = u.what
		}
		return fmt.Errorf("%s has had no owner for %s (%d without one)", what, d.Round(time.Second), len(p.unowned))
	}
	return nil
}

// heartbeat writes this replica's presence, kept for a lease's time.
func (p *Partitioned) heartbeat() {
	p.state.Put("member."+p.o.Replica, []byte(strconv.Itoa(p.o.Partitions)), p.o.LeaseTTL)
}

// manage renews the leases, announces this replica, and balances the
// partitions: it takes free ones up to its share (the partitions divided
// by the live replicas, rounded up) and hands over one at a time those
// beyond it.
func (p *Partitioned) manage() {
	defer close(p.done)
	t := time.NewTicker(p.o.LeaseTTL / 4)
	defer t.Stop()
	lastBeat := time.Now()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		case <-p.kick:
		}
		p.mu.Lock()
		stopping := p.stopping
		p.mu.Unlock()
		if !stopping && time.Since(lastBeat) >= p.o.LeaseTTL/4 {
			p.heartbeat()
			lastBeat = time.Now()
			p.refresh()
		}
		p.renew()
		if !stopping {
			p.balance()
		}
	}
}

// renew renews the lease of every partition held, all at once, and stops
// consuming one whose lease is someone else's, expired, or could not be
// renewed for two thirds of its time (each partition's acknowledgement
// loop checks that too, so a slow renewal cannot keep a partition past
// it).
func (p *Partitioned) renew() {
	p.mu.Lock()
	runs := make([]*partRun, 0, len(p.owned))
	for _, r := range p.owned {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.overdue() {
			p.lose(r, "its lease could not be renewed in time")
			continue
		}
		if time.Since(r.renewedAt()) < p.o.LeaseTTL/8 {
			continue
		}
		wg.Go(func() {
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
			ok, err := p.state.Update(ctx, r.u.lease, p.o.LeaseTTL, func(old []byte) ([]byte, bool) {
				return []byte(p.o.Replica), string(old) == p.o.Replica
			})
			cancel()
			switch {
			case ok:
				r.renewed.Store(began.UnixNano())
			case err == nil:
				p.lose(r, "its lease expired or another replica holds it")
			case r.overdue():
				p.lose(r, "its lease could not be renewed: "+err.Error())
			}
		})
	}
	wg.Wait()
}

// writeFree marks u's lease free, if this replica holds it.
func (p *Partitioned) writeFree(u *unit) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = p.state.Update(ctx, u.lease, time.Second, func(old []byte) ([]byte, bool) {
		return []byte{}, string(old) == p.o.Replica
	})
}

// lose stops consuming partition r at once: its lease is gone.
func (p *Partitioned) lose(r *partRun, why string) {
	p.mu.Lock()
	if p.owned[r.i] != r {
		p.mu.Unlock()
		return
	}
	delete(p.owned, r.i)
	p.mu.Unlock()
	r.lost.Store(true)
	r.halt()
	// Acknowledge what was handled; the rest goes to the next owner.
	if !p.tasks.Go(func() { r.settle(0) }) {
		r.settle(0)
	}
	p.log.Error("partition lost: stopped consuming it",
		"detail", "its events not acknowledged go to the replica that takes it over",
		"consumer", r.u.name, "replica", p.o.Replica, "reason", why)
	p.changed("lost", r.i)
}
