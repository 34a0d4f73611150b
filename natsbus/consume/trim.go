package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// Trimming a stream marked trimmed (natsbus.Trimmed). Within TrimEvery
// (StreamOptions; 20 ms by default: what a power loss, or a SIGKILL of the
// process that runs the embedded server, can deliver again beyond the
// events in flight) of
// this Consumer acknowledging an event, it purges the stream up to the
// shared consumer's acknowledgement floor (natsbus.Trimmer). While events
// it acknowledged stay above the floor (an event before them is still
// held, here or in another replica, or the server had not counted the
// acknowledgement yet), it looks again, less and less often, up to every
// trimIdle. A purge rewrites the stream's index, whose size grows with
// the distinct subjects the stream holds: the next one waits at least
// trimCostFactor times as long as the last took, so that purging a large
// backlog takes at most a fifth of the time.
const (
	// trimIdle is the longest wait between looks at a floor that does
	// not move.
	trimIdle = time.Second
	// trimCostFactor: the wait after a purge is at least this many times
	// the purge's own time.
	trimCostFactor = 4
	// maxAckedKept bounds the acknowledged events a Consumer remembers
	// above the floor (see ackedAbove).
	maxAckedKept = 1 << 18
)

// noteAcked records that this Consumer handled, and is acknowledging, the
// event stored at stream sequence seq at time ts (nanoseconds), while its stream is
// trimmed: until the floor passes it, a redelivery of that very message (a
// consumer recreated over the stream delivers from its start) is
// acknowledged again and not handed to the handler.
func (k *Consumer) noteAcked(seq uint64, ts int64) {
	if seq == 0 || k.trimmer.Load() == nil {
		return
	}
	k.ackedMu.Lock()
	full := len(k.ackedAbove) >= maxAckedKept
	if !full {
		k.ackedAbove[seq] = ts
	}
	k.ackedMu.Unlock()
	k.ackedNew.Store(true)
	select {
	case k.trimKick <- struct{}{}:
	default:
	}
	if full && k.warnedFull.CompareAndSwap(false, true) {
		k.log.Warn("more events acknowledged above a held one than this replica remembers",
			"detail", "if the consumer is recreated before the held one is acknowledged, the rest are delivered and react again",
			"stream", k.o.Stream, "remembered", maxAckedKept)
	}
}

// ackedHere reports whether this Consumer acknowledged the message stored
// at seq at time ts (see noteAcked).
func (k *Consumer) ackedHere(seq uint64, ts int64) bool {
	k.ackedMu.Lock()
	defer k.ackedMu.Unlock()
	at, ok := k.ackedAbove[seq]
	return ok && at == ts
}

// forgetAcked forgets the acknowledged events at or below floor (the
// stream no longer has them) when the floor rose past was, or all of them,
// and returns how many it still remembers.
func (k *Consumer) forgetAcked(was, floor uint64, all bool) (left int) {
	k.ackedMu.Lock()
	defer k.ackedMu.Unlock()
	switch {
	case all:
		clear(k.ackedAbove)
	case floor > was:
		for seq := range k.ackedAbove {
			if seq <= floor {
				delete(k.ackedAbove, seq)
			}
		}
	}
	return len(k.ackedAbove)
}

// lookUpTrimmer (at each start) sets the stream's Trimmer, or nil when it
// is not trimmed. The events remembered as acknowledged stay when the
// stream is the one they came from (only the consumer was recreated:
// they are what it delivers again); a stream made anew has none of them.
// A look-up that fails keeps what was there, and trim tries again every
// trimIdle.
func (k *Consumer) lookUpTrimmer(ctx context.Context) {
	tr, ok := findTrimmer(ctx, k.c, k.o, &k.relook, k.log)
	if !ok {
		return
	}
	if old := k.trimmer.Swap(tr); tr == nil || old == nil || !old.Created().Equal(tr.Created()) {
		k.forgetAcked(0, 0, true)
	}
}

// trimState is trim's own.
type trimState struct {
	tr       *natsbus.Trimmer
	floor    uint64 // the floor the last Trim read
	left     int    // acknowledged events above it
	backoff  time.Duration
	next     time.Time // no look at an unmoved floor before
	relookAt time.Time // no look-up of the Trimmer again before
	failures int
}

// trim purges the events every replica acknowledged from a stream marked
// trimmed, after this Consumer's acknowledgements (see TrimEvery), once
// when it starts on a stream (what a predecessor acknowledged but did not
// purge), and once more when the Consumer closes. Between rounds it
// sleeps until an acknowledgement, a look again at a floor that had not
// passed what was acknowledged, or trimIdle; two rounds are at least the
// wait trimOnce returns apart.
func (k *Consumer) trim() {
	t := time.NewTimer(k.o.TrimEvery)
	defer t.Stop()
	var st trimState
	var earliest time.Time // no round before
	for {
		select {
		case <-k.end:
			k.trimOnce(&st, true)
			return
		case <-k.trimKick:
			if d := time.Until(earliest); d > 0 {
				t.Reset(d) // the round comes when the spacing allows
				continue
			}
		case <-t.C:
		}
		wait := k.trimOnce(&st, false)
		earliest = time.Now().Add(wait)
		next := trimIdle
		if st.left > 0 || k.ackedNew.Load() {
			next = max(wait, time.Until(st.next))
		}
		t.Reset(next)
	}
}

// trimOnce is one round of trim; it returns the wait before the next.
func (k *Consumer) trimOnce(st *trimState, final bool) time.Duration {
	if !k.c.NATS().IsConnected() {
		return k.o.TrimEvery
	}
	if k.relook.Load() && time.Now().After(st.relookAt) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k.lookUpTrimmer(ctx)
		cancel()
		st.relookAt = time.Now().Add(trimIdle)
	}
	tr := k.trimmer.Load()
	if tr == nil {
		return k.o.TrimEvery
	}
	fresh := k.ackedNew.Swap(false)
	if tr != st.tr { // a start: what a predecessor left
		st.tr, st.floor, st.left, st.backoff, st.next, fresh = tr, 0, 0, 0, time.Time{}, true
	}
	now := time.Now()
	if !fresh && !final && (st.left == 0 || now.Before(st.next)) {
		return k.o.TrimEvery // nothing new acknowledged; waiting for the floor
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	created := tr.Created()
	purged, floor, err := tr.Trim(ctx)
	took := time.Since(now)
	defer k.trims.Add(1)
	if err != nil {
		if errors.Is(err, natsbus.ErrNotTrimmed) {
			if !k.trimmer.CompareAndSwap(tr, nil) {
				return k.o.TrimEvery // a start replaced it meanwhile
			}
			k.forgetAcked(0, 0, true)
			k.log.Warn("the JetStream stream was replaced by one that is not trimmed", "stream", k.o.Stream,
				"detail", "acknowledged events are no longer purged by this replica")
			return k.o.TrimEvery
		}
		st.failures++
		if st.failures == 1 || st.failures%100 == 0 {
			k.log.Warn("trimming the JetStream stream to its acknowledgement floor failed",
				"detail", "acknowledged events stay in it until a trim succeeds",
				"stream", k.o.Stream, "failures", st.failures, "err", err)
		}
		st.next = now.Add(trimIdle)
		if fresh {
			k.ackedNew.Store(true) // the next round tries again
		}
		return trimIdle
	}
	if st.failures > 0 {
		k.log.Info("trimming the JetStream stream to its acknowledgement floor works again", "stream", k.o.Stream, "failures", st.failures)
		st.failures = 0
	}
	k.trimmed.Add(int64(purged))
	renewed := !tr.Created().Equal(created) // a stream made anew: none of its events was acknowledged here
	st.left = k.forgetAcked(st.floor, floor, renewed)
	st.floor = floor
	if st.left > 0 {
		// Acknowledged here but above the floor: look again later, or
		// at the next acknowledgement.
		st.backoff = min(max(2*st.backoff, k.o.TrimEvery), trimIdle)
		st.next = now.Add(st.backoff)
	} else {
		st.backoff, st.next = 0, time.Time{}
	}
	return max(k.o.TrimEvery, trimCostFactor*took)
}

// Trimmed returns how many acknowledged events this Consumer's purges
// dropped from a trimmed stream (natsbus.Trimmer).
func (k *Consumer) Trimmed() int64 { return k.trimmed.Load() }

// PassedOver returns how many redeliveries of events this Consumer had
// acknowledged (a consumer recreated over a trimmed stream delivers from
// the stream's start) it acknowledged again without handing them on.
func (k *Consumer) PassedOver() int64 { return k.passedOver.Load() }

// findTrimmer looks up the stream's Trimmer (nil when the stream is not
// trimmed) for a consumer or a set of partitions; ok is false when the
// look-up failed, which relook records (and the first failure logs) for a
// try again, and whose end it logs.
func findTrimmer(ctx context.Context, c *natsbus.Conn, o natsbus.StreamOptions, relook *atomic.Bool, log *slog.Logger) (tr *natsbus.Trimmer, ok bool) {
	tr, err := c.NewTrimmer(ctx, o)
	switch {
	case errors.Is(err, natsbus.ErrNotTrimmed):
		tr = nil
	case err != nil:
		if !relook.Swap(true) {
			log.Warn("looking up whether the JetStream stream is trimmed failed", "stream", o.Stream, "err", err,
				"detail", "tried again every second")
		}
		return nil, false
	}
	if relook.Swap(false) {
		log.Info("looked up whether the JetStream stream is trimmed", "stream", o.Stream, "trimmed", tr != nil)
	}
	return tr, true
}
