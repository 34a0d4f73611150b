package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/natsbus"
)

// DefaultRulesBucket is the bucket of the rule changes made at run time.
const DefaultRulesBucket = "REACTORD_RULES"

// rulesKey is the one key of the rules bucket: the changes are one
// document, changed by compare-and-set.
const rulesKey = "changes"

// Doc is a JetStream key-value bucket holding one document that every
// replica shares and a restarted one reads again (salt-run reactor.add
// and reactor.delete's rules, the paused masters): no time to live, a
// compare-and-set on each change.
type Doc struct {
	kv     jetstream.KeyValue
	bucket string
}

// OpenDoc creates (or opens) the bucket. ErrStateUnsupported says the
// server has no JetStream.
func OpenDoc(ctx context.Context, c *natsbus.Conn, bucket string, replicas int, waitLog *slog.Logger) (*Doc, error) {
	if bucket == "" {
		bucket = DefaultRulesBucket
	}
	js := c.JetStream()
	actx, cancel := context.WithTimeout(ctx, natsbus.EnsureAttempt)
	_, err := js.AccountInfo(actx)
	cancel()
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("key-value bucket %s: %w: %w", bucket, ErrStateUnsupported, err)
	}
	cfg := jetstream.KeyValueConfig{Bucket: bucket, History: 16, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		Description: "reactord: the rules salt-run reactor.add and reactor.delete changed, and the masters salt-run reactor.set_leader paused"}
	var kv jetstream.KeyValue
	err = natsbus.Ensure(ctx, waitLog, "key-value bucket "+bucket, func(ctx context.Context) error {
		var err error
		if kv, err = js.KeyValue(ctx, bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, bucket) // another replica was faster
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening key-value bucket %s: %w", bucket, err)
	}
	return &Doc{kv: kv, bucket: bucket}, nil
}

// Where names the bucket, for logs.
func (d *Doc) Where() string { return "NATS key-value bucket " + d.bucket }

// Get returns the document (nil when none was written).
func (d *Doc) Get(ctx context.Context) ([]byte, error) {
	e, err := d.kv.Get(ctx, rulesKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.Where(), err)
	}
	return e.Value(), nil
}

// Update changes the document with change (given the current one, nil
// when none) by compare-and-set, again when another replica changed it
// meanwhile, and returns the revision written. An error of change is
// returned as it is, nothing written.
func (d *Doc) Update(ctx context.Context, change func([]byte) ([]byte, error)) (uint64, error) {
	for attempt := 0; ; attempt++ {
		var cur []byte
		var rev uint64
		e, err := d.kv.Get(ctx, rulesKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return 0, fmt.Errorf("reading %s: %w", d.Where(), err)
		default:
			cur, rev = e.Value(), e.Revision()
		}
		next, err := change(cur)
		if err != nil {
			return 0, err
		}
		var wrote uint64
		if rev == 0 {
			wrote, err = d.kv.Create(ctx, rulesKey, next)
		} else {
			wrote, err = d.kv.Update(ctx, rulesKey, next, rev)
		}
		if err == nil {
			return wrote, nil
		}
		var apiErr *jetstream.APIError
		conflict := errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
		if !conflict || attempt >= 8 {
			return 0, fmt.Errorf("writing %s: %w", d.Where(), err)
		}
	}
}

// Watch calls apply with the current value and each one written after it,
// with its revision, from one goroutine, until ctx ends: a value written
// between a Get and the Watch is not missed (apply sees the current value
// again, and may skip what it has).
func (d *Doc) Watch(ctx context.Context, apply func([]byte, uint64)) error {
	w, err := d.kv.Watch(ctx, rulesKey)
	if err != nil {
		return fmt.Errorf("watching %s: %w", d.Where(), err)
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					apply(e.Value(), e.Revision())
				}
			}
		}
	}()
	return nil
}
