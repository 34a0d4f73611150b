package natsbus

import (
	"context"
	"errors"
	"fmt"

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
const (
	// TrimmedKey is the stream metadata key that marks a stream Trimmer
	// purges; its value is the shared consumer's name.
	TrimmedKey = "reactord.trimmed-to-ack-floor-of"
)

// Trimmed reports whether cfg is a stream reactord trims to the
// acknowledgement floor of the consumer durable.
func Trimmed(cfg jetstream.StreamConfig, durable string) bool {
	return cfg.Retention == jetstream.LimitsPolicy && cfg.Metadata[TrimmedKey] == durable
}

// Trimmer purges an event stream up to its shared consumer's
// acknowledgement floor: what every replica has acknowledged leaves the
// stream, as it would leave a work queue, one purge (and one flush) for
// all the events acknowledged since the last.
type Trimmer struct {
	s       jetstream.Stream
	durable string
	done    uint64 // the floor purged up to, as far as this Trimmer knows
}

// ErrNotTrimmed is returned by NewTrimmer for a stream that is not marked
// trimmed (a work queue, an interest stream, an operator's own stream).
var ErrNotTrimmed = errors.New("the stream is not one reactord trims to its acknowledgement floor")

// NewTrimmer looks the stream o.Stream up and returns its Trimmer, or
// ErrNotTrimmed when the stream is not marked trimmed for o.Durable.
func (c *Conn) NewTrimmer(ctx context.Context, o StreamOptions) (*Trimmer, error) {
	o.Defaults()
	s, err := c.js.Stream(ctx, o.Stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	if !Trimmed(s.CachedInfo().Config, o.Durable) {
		return nil, ErrNotTrimmed
	}
	return &Trimmer{s: s, durable: o.Durable}, nil
}

// Done is the floor this Trimmer last purged up to.
func (t *Trimmer) Done() uint64 { return t.done }

// Trim purges the events below the shared consumer's acknowledgement
// floor when the floor moved since the last Trim, and returns how far it
// moved (the events the stream dropped, but those another replica's Trim
// dropped first). The floor only rises, so a purge to a floor
// another replica has already passed is harmless.
func (t *Trimmer) Trim(ctx context.Context) (uint64, error) {
	cons, err := t.s.Consumer(ctx, t.durable)
	if err != nil {
		return 0, fmt.Errorf("reading the acknowledgement floor of consumer %s: %w", t.durable, err)
	}
	floor := cons.CachedInfo().AckFloor.Stream
	if floor < t.done {
		// The floor went back: the stream or the consumer was made
		// anew (by another replica, or by hand), its sequences from 1.
		t.done = 0
	}
	if floor <= t.done {
		return 0, nil
	}
	if err := t.s.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return 0, fmt.Errorf("purging stream %s below %d (the acknowledgement floor of %s): %w", t.s.CachedInfo().Config.Name, floor+1, t.durable, err)
	}
	n := floor - t.done
	t.done = floor
	return n, nil
}
