package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// updater is the part of the shared state the write probe uses
// (kv.State).
type updater interface {
	Update(ctx context.Context, key string, ttl time.Duration, fn func(old []byte) ([]byte, bool)) (bool, error)
}

// writeProbe writes a heartbeat into the shared state bucket now and then
// and waits for the server to confirm it: a JetStream server whose disk
// is full refuses it, and a stream that failed to write keeps refusing
// until its JetStream restarts. It is how a daemon on an external NATS
// server notices: its log says so once, /healthz answers 503 and
// reactord_jetstream_writable is 0 until a heartbeat goes through again.
type writeProbe struct {
	state updater
	key   string
	log   *slog.Logger
	every time.Duration
	// failAfter is how many heartbeats in a row must fail (a cluster
	// electing a leader refuses writes for a few seconds).
	failAfter int

	failing atomic.Bool
	lastErr atomic.Pointer[error]
	since   time.Time // the first failure of the current run; run's goroutine only
	fails   int
}

func newWriteProbe(state updater, log *slog.Logger) *writeProbe {
	host, _ := os.Hostname()
	return &writeProbe{state: state, key: fmt.Sprintf("h.%s-%d", sanitizeKey(host), os.Getpid()), log: log, every: 10 * time.Second, failAfter: 2}
}

// sanitizeKey keeps the letters, digits and dashes of s (a bucket key's
// alphabet, dots being separators).
func sanitizeKey(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, c := range b {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			out = append(out, c)
		}
	}
	return string(out)
}

func (p *writeProbe) run(ctx context.Context) {
	tick(ctx, p.every, func(now time.Time) { p.beat(ctx, now) })
}

// beat writes one heartbeat.
func (p *writeProbe) beat(ctx context.Context, now time.Time) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := p.state.Update(wctx, p.key, time.Minute, func([]byte) ([]byte, bool) { return []byte(now.UTC().Format(time.RFC3339)), true })
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if p.failing.Load() {
			p.log.Info("JetStream takes writes again", "down_for", now.Sub(p.since).Round(time.Second))
		}
		p.failing.Store(false)
		p.fails = 0
		return
	}
	p.lastErr.Store(&err)
	if p.fails++; p.fails == 1 {
		p.since = now
	}
	if p.fails == p.failAfter {
		p.failing.Store(true)
		p.log.Error("JetStream refuses writes: disk full, or the stream damaged",
			"bucket_key", p.key, "err", err,
			"detail", "events are not taken in and reactions that need shared state count alone; /healthz answers 503",
			"fix", "free space on the NATS server's store, then restart nats-server: a stream that failed to write takes messages once its JetStream restarts")
	}
}

// health is /healthz's check.
func (p *writeProbe) health() error {
	if !p.failing.Load() {
		return nil
	}
	err := errors.New("unknown error")
	if e := p.lastErr.Load(); e != nil {
		err = *e
	}
	return fmt.Errorf("JetStream: refuses writes: %w", err)
}
