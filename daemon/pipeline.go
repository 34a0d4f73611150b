package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/natsdriver"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/internal/poison"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/consume"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/shadow"
)

// openJournal opens the poison-event journal under the data directory
// (JetStream only: core NATS does not redeliver what a crash lost): an
// event in hand at poison.DefaultThreshold crashes of the daemon is parked
// on --parked-subject instead of handled again. A journal that cannot be
// opened is logged, and the daemon goes on without it.
func (d *Daemon) openJournal(ro *reactor.Options) {
	j, left, err := poison.Open(filepath.Join(d.dataDir, "poison"), poison.DefaultThreshold)
	if err != nil {
		d.log.Warn("poison-event journal unavailable", "err", err,
			"detail", "an event the daemon dies on will be redelivered after every restart")
		return
	}
	if len(left) > 0 {
		d.log.Warn("the last run ended while handling events", "stream_sequences", left,
			"detail", "each is parked if the daemon dies on it again", "crashes_to_park", poison.DefaultThreshold)
	}
	subject := d.opts.ParkedSubject
	ro.Journal = j
	ro.Park = func(dl reactor.Delivery, crashes int) {
		_ = d.conn.Publish(context.Background(), natsbus.Msg{Subject: subject, Body: dl.Body, Meta: natsbus.Meta{Cause: fmt.Sprintf("parked after %d crashes (stream sequence %d)", crashes, dl.Seq)}}, natsbus.Core)
	}
	d.push("poison-event journal", func(context.Context) error { return j.Close() })
}

// handOverAfter is reactor.Options.HandOverAfter for the flag's value:
// the flag's 0 (at once) is the reactor's negative.
func handOverAfter(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// startPipeline starts the lanes. Its teardown drains them within the
// drain timeout, then hands the partitions over.
func (d *Daemon) startPipeline(context.Context) error {
	deadLetter := d.opts.DeadLetter
	ro := reactor.Options{
		Driver: d.drv, Lanes: d.opts.Workers, QueueSize: d.opts.Queue, InFlight: d.opts.InFlight, HandOverAfter: handOverAfter(d.opts.HandOverAfter),
		Block: d.jetstream, Log: d.log, Metrics: d.metrics,
		Guard: d.guard, MaxHops: d.opts.MaxHops, Archive: d.archive, Copy: d.copyOf,
		DeadLetter: func(a actions.Action, cause error) { natsdriver.DeadLetter(d.conn, deadLetter, a, cause) },
		OnDispatch: d.opts.Hooks.OnDispatch, OnDone: d.opts.Hooks.OnDone, Paused: d.reactionsPaused,
	}
	if d.opts.Shadow {
		lo := shadow.ListenerOptions{Options: shadow.Options{Window: d.opts.ShadowWindow, MasterUser: d.opts.ShadowSaltUser},
			Guard: d.guard, Log: d.log, Verdicts: d.metrics.Shadow, RunnerJobs: d.metrics.ShadowRunnerJobs}
		if d.archive != nil {
			lo.Ledger = d.archive
		} else {
			d.log.Warn("shadow: the audit store is off: shadow report has nothing to read", "flag", "--store none",
				"metric", "reactord_shadow_total", "detail", "verdicts are counted and logged only")
		}
		ro.Listeners = append(ro.Listeners, shadow.NewListener(lo))
	}
	ro.Listeners = append(ro.Listeners, d.rules)
	if d.jetstream {
		d.openJournal(&ro)
	}
	p, err := d.newPipeline(ro)
	if err != nil {
		return err
	}
	p.Start(d.runCtx)
	d.push("pipeline", func(ctx context.Context) error {
		sctx, cancel := context.WithTimeout(ctx, d.opts.DrainTimeout)
		defer cancel()
		err := p.Stop(sctx)
		if d.archive != nil && d.jetstream && sctx.Err() == nil {
			// Each drained event is acknowledged once its audit records
			// are durable: write them now (to the spool, with the
			// database down), so that the acknowledgements go before the
			// hand-over and the consumer's close. A database that hangs
			// gets 2 s: the writer's close acknowledges what it writes
			// later, and those acknowledgements are confirmed before the
			// connection closes.
			dctx, dcancel := context.WithTimeout(sctx, 2*time.Second)
			derr := d.archive.W.Durable(dctx)
			dcancel()
			if derr != nil {
				d.log.Warn("stopping: audit store did not take the last records in 2 s", "err", derr,
					"detail", "their events are acknowledged when it does, before the writer closes, or come again at the next start")
			}
		}
		if d.partitioned != nil {
			// The drained events are acknowledged: hand the partitions
			// over to the other replicas at once.
			d.partitioned.Release(sctx)
		}
		if c, ok := d.sub.(*consume.Consumer); ok {
			c.Close() // the drained events are settled: end its progress acknowledgements and wait for its goroutines
		}
		// Nothing is in flight any more: end the background work (the
		// shared state's watch, the purge, the probes) and wait for it
		// before the store and the connection close under it.
		d.stopBackground(ctx)
		if err != nil {
			d.log.Error("drain incomplete", "err", err)
			return errors.Join(ErrUnfinished, err)
		}
		return nil
	})
	return nil
}

// newPipeline builds the engine of the current configuration and the
// pipeline on it, under applyMu: a rule change another replica writes
// meanwhile (changedElsewhere) is applied either before, to d.cfg, or
// after, to the pipeline, never lost between the two.
func (d *Daemon) newPipeline(ro reactor.Options) (*reactor.Reactor, error) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	eng, err := engine.New(d.cfg, engine.Options{SaltCalls: d.saltCalls, Log: d.log, Files: d.eng.Files()})
	if err != nil {
		return nil, configErr(err) // d.eng was built from d.cfg: not reached
	}
	d.eng = eng
	p, err := reactor.New(d.eng, ro)
	if err != nil {
		return nil, configErr(err)
	}
	d.pipe = p
	d.running.Store(p)
	return p, nil
}
