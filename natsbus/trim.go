package natsbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An event stream that reactord creates for one shared consumer keeps
// events under limits retention and is trimmed, by the consumers
// themselves, up to the shared consumer's acknowledgement floor (see
// Trimmer). Its metadata says so, under TrimmedKey; a stream without it
// (one created by an operator, or by reactord before it trimmed) is never
// purged.
//
// Why not a work queue: with sync_interval always, nats-server (2.15)
// removes each acknowledged message of a work queue with its own record,
// flushed to disk under the lock that publishing takes too, and so pays a
// flush per event or per few events; a purge to the floor writes the
// records of every event below it and flushes once.
//
// The stream of partition consumers (StreamOptions.Partitions) is trimmed
// too, to the lowest floor of all its consumers (TrimmedAll): each
// consumer reads its partition's subjects only, so no one consumer's
// floor says what every consumer has acknowledged.
const (
	// TrimmedKey is the stream metadata key that marks a stream Trimmer
	// purges; its value is the shared consumer's name, or TrimmedAll.
	TrimmedKey = "reactord.trimmed-to-ack-floor-of"
	// TrimmedAll is TrimmedKey's value on a stream trimmed to what every
	// one of its consumers has acknowledged (the partitions' stream).
	TrimmedAll = "*"
)

// Trimmed reports whether cfg is a stream reactord trims to the
// acknowledgement floor of the consumer durable.
func Trimmed(cfg jetstream.StreamConfig, durable string) bool {
	return cfg.Retention == jetstream.LimitsPolicy && cfg.Metadata[TrimmedKey] == durable
}

// TrimmedForAll reports whether cfg is a stream reactord trims to the
// lowest acknowledgement floor of all its consumers (the partitions').
func TrimmedForAll(cfg jetstream.StreamConfig) bool { return Trimmed(cfg, TrimmedAll) }

// Trimmer purges an event stream up to its shared consumer's
// acknowledgement floor: what every replica has acknowledged leaves the
// stream, as it would leave a work queue, one purge (and one flush) for
// all the events acknowledged since the last. One goroutine uses a
// Trimmer; others may read Created.
type Trimmer struct {
	c       *Conn
	s       jetstream.Stream
	name    string
	durable string       // the consumer whose floor it trims to; TrimmedAll: every consumer's
	created atomic.Int64 // the stream's creation (Unix ns), to tell a stream made anew; read by others
	done    uint64       // the floor purged up to, as far as this Trimmer knows
	// lasts are the stream's last sequences trimAll read, with when: an
	// idle consumer holds nothing up to a last read settleAge ago.
	lasts []seenLast
	now   func() time.Time // time.Now; a test's clock
}

// seenLast is the stream's last sequence at a time.
type seenLast struct {
	at   time.Time
	last uint64
}

// settleAge is how old a read of the stream's last sequence must be
// before an idle consumer is taken to hold nothing up to it. The server
// counts a stored event among a consumer's pending ones a moment after it
// acknowledged the publish (a signal of its own goroutine, later still on
// a follower of a replicated stream): a consumer read in that moment
// looks idle with the event not delivered.
const settleAge = time.Second

// settled records the stream's last sequence read now and returns the
// newest one read at least settleAge ago (0: none yet).
func (t *Trimmer) settled(now time.Time, last uint64) uint64 {
	t.lasts = append(t.lasts, seenLast{now, last})
	var out uint64
	keep := 0
	for i, l := range t.lasts {
		if now.Sub(l.at) >= settleAge {
			out, keep = l.last, i
		}
	}
	t.lasts = t.lasts[keep:]
	return out
}

// ErrNotTrimmed is returned by NewTrimmer for a stream that is not marked
// trimmed (a work queue, an interest stream, an operator's own stream),
// and by Trim when the stream was replaced by one that is not.
var ErrNotTrimmed = errors.New("the stream is not one reactord trims to its acknowledgement floor")

// NewTrimmer looks the stream o.Stream up and returns its Trimmer, or
// ErrNotTrimmed when the stream is marked trimmed neither for o.Durable
// nor for all its consumers (TrimmedForAll).
func (c *Conn) NewTrimmer(ctx context.Context, o StreamOptions) (*Trimmer, error) {
	o.Defaults()
	s, err := c.js.Stream(ctx, o.Stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	info := s.CachedInfo()
	durable := o.Durable
	switch {
	case TrimmedForAll(info.Config):
		durable = TrimmedAll
	case !Trimmed(info.Config, o.Durable):
		return nil, ErrNotTrimmed
	}
	t := &Trimmer{c: c, s: s, name: o.Stream, durable: durable}
	t.created.Store(info.Created.UnixNano())
	return t, nil
}

// Done is the floor this Trimmer last purged up to.
func (t *Trimmer) Done() uint64 { return t.done }

// Created is when the stream was created, as the Trimmer last saw it: a
// Trim that finds the stream made anew changes it. It may be called while
// a Trim runs.
func (t *Trimmer) Created() time.Time { return time.Unix(0, t.created.Load()) }

// Trim purges the events up to the shared consumer's acknowledgement
// floor when the floor moved past what this Trimmer purged before, and
// returns how many events the stream dropped (none when another replica
// purged them first) and the floor. The floor only rises on one stream:
// a purge to a floor another replica has already passed is harmless.
// When it went back, the stream or the consumer was made anew: the
// Trimmer looks at the stream again, and returns ErrNotTrimmed if it is
// no longer marked trimmed.
//
// Between reading the floor and the purge the stream could, in theory,
// be deleted and made anew by someone else; the purge would then apply
// to the new one. A stream is recreated a second after it is found
// missing (natsbus/consume), and the two requests are a round trip
// apart.
func (t *Trimmer) Trim(ctx context.Context) (purged, floor uint64, err error) {
	if t.durable == TrimmedAll {
		return t.trimAll(ctx)
	}
	cons, err := t.s.Consumer(ctx, t.durable)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the acknowledgement floor of consumer %s: %w", t.durable, err)
	}
	floor = cons.CachedInfo().AckFloor.Stream
	if floor < t.done {
		info, err := t.s.Info(ctx)
		if err != nil {
			return 0, floor, fmt.Errorf("looking up stream %s again (its consumer's floor went back): %w", t.name, err)
		}
		if !Trimmed(info.Config, t.durable) {
			return 0, floor, ErrNotTrimmed
		}
		t.created.Store(info.Created.UnixNano())
		t.done = 0
	}
	if floor <= t.done {
		return 0, floor, nil
	}
	purged, err = t.c.purgeBelow(ctx, t.name, "", floor+1)
	if err != nil {
		return 0, floor, fmt.Errorf("purging stream %s below %d (the acknowledgement floor of %s): %w", t.name, floor+1, t.durable, err)
	}
	t.done = floor
	return purged, floor, nil
}

// trimAll is Trim on a stream trimmed to what all its consumers
// acknowledged (TrimmedForAll). A consumer with events still to deliver
// or to be acknowledged holds the stream at its acknowledgement floor;
// one with none holds nothing the stream had when it was looked at (its
// last sequence then): every event of its subjects up to there was
// acknowledged, and those of other subjects are held by their own
// consumers. With no consumer at all it purges nothing. The floor so
// read may go back (a consumer whose next event arrived is held at its
// acknowledgement floor again, below the stream's last sequence): the
// stream's creation time, not the floor, tells a stream made anew.
func (t *Trimmer) trimAll(ctx context.Context) (purged, floor uint64, err error) {
	info, err := t.s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("looking up stream %s: %w", t.name, err)
	}
	if !TrimmedForAll(info.Config) {
		return 0, 0, ErrNotTrimmed
	}
	if created := info.Created.UnixNano(); created != t.created.Load() {
		t.created.Store(created)
		t.done = 0
	}
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	settled := t.settled(now(), info.State.LastSeq)
	floor = info.State.LastSeq
	all, err := allConsumers(ctx, t.s, t.name, info.State.Consumers)
	if err != nil {
		return 0, 0, err
	}
	for _, ci := range all {
		floor = min(floor, holds(ci, info.State.LastSeq, settled))
	}
	if len(all) == 0 || floor <= t.done {
		return 0, floor, nil
	}
	purged, err = t.c.purgeBelow(ctx, t.name, "", floor+1)
	if err != nil {
		return 0, floor, fmt.Errorf("purging stream %s below %d (what all its consumers acknowledged): %w", t.name, floor+1, err)
	}
	t.done = floor
	return purged, floor, nil
}

// allConsumers reads the state of every consumer of stream, which has n
// (its info's count), or fails: a NATS cluster lists a consumer whose
// leader did not answer in time as missing, or one whose peers are all
// offline with no state (no leader), and a trim that read neither would
// purge what that consumer has not acknowledged.
func allConsumers(ctx context.Context, s jetstream.Stream, stream string, n int) ([]*jetstream.ConsumerInfo, error) {
	var all []*jetstream.ConsumerInfo
	seen := map[string]bool{}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		name := cmp.Or(ci.Name, ci.Config.Durable, ci.Config.Name) // an offline one's is in its configuration alone
		if seen[name] {
			continue // listed again on a later page
		}
		seen[name] = true
		if ci.Cluster != nil && ci.Cluster.Leader == "" {
			return nil, fmt.Errorf("reading the acknowledgement floors of stream %s's consumers: %s has no leader (its state is not known)", stream, name)
		}
		all = append(all, ci)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("reading the acknowledgement floors of stream %s's consumers: %w", stream, err)
	}
	if len(all) < n {
		return nil, fmt.Errorf("reading the acknowledgement floors of stream %s's consumers: %d of its %d answered", stream, len(all), n)
	}
	return all, nil
}

// holds returns the stream sequence up to which consumer ci has
// acknowledged every event of its subjects, on a stream whose last
// sequence was last before ci was read: its acknowledgement floor while
// events wait to be delivered or acknowledged. An idle consumer holds
// nothing up to the last event it was delivered, nor up to settled (the
// stream's last sequence read settleAge before: an event stored since may
// not be counted among its pending ones yet).
func holds(ci *jetstream.ConsumerInfo, last, settled uint64) uint64 {
	if ci.NumPending > 0 || ci.NumAckPending > 0 {
		return min(ci.AckFloor.Stream, last)
	}
	return min(max(ci.AckFloor.Stream, ci.Delivered.Stream, settled), last)
}

// PurgeAcknowledged purges from stream, when it is trimmed for all its
// consumers (TrimmedForAll), the events of consumer's subjects that it
// acknowledged and that no other consumer reading any of those subjects
// still needs: what interest retention would have removed already. It is
// called before consumer is deleted, since a consumer made later for the
// same subjects, from an earlier sequence, would deliver those events
// again. It returns how many events it purged; on another stream, or
// when consumer is gone, it does nothing.
func (c *Conn) PurgeAcknowledged(ctx context.Context, stream, consumer string) (uint64, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	info := s.CachedInfo()
	if !TrimmedForAll(info.Config) {
		return 0, nil
	}
	last := info.State.LastSeq
	var self *jetstream.ConsumerInfo
	var others []*jetstream.ConsumerInfo
	all, err := allConsumers(ctx, s, stream, info.State.Consumers)
	if err != nil {
		return 0, err
	}
	for _, ci := range all {
		if ci.Name == consumer {
			self = ci
		} else {
			others = append(others, ci)
		}
	}
	if self == nil {
		return 0, nil
	}
	filters := consumerFilters(self.Config)
	// Read once, with no earlier read to lean on: an idle consumer holds
	// nothing up to the last event it was delivered, no further.
	floor := holds(self, last, 0)
	for _, o := range others {
		if filtersOverlap(filters, consumerFilters(o.Config)) {
			floor = min(floor, holds(o, last, 0))
		}
	}
	if floor == 0 {
		return 0, nil
	}
	var purged uint64
	for _, f := range filters {
		n, err := c.purgeBelow(ctx, stream, f, floor+1)
		if err != nil {
			return purged, fmt.Errorf("purging the events of %s that consumer %s acknowledged (below %d): %w", f, consumer, floor+1, err)
		}
		purged += n
	}
	return purged, nil
}

// consumerFilters lists a consumer's subject filters, ">" for one that
// reads the whole stream.
func consumerFilters(cfg jetstream.ConsumerConfig) []string {
	switch {
	case len(cfg.FilterSubjects) > 0:
		return cfg.FilterSubjects
	case cfg.FilterSubject != "":
		return []string{cfg.FilterSubject}
	}
	return []string{">"}
}

// filtersOverlap reports whether some subject matches a filter of a and
// one of b.
func filtersOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if subjectsOverlap(x, y) {
				return true
			}
		}
	}
	return false
}

// subjectsOverlap reports whether some subject matches both filters a
// and b ("*" one token, ">" one or more at the end).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == ">" || bt[i] == ">" {
			return true // the other has a token here, and any tokens after
		}
		if at[i] != bt[i] && at[i] != "*" && bt[i] != "*" {
			return false
		}
	}
	return len(at) == len(bt)
}

// Every trims every d until ctx ends, for a consumer that acknowledges
// without trimming on its own (the benchmarks'; the daemon's consumer
// trims after its acknowledgements, natsbus/consume). It hands each
// failed Trim to onErr, and stops when onErr returns false; a failure
// because ctx ended is not handed over.
func (t *Trimmer) Every(ctx context.Context, d time.Duration, onErr func(error) bool) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, _, err := t.Trim(ctx); err != nil && ctx.Err() == nil && !onErr(err) {
			return
		}
	}
}

// purgeBelow purges the events of stream name below sequence seq (those
// of the subjects filter matches, when it is not empty), and
// returns how many there were. (The client's Stream.Purge does not give
// the server's count.)
func (c *Conn) purgeBelow(ctx context.Context, name, filter string, seq uint64) (uint64, error) {
	req, _ := json.Marshal(struct {
		Filter string `json:"filter,omitempty"`
		Seq    uint64 `json:"seq"`
	}{filter, seq})
	msg, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+name, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Success bool                `json:"success"`
		Purged  uint64              `json:"purged"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("the server's answer %q: %w", msg.Data, err)
	}
	if resp.Error != nil {
		return 0, resp.Error
	}
	if !resp.Success {
		return 0, fmt.Errorf("the server did not purge: %s", msg.Data)
	}
	return resp.Purged, nil
}
