package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/natsbus/embedded"
)

// restartFree is the free space JetStream's file system must have before
// reactord turns JetStream on again on the embedded server.
const restartFree = 16 << 20

// jetStreamWatch notices that JetStream on the embedded server stopped
// taking events — a stream that failed to write (a full disk) refuses
// every message from then on, and a server may turn JetStream off — says
// so once and on /healthz, and restarts the embedded server once the disk
// has room: the streams are read back from disk, the clients reconnect and
// the consumer picks up again by itself, and the bridge has spooled
// meanwhile.
type jetStreamWatch struct {
	srv   *embedded.Server
	dir   string // the store directory, whose file system is watched
	log   *slog.Logger
	every time.Duration

	down  atomic.Bool
	since time.Time // when it went down; run's goroutine only
	tried time.Time // the last failed restart; run's goroutine only
}

func (w *jetStreamWatch) run(ctx context.Context) { tick(ctx, w.every, w.check) }

// tick calls f with the time every d until ctx ends.
func tick(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// check looks once.
func (w *jetStreamWatch) check(now time.Time) {
	if w.srv.JetStreamEnabled() && !w.srv.WriteFailed() {
		return
	}
	free, freeErr := diskFree(w.dir)
	if !w.down.Load() {
		w.down.Store(true)
		w.since = now
		w.log.Error("JetStream stopped on the embedded NATS server: disk full?",
			"store_dir", w.dir, "free_bytes", free,
			"detail", "no event is taken in until it runs again (the bridge spools meanwhile; /healthz answers 503)",
			"fix", "free space on the data directory's file system: reactord restarts the embedded server once 16 MiB are free")
	}
	if freeErr == nil && free < restartFree {
		return
	}
	if err := w.srv.Restart(); err != nil {
		if now.Sub(w.tried) >= time.Minute {
			w.log.Warn("the embedded NATS server could not be restarted yet; trying again", "err", err, "free_bytes", free)
			w.tried = now
		}
		return
	}
	w.down.Store(false)
	w.log.Info("JetStream runs again on the restarted embedded NATS server: events flow again", "down_for", now.Sub(w.since).Round(time.Second), "free_bytes", free)
}

// health is /healthz's check.
func (w *jetStreamWatch) health() error {
	if w.down.Load() {
		return errors.New("embedded JetStream: stopped (disk full?), restarting once there is room")
	}
	return nil
}
