package consume

import (
	"context"
	"errors"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// Trimming a stream marked trimmed (natsbus.Trimmed): within trimEvery
// of this Consumer acknowledging an event, it purges the stream up to the
// shared consumer's acknowledgement floor. While the floor stays below
// what it acknowledged (an event before is still held, here or in another
// replica) and it acknowledges nothing new, it looks again less and less
// often, up to every trimIdle.
const (
	// trimEvery bounds how long an event this Consumer acknowledged
	// stays in the stream once the floor passed it: what a power loss, or
	// a SIGKILL of the process that runs the embedded server, can deliver
	// again beyond the events in flight (the server writes the consumer's
	// own state at most every 100 ms).
	trimEvery = 20 * time.Millisecond
	// trimIdle is the longest wait between looks at a floor that does
	// not move.
	trimIdle = time.Second
)

// noteAcked records that the event at stream sequence seq was
// acknowledged, for trim.
func (k *Consumer) noteAcked(seq uint64) {
	for {
		old := k.ackedSeq.Load()
		if seq <= old || k.ackedSeq.CompareAndSwap(old, seq) {
			return
		}
	}
}

// trimState is trim's own: the stream's Trimmer (nil when it is not
// trimmed), and when to look at a floor that did not move again.
type trimState struct {
	tr       *natsbus.Trimmer
	seen     int64  // k.recreated when tr was looked up (-1: not yet)
	tried    uint64 // k.ackedSeq at the last Trim
	backoff  time.Duration
	next     time.Time // no Trim before, unless something new was acknowledged
	failures int
}

// trim purges the events every replica acknowledged from a stream marked
// trimmed (natsbus.Trimmer), after this Consumer's acknowledgements (see
// trimEvery), and once more when the Consumer closes. On another stream
// it does nothing after its first look, and looks again after the stream
// was recreated.
func (k *Consumer) trim() {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	st := trimState{seen: -1}
	for {
		select {
		case <-k.end:
			k.trimOnce(&st)
			return
		case <-t.C:
		}
		k.trimOnce(&st)
	}
}

// trimOnce is one round of trim.
func (k *Consumer) trimOnce(st *trimState) {
	if !k.c.NATS().IsConnected() {
		return
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r := k.recreated.Load(); r != st.seen {
		if now.Before(st.next) {
			return
		}
		tr, err := k.c.NewTrimmer(ctx, k.o)
		if err != nil && !errors.Is(err, natsbus.ErrNotTrimmed) {
			st.next = now.Add(trimIdle) // looked up again then
			return
		}
		st.tr, st.seen, st.tried, st.next = tr, r, 0, time.Time{}
	}
	acked := k.ackedSeq.Load()
	if st.tr == nil || acked <= st.tr.Done() || (now.Before(st.next) && (acked == st.tried || st.failures > 0)) {
		return // nothing acknowledged here since the last purge, waiting for the floor, or after a failure
	}
	st.tried = acked
	moved, err := st.tr.Trim(ctx)
	if err != nil {
		st.failures++
		if st.failures == 1 || st.failures%100 == 0 {
			k.log.Warn("trimming the JetStream stream to its acknowledgement floor failed; acknowledged events stay in it until a trim succeeds",
				"stream", k.o.Stream, "failures", st.failures, "err", err)
		}
		st.next = now.Add(trimIdle)
		return
	}
	if st.failures > 0 {
		k.log.Info("trimming the JetStream stream to its acknowledgement floor works again", "stream", k.o.Stream, "failures", st.failures)
		st.failures = 0
	}
	if moved == 0 {
		// An event before is still held: look again later, or at once
		// when something new is acknowledged here.
		st.backoff = min(max(2*st.backoff, trimEvery), trimIdle)
		st.next = now.Add(st.backoff)
		return
	}
	k.trimmed.Add(int64(moved))
	st.backoff, st.next = 0, time.Time{}
}

// Trimmed returns how far this Consumer's purges moved the start of a
// trimmed stream: the acknowledged events it dropped (natsbus.Trimmer).
func (k *Consumer) Trimmed() int64 { return k.trimmed.Load() }
