package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/natsbus"
)

// CopiesOptions configure Copies.
type CopiesOptions struct {
	// Bucket is the JetStream key-value bucket (default REACTORD_COPIES).
	Bucket string
	// Window is how far apart two copies' stamps may be (the masters'
	// clock skew and the network's delay); a stamp further away is a
	// genuine repeat of the event.
	Window time.Duration
	// TTL is how long a claim is kept after its last update (default 1h):
	// a copy taken later than that after the first one (a bridge that
	// held it that long) is taken again.
	TTL time.Duration
	// Replicas of the bucket (default 1), as the event stream's.
	Replicas int
	// WaitLog, when set, receives a line when the bucket cannot be
	// created yet (OpenCopies retries until its context ends) and one
	// when it was; nil: none.
	WaitLog *slog.Logger
}

// Copies recognises the copies of one event that the masters of a
// multi-master pair each fire, across every replica of the daemon: the
// first copy a replica takes claims the event's key in a shared key-value
// bucket, and a copy whose stamp is within Window of a claimed one is
// another master's copy.
type Copies struct {
	kv     jetstream.KeyValue
	window time.Duration
}

// copyClaim is one claimed emission of an event: its master's stamp and
// the stream sequence of the copy that claimed it.
type copyClaim struct {
	Stamp time.Time `json:"stamp"`
	Seq   uint64    `json:"seq"`
}

// maxClaims bounds the emissions one key remembers.
const maxClaims = 16

// Copies creates (or updates) the claims bucket.
func OpenCopies(ctx context.Context, c *natsbus.Conn, o CopiesOptions) (*Copies, error) {
	if o.Bucket == "" {
		o.Bucket = "REACTORD_COPIES"
	}
	if o.TTL <= 0 {
		o.TTL = time.Hour
	}
	cfg := jetstream.KeyValueConfig{Bucket: o.Bucket, TTL: o.TTL, History: 1,
		Storage: jetstream.FileStorage, Replicas: max(o.Replicas, 1),
		Description: "reactord --dedupe-masters: the emissions of each event taken, by a key that leaves out the master's _stamp"}
	var kv jetstream.KeyValue
	err := natsbus.Ensure(ctx, o.WaitLog, "key-value bucket "+o.Bucket, func(ctx context.Context) (err error) {
		kv, err = c.JetStream().CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating key-value bucket %s: %w", o.Bucket, err)
	}
	return &Copies{kv: kv, window: o.Window}, nil
}

// Claim reports whether the event with key, stamped at stamp, carried by
// the stream message seq, is a copy of an emission already claimed by
// another message (dup true: drop it); otherwise it claims the emission.
// The message that claimed an emission is never its own copy, so a
// redelivery of it after a crash goes on.
func (k *Copies) Claim(ctx context.Context, key string, stamp time.Time, seq uint64) (dup bool, err error) {
	mine := copyClaim{Stamp: stamp, Seq: seq}
	for range 8 {
		v, _ := json.Marshal([]copyClaim{mine})
		if _, err := k.kv.Create(ctx, key, v); err == nil {
			return false, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return false, fmt.Errorf("claiming an event: %w", err)
		}
		e, err := k.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // expired meanwhile
		}
		if err != nil {
			return false, fmt.Errorf("claiming an event: %w", err)
		}
		var claims []copyClaim
		_ = json.Unmarshal(e.Value(), &claims)
		for _, c := range claims {
			if c.Seq == seq {
				return false, nil
			}
			if d := c.Stamp.Sub(stamp); d <= k.window && d >= -k.window {
				return true, nil
			}
		}
		claims = append(claims, mine)
		if len(claims) > maxClaims {
			claims = claims[len(claims)-maxClaims:]
		}
		v, _ = json.Marshal(claims)
		if _, err := k.kv.Update(ctx, key, v, e.Revision()); err == nil {
			return false, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return false, fmt.Errorf("claiming an event: %w", err)
		}
		// Another replica updated the key meanwhile: look again.
	}
	return false, errors.New("claiming an event: the key keeps changing")
}

// isWrongSequence tells a lost compare-and-set race of Update.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
