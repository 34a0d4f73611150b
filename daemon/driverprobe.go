package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
)

// driverProbeTimeout bounds one probe of the driver (salt-api's login).
const driverProbeTimeout = 10 * time.Second

// driverProbe checks that what the driver drives answers and takes its
// credentials: once at start (the start goes on either way: reactions are
// retried), then every interval, so that /healthz says whether reactions
// can reach Salt. A change of the outcome is logged once.
type driverProbe struct {
	p     actions.Prober
	name  string
	log   *slog.Logger
	every time.Duration

	mu   sync.Mutex
	last error
	done bool // probed at least once
}

// probe runs one probe and records its outcome.
func (dp *driverProbe) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, driverProbeTimeout)
	err := dp.p.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping
	}
	dp.mu.Lock()
	was, first := dp.last, !dp.done
	dp.last, dp.done = err, true
	dp.mu.Unlock()
	switch {
	case err != nil && (first || was == nil):
		dp.log.Error("driver cannot reach Salt: reactions wait and are retried", "driver", dp.name, "err", err.Error(),
			"detail", "/healthz fails until it can")
	case err == nil && was != nil:
		dp.log.Info("the driver reaches Salt again", "driver", dp.name)
	}
}

// run probes every interval until ctx ends.
func (dp *driverProbe) run(ctx context.Context) {
	tick(ctx, dp.every, func(time.Time) { dp.probe(ctx) })
}

// health is the last probe's outcome.
func (dp *driverProbe) health() error {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.last != nil {
		return fmt.Errorf("driver %s: %w", dp.name, dp.last)
	}
	return nil
}
