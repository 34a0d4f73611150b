package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/natsbus"
)

// Defaults for OutboxConfig.
const (
	// DefaultSpoolMemory is how many bytes of events the outbox holds in
	// memory while NATS cannot take them.
	DefaultSpoolMemory = 64 << 20
	// DefaultSpoolDisk is how many more bytes it holds on disk.
	DefaultSpoolDisk = 1 << 30
	// DefaultLogInterval spaces the summary lines of repeated warnings.
	DefaultLogInterval = time.Minute
)

// headerReserve is kept free of the server's max payload for the headers
// (Nats-Msg-Id and reactord's own), which count against it.
const headerReserve = 1024

// PayloadLimiter is implemented by a Publisher that knows the largest
// message its server accepts (natsbus.Conn does). Events over it are cut to
// fit before publishing (see event.Fit).
type PayloadLimiter interface {
	MaxPayload() int
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// Dir holds the disk part of the spool; empty keeps the spool in memory
	// only (and events still held at exit are reported lost).
	Dir string
	// MemoryBytes and DiskBytes bound the spool (defaults DefaultSpoolMemory
	// and DefaultSpoolDisk). Past both, events are dropped and counted.
	MemoryBytes, DiskBytes int64
	// MinBackoff and MaxBackoff space the retries while NATS refuses
	// (defaults 100ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// LogInterval spaces the summary lines of repeated warnings (default
	// DefaultLogInterval): the first occurrence is logged, then one line per
	// interval with the count.
	LogInterval time.Duration
	// Logger receives the outbox's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// OutboxStats are the outbox's counters.
type OutboxStats struct {
	// Offered counts events handed to the outbox.
	Offered atomic.Int64
	// Published counts events NATS accepted.
	Published atomic.Int64
	// Truncated counts events published with values cut to fit the
	// server's max payload.
	Truncated atomic.Int64
	// TrimmedBySalt counts events that arrived with values Salt's master
	// replaced with VALUE_TRIMMED (an event over its max_event_size).
	TrimmedBySalt atomic.Int64
	// Dropped counts events refused because the spool was full.
	Dropped atomic.Int64
	// Unpublishable counts events that could not be made to fit.
	Unpublishable atomic.Int64
	// PublishErrors counts failed publish attempts (each retried).
	PublishErrors atomic.Int64
	// Spooled counts events that went to the disk spool.
	Spooled atomic.Int64
}

// The outbox's lines.
const (
	msgTrimmedBySalt = "event arrived trimmed by the Salt master"
	msgSpoolDamaged  = "spool file damaged: events in it lost"
	msgSpoolRelease  = "spool: releasing published events"
)

// valueTrimmed is what Salt's master puts in place of the values of an
// event over its max_event_size (salt.utils.dicttrim).
var valueTrimmed = []byte(`"VALUE_TRIMMED"`)

// Outbox carries events from a bridge to NATS without ever making the bridge
// wait: Offer puts an event in a bounded spool (memory, then disk) and Run
// publishes from it, in order, retrying with backoff while NATS is away. So
// a bridge keeps reading its source during a NATS or daemon restart, and
// what it read then is published once NATS is back.
type Outbox struct {
	pub      Publisher
	spool    *spool
	log      *slog.Logger
	minDelay time.Duration
	maxDelay time.Duration
	stats    OutboxStats
	dropLog  *ratelog.Every
	cutLog   *ratelog.Every
	trimLog  *ratelog.Every
	failLog  *ratelog.Every
	closeMu  sync.Mutex
	closed   bool
	healthy  atomic.Bool
}

// NewOutbox opens the spool (publishing first what an earlier run left in
// cfg.Dir) for events to pub.
func NewOutbox(cfg OutboxConfig, pub Publisher) (*Outbox, error) {
	if pub == nil {
		return nil, errors.New("bridge: nil Publisher")
	}
	if cfg.MemoryBytes <= 0 {
		cfg.MemoryBytes = DefaultSpoolMemory
	}
	if cfg.DiskBytes <= 0 {
		cfg.DiskBytes = DefaultSpoolDisk
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = DefaultLogInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "outbox")
	sp, err := newSpool(cfg.Dir, cfg.MemoryBytes, cfg.DiskBytes)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if sp.restored > 0 {
		log.Info("publishing events an earlier run left in the spool", "events", sp.restored, "file", sp.path)
	}
	if sp.torn > 0 {
		log.Warn("spool file ended inside a record (the last run stopped while writing it): cut", "bytes", sp.torn, "file", sp.path)
	}
	o := &Outbox{
		pub: pub, spool: sp, log: log, minDelay: cfg.MinBackoff, maxDelay: cfg.MaxBackoff,
		dropLog: ratelog.New(cfg.LogInterval), cutLog: ratelog.New(cfg.LogInterval), trimLog: ratelog.New(cfg.LogInterval), failLog: ratelog.New(cfg.LogInterval),
	}
	o.healthy.Store(true)
	return o, nil
}

// Stats returns the live counters.
func (o *Outbox) Stats() *OutboxStats { return &o.stats }

// Healthy reports whether the last publish attempt succeeded.
func (o *Outbox) Healthy() bool { return o.healthy.Load() }

// Pending reports how many events wait in memory and on disk, and their size.
func (o *Outbox) Pending() (memory, disk int, bytes int64) { return o.spool.len() }

// Offer queues one event for publishing; it never blocks. When the spool is
// full the event is dropped, counted and logged (the first, then a summary
// per interval).
func (o *Outbox) Offer(tag string, body []byte, msgID string) {
	o.stats.Offered.Add(1)
	where, err := o.spool.push(item{tag: tag, body: body, msgID: msgID})
	switch {
	case where == "disk":
		o.stats.Spooled.Add(1)
	case where == "":
		o.stats.Dropped.Add(1)
		if n, ok := o.dropLog.Tick(); ok {
			mem, disk, size := o.spool.len()
			o.log.Error("spool full: event dropped", "tag", tag, "msg_id", msgID, "dropped_since_last_log", n,
				"held_in_memory", mem, "held_on_disk", disk, "held_bytes", size, "error", err)
		}
	}
}

// Run publishes spooled events in order until ctx ends. An event NATS
// refuses is retried with backoff until it is accepted; the first failure of
// an outage and its end are logged, with how long it lasted and how many
// events waited.
func (o *Outbox) Run(ctx context.Context) error {
	if bp, ok := o.pub.(BulkPublisher); ok {
		return o.runBulk(ctx, bp)
	}
	for {
		it, ok := o.spool.pop(ctx)
		o.takeLost()
		if !ok {
			return nil
		}
		if !o.publish(ctx, it) {
			o.spool.unpop(it)
			return nil
		}
	}
}

// takeLost counts and logs the events a damaged spool file lost.
func (o *Outbox) takeLost() {
	if n, err := o.spool.takeLost(); n > 0 {
		o.stats.Dropped.Add(int64(n))
		o.log.Error(msgSpoolDamaged, "events", n, "error", err)
	}
}

// publish publishes one event, retrying until it is accepted or ctx ends
// (false: the event is still to be published).
func (o *Outbox) publish(ctx context.Context, it item) bool {
	body, ok := o.prepare(it)
	if !ok {
		return true
	}
	delay := retry.Backoff{Min: o.minDelay, Max: o.maxDelay}
	var outage time.Time
	for {
		err := o.pub.Publish(ctx, natsbus.Msg{Tag: it.tag, Body: body, Meta: natsbus.Meta{MsgID: it.msgID}}, natsbus.Event)
		if err == nil {
			o.stats.Published.Add(1)
			if !outage.IsZero() {
				o.backAfter(outage, 1)
			}
			return true
		}
		o.stats.PublishErrors.Add(1)
		if ctx.Err() != nil {
			return false
		}
		if o.tooBig(it, len(body), err) {
			return true
		}
		if outage.IsZero() {
			outage = time.Now()
			o.outageBegins(it, err)
		}
		if !retry.Sleep(ctx, delay.Next()) {
			return false
		}
	}
}

// backAfter logs the end of an outage that began at outage.
// extra counts events held outside the spool.
func (o *Outbox) backAfter(outage time.Time, extra int) {
	o.healthy.Store(true)
	mem, disk, _ := o.spool.len()
	o.log.Info("NATS takes events again", "outage", time.Since(outage).Round(time.Millisecond), "waiting", mem+disk+extra)
}

// outageBegins logs the first failure of an outage.
func (o *Outbox) outageBegins(it item, err error) {
	o.healthy.Store(false)
	o.log.Warn("NATS does not take events; holding them in the spool and retrying", "tag", it.tag, "error", err)
}

// tooBig reports (counting and logging it) an event NATS refused as over
// its max payload: it is dropped, not retried.
func (o *Outbox) tooBig(it item, size int, err error) bool {
	if !strings.Contains(err.Error(), "maximum payload") {
		return false
	}
	o.stats.Unpublishable.Add(1)
	if n, ok := o.failLog.Tick(); ok {
		o.log.Error("NATS refused the event as too big; dropped", "tag", it.tag, "bytes", size, "error", err,
			"dropped_since_last_log", n)
	}
	return true
}

// prepare returns the body to publish: cut to fit the server's max
// payload when it is over; ok is false when it cannot be made to fit (the
// event is dropped, counted and logged).
func (o *Outbox) prepare(it item) (body []byte, ok bool) {
	body = it.body
	if bytes.Contains(body, valueTrimmed) {
		o.stats.TrimmedBySalt.Add(1)
		if n, ok := o.trimLog.Tick(); ok {
			o.log.Warn(msgTrimmedBySalt, "tag", it.tag, "trimmed_since_last_log", n,
				"why", "values over its max_event_size (1 MiB by default) read VALUE_TRIMMED; the master's job cache keeps whole job returns",
				"fix", "raise max_event_size in the master's configuration to get them whole")
		}
	}
	if lim, ok := o.pub.(PayloadLimiter); ok {
		if max := lim.MaxPayload() - headerReserve; max > 0 && len(body) > max {
			out, cuts, err := event.Fit(body, max)
			if err != nil {
				o.stats.Unpublishable.Add(1)
				if n, ok := o.failLog.Tick(); ok {
					o.log.Error("event over the NATS max payload cannot be cut to fit; dropped", "tag", it.tag,
						"bytes", len(body), "max_payload", max+headerReserve, "error", err, "dropped_since_last_log", n)
				}
				return nil, false
			}
			o.stats.Truncated.Add(1)
			if n, ok := o.cutLog.Tick(); ok {
				keys := make([]string, len(cuts))
				for i, c := range cuts {
					keys[i] = fmt.Sprintf("%s(%d bytes)", c.Key, c.Bytes)
				}
				o.log.Warn("event over the NATS max payload: published with values cut", "tag", it.tag,
					"bytes", len(body), "max_payload", max+headerReserve, "cut", strings.Join(keys, ","),
					"truncated_since_last_log", n)
			}
			body = out
		}
	}
	return body, true
}

// Close persists what is still held (to the disk spool, for the next run)
// and reports how many events that leaves lost: with no disk spool, every
// event still held.
func (o *Outbox) Close() (lost int, err error) {
	o.closeMu.Lock()
	defer o.closeMu.Unlock()
	if o.closed {
		return 0, nil
	}
	o.closed = true
	lost, err = o.spool.close()
	if lost > 0 {
		o.log.Error("events not published and not kept", "events", lost, "error", err)
	}
	return lost, err
}
