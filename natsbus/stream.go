package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamReady reports whether JetStream answers and can place a stream
// on replicas servers: on a cluster, once its nodes elected a meta leader
// and it sees them all. With replicas above 1 it creates and deletes a
// small stream in memory to find out.
func (c *Conn) JetStreamReady(ctx context.Context, replicas int) error {
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if replicas <= 1 {
		return nil
	}
	name := "REACTORD_READY_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"reactord.ready." + name}, Storage: jetstream.MemoryStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("JetStream: a stream on %d servers: %w", replicas, err)
	}
	if err := c.js.DeleteStream(ctx, name); err != nil {
		return fmt.Errorf("JetStream: deleting the probe stream %s: %w", name, err)
	}
	return nil
}

// StreamOptions configure the JetStream stream and durable consumer.
type StreamOptions struct {
	// Stream is the stream name (default REACTORD_EVENTS).
	Stream string
	// Durable is the shared durable consumer's name (default reactord).
	Durable string
	// MaxAckPending bounds unacknowledged messages per consumer.
	MaxAckPending int
	// AckWait is how long a delivered message may stay unacknowledged
	// before redelivery (default 10s): how long the events a crashed
	// daemon held wait before another replica, or its successor, takes
	// them; progress acknowledgements keep longer work from redelivery.
	AckWait time.Duration
	// Duplicates is the de-duplication window for Nats-Msg-Id: a message
	// whose id the stream stored less than this long ago is dropped. It
	// only has to cover a publish retry or a second bridge on the same
	// master (the bridge's id includes the master's _stamp). Zero means 2
	// minutes for a new stream and leaves an existing stream's window as it
	// is; a positive value is also applied to an existing stream.
	Duplicates time.Duration
	// MaxAge bounds how long the stream keeps an event not acknowledged
	// (default 24h). A new stream is trimmed to the shared consumer's
	// acknowledgement floor (Trimmer; a work queue on nats-server 2.9):
	// an event leaves it once it and every event before it were
	// acknowledged. With Partitions it is trimmed to what every one of
	// its consumers acknowledged (TrimmedAll; a stream made by an earlier
	// reactord has interest retention, with the same effect). Either
	// way the server's disk and memory hold the backlog, not a day of
	// traffic (the audit store is the record).
	MaxAge time.Duration
	// Replicas is how many servers of a NATS cluster keep the stream (1,
	// 3 or 5 in practice; at most the cluster's size). Zero means 1 for a
	// new stream and leaves an existing stream's replicas as they are; a
	// positive value is also applied to an existing stream (the server
	// adds or removes the copies), and the change is logged.
	Replicas int
	// Progress makes Consume send progress acknowledgements for the
	// messages it holds (delivered, neither acknowledged nor refused) for
	// half of AckWait or more, every quarter of AckWait, so that a backlog
	// in a live replica is not redelivered to another one. Without it a
	// message held longer than AckWait is redelivered.
	Progress bool
	// CheckEvery is how often Consume checks that its stream and consumer
	// still exist (default 5s).
	CheckEvery time.Duration
	// Partitions, when above 0, is the number of partitions whose
	// consumers read the stream (consume.NewPartitioned): EnsureStream
	// then creates a new stream trimmed to what all its consumers
	// acknowledged (TrimmedAll), which allows several consumers, and the
	// subject transform of this number
	// (PartitionTransform), so that the server stores each keyed event
	// under its partition's subject; it refuses a work-queue stream, and
	// adds the partitions' subjects to an existing stream, whose
	// transform SetPartitionTransform changes once the consumers exist.
	Partitions int
	// TrimEvery is the shortest time between two trims of a trimmed
	// stream by one replica (default DefaultTrimEvery): how long an
	// acknowledged event may stay in the stream once every event before
	// it was acknowledged, and so what a power loss or a SIGKILL of the
	// embedded server's process can deliver again. A purge costs about
	// the same for one event as for many: a longer time saves CPU when
	// events come one at a time.
	TrimEvery time.Duration
	// Logger receives Consume's reports (a lost stream or consumer); nil
	// discards them.
	Logger *slog.Logger
}

// The stream settings Defaults fills in when they are zero, which the
// daemon's flags show as theirs.
const (
	// DefaultAckWait is how long the consumer waits for an
	// acknowledgement before redelivering (StreamOptions.AckWait).
	DefaultAckWait = 10 * time.Second
	// DefaultDuplicates is the stream's duplicate window
	// (StreamOptions.Duplicates).
	DefaultDuplicates = 2 * time.Minute
	// DefaultTrimEvery is StreamOptions.TrimEvery's default.
	DefaultTrimEvery = 20 * time.Millisecond
)

// Defaults fills in the stream settings left empty.
func (o *StreamOptions) Defaults() {
	if o.Stream == "" {
		o.Stream = "REACTORD_EVENTS"
	}
	if o.Durable == "" {
		o.Durable = "reactord"
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = 4096
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.Duplicates <= 0 {
		o.Duplicates = DefaultDuplicates
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 24 * time.Hour
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 5 * time.Second
	}
	if o.TrimEvery <= 0 {
		o.TrimEvery = DefaultTrimEvery
	}
}

// SharedConsumer is the configuration of the durable consumer replicas
// share.
func (o *StreamOptions) SharedConsumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       o.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxAckPending: o.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// ErrWorkQueueStream is returned by EnsureStream when partition consumers
// would read a stream made for the shared consumer: a work queue, which
// allows one consumer only, or a trimmed stream (Trimmed), which drops
// what the shared consumer acknowledged.
// The name is older than trimmed streams, which it covers too.
var ErrWorkQueueStream = errors.New("the stream is made for one shared consumer (a work queue, or trimmed to that consumer's acknowledgement floor): partitions need a stream of their own; stop the replicas once it is drained, delete it (nats stream rm) and start them with partitions, which create it so")

// EnsureStream creates the event stream when it is absent (see MaxAge and
// Partitions for its retention: trimmed, marked so in its metadata, on
// nats-server 2.10 or later and a work queue before; with partitions,
// trimmed to what all its consumers acknowledged, NewPartitioned creating
// them right after). An
// existing work queue is kept, and said once to o.Logger. It sets an
// existing stream's duplicate window and replicas to o.Duplicates and
// o.Replicas when those are set and differ (its other settings are left
// alone); a change of replicas is logged to o.Logger. With o.Partitions it
// sets the stream's subject transform to that number of partitions. On
// nats-server 2.12 or later (every node that answers, see ServerVersion)
// it creates the stream with atomic batch publish allowed (allow_atomic),
// and allows it on an existing stream that does not (logged), so that
// a Publisher's batches are written and flushed once each.
func (c *Conn) EnsureStream(ctx context.Context, o StreamOptions) error {
	window, replicas := o.Duplicates, o.Replicas
	o.Defaults()
	has := c.serverHas(ctx)
	s, err := c.js.Stream(ctx, o.Stream)
	if err == nil {
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
		}
		if o.Partitions > 0 && (info.Config.Retention == jetstream.WorkQueuePolicy || Trimmed(info.Config, o.Durable)) {
			return fmt.Errorf("stream %s: %w", o.Stream, ErrWorkQueueStream)
		}
		cfg := info.Config
		if window > 0 {
			cfg.Duplicates = window
		}
		if replicas > 0 {
			cfg.Replicas = replicas
		}
		if o.Partitions > 0 && !slices.Contains(cfg.Subjects, PartitionPrefix(c.prefix)+">") {
			// The transform comes later (SetPartitionTransform), once
			// the partitions' consumers exist.
			cfg.Subjects = append(slices.Clone(cfg.Subjects), PartitionPrefix(c.prefix)+">")
		}
		if !cfg.AllowAtomicPublish && has(FeatureBatchPublish) && !cfg.Sealed && cfg.Mirror == nil {
			cfg.AllowAtomicPublish = true
		}
		if o.Partitions == 0 && info.Config.Retention == jetstream.WorkQueuePolicy && o.Logger != nil && !c.saidWorkQueue.Load() && has(FeatureTrimmedStream) {
			c.saidWorkQueue.Store(true)
			o.Logger.Info("JetStream event stream is a work queue", "stream", o.Stream,
				"why", "nats-server removes each acknowledged event with a write of its own, flushed to disk with sync_interval always; a stream reactord creates now is trimmed to the consumer's acknowledgement floor, one flush for many events (docs/speed.md)",
				"fix", "stop the replicas once it is drained, delete it (nats stream rm) and start them")
		}
		if o.Partitions > 0 && info.Config.Retention == jetstream.InterestPolicy && o.Logger != nil && !c.saidInterest.Swap(true) {
			o.Logger.Info("JetStream event stream has interest retention", "stream", o.Stream,
				"why", "nats-server removes each event every partition acknowledged with a write of its own; a stream reactord creates now is trimmed to what all its consumers acknowledged, one purge for many events (docs/speed.md)",
				"fix", "stop the replicas once it is drained, delete it (nats stream rm) and start them")
		}
		if cfg.Duplicates == info.Config.Duplicates && cfg.Replicas == max(info.Config.Replicas, 1) && len(cfg.Subjects) == len(info.Config.Subjects) &&
			cfg.AllowAtomicPublish == info.Config.AllowAtomicPublish {
			return nil
		}
		if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("updating stream %s (duplicate window %v, was %v; replicas %d, was %d; partitions %d; allow_atomic %t, was %t): %w",
				o.Stream, cfg.Duplicates, info.Config.Duplicates, cfg.Replicas, max(info.Config.Replicas, 1), o.Partitions, cfg.AllowAtomicPublish, info.Config.AllowAtomicPublish, err)
		}
		if cfg.AllowAtomicPublish != info.Config.AllowAtomicPublish && o.Logger != nil {
			o.Logger.Info("JetStream stream now allows atomic batch publish", "stream", o.Stream,
				"setting", "allow_atomic", "effect", "publishers send batches, each written and flushed once")
		}
		if cfg.Replicas != max(info.Config.Replicas, 1) && o.Logger != nil {
			o.Logger.Warn("JetStream stream replicas changed", "stream", o.Stream, "replicas", cfg.Replicas, "was", max(info.Config.Replicas, 1))
		}
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	cfg := jetstream.StreamConfig{
		Name:       o.Stream,
		Subjects:   []string{c.prefix + ">"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: o.Duplicates,
		MaxAge:     o.MaxAge,
		Replicas:   max(o.Replicas, 1),
		// Publishers send atomic batches, which the server writes and
		// flushes once each (Publisher).
		AllowAtomicPublish: has(FeatureBatchPublish),
	}
	if o.Partitions == 0 && has(FeatureTrimmedStream) {
		cfg.Retention, cfg.Metadata = jetstream.LimitsPolicy, map[string]string{TrimmedKey: o.Durable}
	}
	if o.Partitions > 0 {
		t := PartitionTransform(c.prefix, o.Partitions)
		cfg.Retention, cfg.SubjectTransform, cfg.Metadata = jetstream.LimitsPolicy, &t, map[string]string{TrimmedKey: TrimmedAll}
		// The partitions' subjects are the stream's too: else the server
		// takes the plain lane's filter (the event prefix) for the whole
		// stream and keeps every partitioned event for it.
		cfg.Subjects = append(cfg.Subjects, PartitionPrefix(c.prefix)+">")
	}
	_, err = c.js.CreateStream(ctx, cfg)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("creating stream %s: %w", o.Stream, err)
	}
	return nil
}

// serverHas returns a function that reports whether every server of the
// connection's cluster that answers has a feature (atomic batches,
// trimmed streams), asking their versions once (ServerVersion reads each
// known node's greeting) however many features EnsureStream asks about.
func (c *Conn) serverHas(ctx context.Context) func(Feature) bool {
	var sv *ServerVersion
	asked := false
	return func(f Feature) bool {
		if !asked {
			asked = true
			if v, err := c.ServerVersion(ctx); err == nil {
				sv = &v
			}
		}
		return sv != nil && f.Check(*sv) == nil
	}
}

// SetPartitionTransform sets the subject transform of the stream o.Stream
// to o.Partitions partitions (PartitionTransform) when it is not that yet,
// and logs the change to o.Logger. An interest stream drops, and a
// stream trimmed for all its consumers purges, an event no consumer's
// filter takes: the partitions' consumers must exist before
// their subjects receive events, so this comes after they are created.
func (c *Conn) SetPartitionTransform(ctx context.Context, o StreamOptions) error {
	o.Defaults()
	s, err := c.js.Stream(ctx, o.Stream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	t := PartitionTransform(c.prefix, o.Partitions)
	if info.Config.SubjectTransform != nil && *info.Config.SubjectTransform == t {
		return nil
	}
	cfg := info.Config
	cfg.SubjectTransform = &t
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("stream %s: setting the subject transform of %d partitions: %w", o.Stream, o.Partitions, err)
	}
	if o.Logger != nil {
		o.Logger.Info("JetStream stream now stores keyed events under the subjects of their partition", "stream", o.Stream, "partitions", o.Partitions,
			"from", t.Source, "to", t.Destination)
	}
	return nil
}

// StreamInfo reports a stream's message count.
func (c *Conn) StreamMessages(ctx context.Context, stream string) (uint64, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// Transient tells a JetStream error that may pass by itself: the server
// unavailable or short of resources for now (a cluster electing a leader,
// a stream being scaled), a cluster still forming (no peers to place a
// replicated stream on yet), a timeout. Who starts a stream, a consumer or
// a bucket retries these for a while. JetStream not enabled, on the
// server or for the account (503 too), does not pass by itself.
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		if apiErr.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabled || apiErr.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabledForAccount {
			return false
		}
		return apiErr.Code >= 500 || apiErr.ErrorCode == jsClusterNoPeers
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}

// jsClusterNoPeers is JetStream's "no suitable peers for placement": a
// replicated stream asked of a cluster whose nodes have not all joined.
const jsClusterNoPeers jetstream.ErrorCode = 10005
