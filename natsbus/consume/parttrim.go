package consume

import (
	"context"
	"errors"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// Trimming the partitions' stream (natsbus.TrimmedForAll). Within
// TrimEvery (StreamOptions) of acknowledging a partition's events, a replica purges the
// stream up to what every consumer of the stream has acknowledged, one
// purge for all the events acknowledged since the last, where interest
// retention removed each event with a write of its own. While events it
// acknowledged stay above that floor (another partition holds an older
// event, or the server had not counted an acknowledgement yet), it looks
// again, less and less often, up to every trimIdle; the next purge waits
// at least trimCostFactor times as long as the last took. A stream made by
// an earlier reactord, with interest retention, is not trimmed: the server
// removes its events.

// partTrim is trimLoop's own state.
type partTrim struct {
	floor    uint64 // the floor the last Trim read
	backoff  time.Duration
	next     time.Time // no look at an unmoved floor before
	relookAt time.Time
	failures int
}

// noteAcked records that this replica acknowledged the events of a
// partition up to stream sequence seq.
func (p *Partitioned) noteAcked(seq uint64) {
	for {
		top := p.ackedTop.Load()
		if seq <= top || p.ackedTop.CompareAndSwap(top, seq) {
			break
		}
	}
	p.ackedNew.Store(true)
	select {
	case p.trimKick <- struct{}{}:
	default:
	}
}

// lookUpTrimmer sets the stream's Trimmer, nil when the stream is not
// trimmed; a look-up that fails is tried again every trimIdle.
func (p *Partitioned) lookUpTrimmer(ctx context.Context) {
	if tr, ok := findTrimmer(ctx, p.c, p.o.StreamOptions, &p.relook, p.log); ok {
		p.trimmer.Store(tr)
	}
}

// trimLoop trims the stream after this replica's acknowledgements until
// Release (which trims once more, after its last acknowledgements). It
// sleeps until an acknowledgement, a retry (the floor has not passed what
// was acknowledged yet) or trimIdle (a look-up to try again); two rounds
// are at least the wait trimRound returns apart.
func (p *Partitioned) trimLoop() {
	defer close(p.trimDone)
	t := time.NewTimer(p.o.TrimEvery)
	defer t.Stop()
	var st partTrim
	var earliest time.Time // no round before
	for {
		select {
		case <-p.quit:
			return
		case <-p.trimKick:
			if d := time.Until(earliest); d > 0 {
				t.Reset(d) // the round comes when the spacing allows
				continue
			}
		case <-t.C:
		}
		wait := p.trimRound(&st)
		earliest = time.Now().Add(wait)
		next := trimIdle
		if !st.next.IsZero() {
			next = max(wait, time.Until(st.next))
		}
		t.Reset(next)
	}
}

// trimRound is one round of trimLoop; it returns the wait before the next.
func (p *Partitioned) trimRound(st *partTrim) time.Duration {
	if !p.c.NATS().IsConnected() {
		return p.o.TrimEvery
	}
	if p.relook.Load() && time.Now().After(st.relookAt) {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		p.lookUpTrimmer(ctx)
		cancel()
		st.relookAt = time.Now().Add(trimIdle)
	}
	tr := p.trimmer.Load()
	if tr == nil {
		return p.o.TrimEvery
	}
	fresh := p.ackedNew.Swap(false)
	now := time.Now()
	if !fresh && (st.floor >= p.ackedTop.Load() || now.Before(st.next)) {
		return p.o.TrimEvery // nothing new acknowledged; waiting for the floor
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	purged, floor, err := tr.Trim(ctx)
	took := time.Since(now)
	if err != nil {
		if errors.Is(err, natsbus.ErrNotTrimmed) {
			p.trimmer.CompareAndSwap(tr, nil)
			p.log.Warn("the JetStream stream was replaced by one that is not trimmed", "stream", p.o.Stream,
				"detail", "acknowledged events are no longer purged by this replica")
			return p.o.TrimEvery
		}
		st.failures++
		if st.failures == 1 || st.failures%100 == 0 {
			p.log.Warn("trimming the JetStream stream to what all its consumers acknowledged failed",
				"detail", "acknowledged events stay in it until a trim succeeds",
				"stream", p.o.Stream, "failures", st.failures, "err", err)
		}
		if fresh {
			p.ackedNew.Store(true) // the next round tries again
		}
		st.next = now.Add(trimIdle)
		return trimIdle
	}
	if st.failures > 0 {
		p.log.Info("trimming the JetStream stream works again", "stream", p.o.Stream, "failures", st.failures)
		st.failures = 0
	}
	p.trimmed.Add(int64(purged))
	st.floor = floor
	if floor < p.ackedTop.Load() {
		st.backoff = min(max(2*st.backoff, p.o.TrimEvery), trimIdle)
		st.next = now.Add(st.backoff)
	} else {
		st.backoff, st.next = 0, time.Time{}
	}
	return max(p.o.TrimEvery, trimCostFactor*took)
}

// trimLast trims once more after Release's last acknowledgements.
func (p *Partitioned) trimLast(ctx context.Context) {
	select {
	case <-p.trimDone:
	case <-ctx.Done():
		return
	}
	if tr := p.trimmer.Load(); tr != nil && p.ackedTop.Load() > 0 {
		if purged, _, err := tr.Trim(ctx); err == nil {
			p.trimmed.Add(int64(purged))
		}
	}
}

// Trimmed returns how many acknowledged events this replica's purges
// dropped from the partitions' stream (natsbus.TrimmedForAll).
func (p *Partitioned) Trimmed() int64 { return p.trimmed.Load() }
