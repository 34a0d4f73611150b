// Package kv is the JetStream key-value state reactord's replicas share:
// the loop guard's records, partition leases and the multi-master copy
// claims.
package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/natsbus"
)

// StateOptions configure State.
type StateOptions struct {
	// Bucket is the JetStream key-value bucket (default REACTORD_GUARD).
	Bucket string
	// Replicas of the bucket, as the event stream's: 0 leaves an
	// existing bucket as it is and creates a new one with 1.
	Replicas int
	// Logger receives a line (at most one a minute) when a write fails;
	// nil: slog.Default().
	Logger *slog.Logger
	// Description is the bucket's description (default: the loop guard's).
	Description string
	// WaitLog, when set, receives a line when the bucket cannot be
	// created yet (Open retries until its context ends) and one when it
	// was; nil: none.
	WaitLog *slog.Logger
	// Resend, when set, names the keys whose Put or Delete is sent again
	// when it fails (for up to 30s), for records only one replica
	// writes: the others' newer writes of a key would be overwritten by
	// an older value sent again. Nil: none.
	Resend func(key string) bool
}

// State is a JetStream key-value bucket that the replicas of the daemon
// share their loop guard, throttle and debounce state through. Every key
// is written with its own time to live (the bucket allows per-message
// TTLs), so nothing in it outlives its use. Put and Delete do not wait
// for the server; Update is a compare-and-set on the key's revision.
type State struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	pre    string // $KV.<bucket>.
	log    *slog.Logger
	failed *ratelog.Every
	resend func(key string) bool

	// pending are the writes sent and not confirmed yet, oldest first;
	// one goroutine (started with the first write) waits for each.
	pending     chan pendingWrite
	collectOnce sync.Once

	// sendMu orders the writes: gen numbers them, and latest holds, for
	// each key with a write unconfirmed, the number of its last one, so
	// that a failed write is sent again only while no newer write of its
	// key was sent (it would bring back an older value).
	sendMu sync.Mutex
	gen    uint64
	latest map[string]uint64
	resent atomic.Int64
}

// pendingWrite is a write waiting for the server's confirmation.
type pendingWrite struct {
	f     jetstream.PubAckFuture
	msg   *nats.Msg
	ttl   time.Duration
	gen   uint64
	first time.Time // when it was first sent
}

// ErrStateUnsupported is returned by Open when the NATS server has
// no JetStream or is older than natsbus.FeatureSharedState's minimum (no
// per-message TTL).
var ErrStateUnsupported = errors.New("the NATS server cannot keep the shared state (needs JetStream and per-message TTLs, nats-server " +
	natsbus.FeatureSharedState.Min().String() + " or later)")

// DefaultStateBucket is the shared state bucket's name unless
// StateOptions.Bucket names another.
const DefaultStateBucket = "REACTORD_GUARD"

// State creates (or updates) the shared state bucket.
func Open(ctx context.Context, c *natsbus.Conn, o StateOptions) (*State, error) {
	js := c.JetStream()
	if o.Bucket == "" {
		o.Bucket = DefaultStateBucket
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Description == "" {
		o.Description = "reactord: the loop guard's jobs and returns, throttle counts, debounce winners and expected events, shared by the replicas"
	}
	// A server without JetStream answers this at once (creating the
	// bucket would wait for ctx); other errors (a cluster electing) are
	// left to the retries below.
	actx, cancel := context.WithTimeout(ctx, natsbus.EnsureAttempt)
	_, err := js.AccountInfo(actx)
	cancel()
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("key-value bucket %s: %w: %w", o.Bucket, ErrStateUnsupported, err)
	}
	cfg := jetstream.KeyValueConfig{Bucket: o.Bucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: max(o.Replicas, 1), LimitMarkerTTL: time.Second,
		Description: o.Description}
	var kv jetstream.KeyValue
	// A cluster electing, forming, or busy adding a stream's replicas
	// answers so for a while, or not at all (each attempt's own deadline):
	// retry until ctx ends. What is refused for good (a server without
	// per-message TTLs) stops at once.
	err = natsbus.Ensure(ctx, o.WaitLog, "key-value bucket "+o.Bucket, func(ctx context.Context) error {
		var err error
		if o.Replicas > 0 {
			kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		} else if kv, err = js.KeyValue(ctx, o.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, o.Bucket) // another replica was faster
			}
		}
		return err
	})
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("key-value bucket %s: %w: %w", o.Bucket, ErrStateUnsupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating key-value bucket %s: %w", o.Bucket, err)
	}
	var st jetstream.Stream
	err = natsbus.Ensure(ctx, o.WaitLog, "stream KV_"+o.Bucket, func(ctx context.Context) (err error) {
		st, err = js.Stream(ctx, "KV_"+o.Bucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", o.Bucket, err)
	}
	return &State{js: js, stream: st, kv: kv, pre: "$KV." + o.Bucket + ".", log: o.Logger, failed: ratelog.New(time.Minute),
		pending: make(chan pendingWrite, 1<<14), latest: map[string]uint64{}, resend: o.Resend}, nil
}

// StateEntry is one change of the shared state, as Watch hands it over.
type StateEntry struct {
	Key   string
	Value []byte
	// Deleted is set for a deleted or expired key (Value is empty).
	Deleted bool
}

// Watch hands every key's current value, then every change, to apply,
// from one goroutine, until run ends. It returns once the current values
// were applied (or load ended first: an error), so a replica starts with
// the state the others left.
func (s *State) Watch(load, run context.Context, apply func(StateEntry)) error {
	_, err := s.WatchDone(load, run, apply)
	return err
}

// WatchDone is Watch, and also returns a channel closed once the watching
// goroutine has ended (after run ended): apply is not called any more,
// so that a caller's stop can wait for it.
func (s *State) WatchDone(load, run context.Context, apply func(StateEntry)) (<-chan struct{}, error) {
	ctx := run
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watching the shared state: %w", err)
	}
	loaded := make(chan struct{})
	done := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				once.Do(func() { close(loaded) })
				return
			case e, ok := <-w.Updates():
				if !ok {
					once.Do(func() { close(loaded) })
					return
				}
				if e == nil { // the current values are all in
					once.Do(func() { close(loaded) })
					continue
				}
				apply(StateEntry{Key: e.Key(), Value: e.Value(), Deleted: e.Operation() != jetstream.KeyValuePut})
			}
		}
	}()
	select {
	case <-loaded:
		return done, ctx.Err()
	case <-load.Done():
		return done, fmt.Errorf("loading the shared state: %w", load.Err())
	}
}

// Put writes key's value, kept for ttl (at least a second), without
// waiting for the server; a failure is logged.
func (s *State) Put(key string, value []byte, ttl time.Duration) {
	s.async(&nats.Msg{Subject: s.pre + key, Data: value, Header: nats.Header{}}, ttl)
}

// Delete removes key without waiting for the server; its delete marker is
// kept for ttl.
func (s *State) Delete(key string, ttl time.Duration) {
	m := &nats.Msg{Subject: s.pre + key, Header: nats.Header{}}
	m.Header.Set("KV-Operation", "DEL")
	s.async(m, ttl)
}

func (s *State) async(m *nats.Msg, ttl time.Duration) {
	s.sendMu.Lock()
	s.gen++
	p := pendingWrite{msg: m, ttl: max(ttl, time.Second).Round(time.Second), gen: s.gen, first: time.Now()}
	s.latest[m.Subject] = p.gen
	s.sendLocked(p)
	s.sendMu.Unlock()
}

// sendLocked sends a write and queues it for its confirmation; sendMu is
// held, so that writes go out in the order of their numbers.
func (s *State) sendLocked(p pendingWrite) {
	f, err := s.js.PublishMsgAsync(p.msg, jetstream.WithMsgTTL(p.ttl))
	if err != nil {
		go s.retryOrFail(p, err)
		return
	}
	p.f = f
	s.collectOnce.Do(func() { go s.collect() })
	select {
	case s.pending <- p:
	default:
		// More writes unconfirmed than the queue holds: wait for this
		// one apart rather than hold the caller.
		go s.confirm(p)
	}
}

// collect waits for the confirmation of each write, in the order they
// were sent (the server answers in that order).
func (s *State) collect() {
	for p := range s.pending {
		s.confirm(p)
	}
}

func (s *State) confirm(p pendingWrite) {
	select {
	case <-p.f.Ok():
		s.sendMu.Lock()
		if s.latest[p.msg.Subject] == p.gen {
			delete(s.latest, p.msg.Subject)
		}
		s.sendMu.Unlock()
	case err := <-p.f.Err():
		s.retryOrFail(p, err)
	case <-time.After(confirmWait):
		s.retryOrFail(p, errors.New("no confirmation from the server"))
	}
}

// confirmWait bounds the wait for one write's confirmation; a write sent
// to a NATS node that died is never confirmed.
const confirmWait = 5 * time.Second

// resendFor is how long a failed write is sent again (a NATS cluster
// that lost a node answers again once the bucket has a new leader).
const resendFor = 30 * time.Second

// retryOrFail handles a write that failed: for a key Resend names, it is
// sent again a second later, unless a newer write of its key was sent
// since (which stands for it) or it has been failing for resendFor; other
// failures are logged, at most once a minute with the count.
func (s *State) retryOrFail(p pendingWrite, err error) {
	s.sendMu.Lock()
	if s.latest[p.msg.Subject] != p.gen {
		s.sendMu.Unlock()
		return
	}
	if s.resend == nil || !s.resend(strings.TrimPrefix(p.msg.Subject, s.pre)) || time.Since(p.first) >= resendFor {
		delete(s.latest, p.msg.Subject)
		s.sendMu.Unlock()
		s.fail(p.msg.Subject, err)
		return
	}
	s.sendMu.Unlock()
	time.AfterFunc(time.Second, func() {
		s.sendMu.Lock()
		defer s.sendMu.Unlock()
		if s.latest[p.msg.Subject] == p.gen {
			s.resent.Add(1)
			s.sendLocked(p)
		}
	})
}

func (s *State) fail(subject string, err error) {
	if n, ok := s.failed.Tick(); ok {
		s.log.Warn("shared state: a write failed", "subject", subject, "err", err, "failures_since_last_line", n,
			"detail", "the other replicas may not see it; logged at most once a minute")
	}
}

// Resent returns how many writes were sent again after failing.
func (s *State) Resent() int64 { return s.resent.Load() }

// Update changes key atomically across replicas: fn gets the current
// value (nil when none) and returns the new one and true, or false to
// leave the key as it is (Update then returns false). The new value is
// kept for ttl. It retries when another replica changed the key between
// the read and the write.
func (s *State) Update(ctx context.Context, key string, ttl time.Duration, fn func(old []byte) ([]byte, bool)) (bool, error) {
	return s.UpdateAt(ctx, key, ttl, func(old []byte, _ time.Time) ([]byte, bool) { return fn(old) })
}

// UpdateAt is Update with fn also given when the current value was
// written (the server's time; zero when there is none).
func (s *State) UpdateAt(ctx context.Context, key string, ttl time.Duration, fn func(old []byte, written time.Time) ([]byte, bool)) (bool, error) {
	subj := s.pre + key
	for range 16 {
		var old []byte
		var rev uint64
		var written time.Time
		m, err := s.stream.GetLastMsgForSubject(ctx, subj)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, fmt.Errorf("reading shared state: %w", err)
		default:
			rev = m.Sequence
			if isValue(m) {
				old, written = m.Data, m.Time
			}
		}
		v, ok := fn(old, written)
		if !ok {
			return false, nil
		}
		_, err = s.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: v, Header: nats.Header{}},
			jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(max(ttl, time.Second).Round(time.Second)))
		if err == nil {
			return true, nil
		}
		if !isWrongSequence(err) {
			return false, fmt.Errorf("writing shared state: %w", err)
		}
		// Another replica changed the key meanwhile: read it again.
	}
	return false, errors.New("writing shared state: the key keeps changing")
}

// Get reads key's current value from the server rather than a watch
// (a replica's watch may not have brought in another's write yet); false
// when the key has none (never written, deleted or expired).
func (s *State) Get(ctx context.Context, key string) ([]byte, bool, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.pre+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading shared state: %w", err)
	case !isValue(m):
		return nil, false, nil
	}
	return m.Data, true, nil
}

// isValue reports whether a key's last message holds its value, rather
// than marking it deleted or purged (KV-Operation) or expired (the
// server's TTL marker).
func isValue(m *jetstream.RawStreamMsg) bool {
	return m.Header.Get("KV-Operation") == "" && m.Header.Get("Nats-Marker-Reason") == ""
}

// Flush waits until the server confirmed (or refused, or resendFor gave
// up on) every Put and Delete sent before it was called (a key written
// again since: its newer write stands for it), or ctx ends:
// what a replica hands over with an event (a stop lets its events go) is
// then in the bucket before another replica takes the event.
func (s *State) Flush(ctx context.Context) error {
	s.sendMu.Lock()
	g := s.gen
	s.sendMu.Unlock()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		s.sendMu.Lock()
		waiting := false
		for _, gen := range s.latest {
			if gen <= g {
				waiting = true
				break
			}
		}
		s.sendMu.Unlock()
		if !waiting {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the shared state's writes: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Scan reads, from the server rather than a watch, the current value of
// every key that starts with prefix (deleted and expired keys left out).
func (s *State) Scan(ctx context.Context, prefix string) (map[string][]byte, error) {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(s.pre+prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("listing shared state %s*: %w", prefix, err)
	}
	out := make(map[string][]byte, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		key := subj[len(s.pre):]
		v, ok, err := s.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			out[key] = v
		}
	}
	return out, nil
}
