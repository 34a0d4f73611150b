package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// all the events acknowledged since the last. One goroutine uses a
// Trimmer; others may read Created.
type Trimmer struct {
	c       *Conn
	s       jetstream.Stream
	name    string
	durable string
	created atomic.Int64 // the stream's creation (Unix ns), to tell a stream made anew; read by others
	done    uint64       // the floor purged up to, as far as this Trimmer knows
}

// ErrNotTrimmed is returned by NewTrimmer for a stream that is not marked
// trimmed (a work queue, an interest stream, an operator's own stream),
// and by Trim when the stream was replaced by one that is not.
var ErrNotTrimmed = errors.New("the stream is not one reactord trims to its acknowledgement floor")

// NewTrimmer looks the stream o.Stream up and returns its Trimmer, or
// ErrNotTrimmed when the stream is not marked trimmed for o.Durable.
func (c *Conn) NewTrimmer(ctx context.Context, o StreamOptions) (*Trimmer, error) {
	o.Defaults()
	s, err := c.js.Stream(ctx, o.Stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	info := s.CachedInfo()
	if !Trimmed(info.Config, o.Durable) {
		return nil, ErrNotTrimmed
	}
	t := &Trimmer{c: c, s: s, name: o.Stream, durable: o.Durable}
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
	purged, err = t.c.purgeBelow(ctx, t.name, floor+1)
	if err != nil {
		return 0, floor, fmt.Errorf("purging stream %s below %d (the acknowledgement floor of %s): %w", t.name, floor+1, t.durable, err)
	}
	t.done = floor
	return purged, floor, nil
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

// purgeBelow purges the events of stream name below sequence seq, and
// returns how many there were. (The client's Stream.Purge does not give
// the server's count.)
func (c *Conn) purgeBelow(ctx context.Context, name string, seq uint64) (uint64, error) {
	req, _ := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
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
