package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/natsdriver"
	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/matchers"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/consume"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/natsbus/kv"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/ruletest"
	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// sharedWaitJetStream is how long, with JetStream, a throttle keeps asking
// a failing shared state before counting in its replica alone.
const sharedWaitJetStream = 15 * time.Second

// MaxAckPending bounds the events a JetStream daemon holds unacknowledged:
// its lanes' queues, the client's pull buffer and a store batch's worth
// waiting to be durable. Only these can run twice after a crash.
func MaxAckPending(queue, lanes int) int { return queue*lanes + 1024 + 1024 }

// openDataDir creates the data directory.
func (d *Daemon) openDataDir(context.Context) error {
	d.dataDir = d.opts.DataDir
	if d.dataDir == "" {
		// The clients look for the NATS token in the same place.
		d.dataDir = natsbus.DefaultDataDir()
	}
	open, err := natsbus.EnsurePrivateDir(d.dataDir)
	if err != nil {
		return configErr(fmt.Errorf("--data-dir %s: %w", d.dataDir, err))
	}
	if open {
		d.log.Warn("data directory can be listed by other users", "data_dir", d.dataDir,
			"detail", "its files are 0600", "fix", "chmod o-rwx it, or StateDirectoryMode=0700 in the unit")
	}
	return nil
}

// startNATS starts the embedded server when no NATS URL is given.
func (d *Daemon) startNATS(context.Context) error {
	if d.opts.NATS.URL != "" {
		d.natsURL = d.opts.NATS.URL
		if d.opts.ListenOpen {
			d.log.Warn("--listen-open applies to the embedded server only; ignored with --nats")
		}
		return nil
	}
	srv, token, err := startEmbedded(d.log, embedded.Options{Listen: d.opts.Listen, DataDir: filepath.Join(d.dataDir, "jetstream"),
		ListenFlag: "--listen", MaxPayload: d.opts.MaxPayload, SyncInterval: d.opts.JetStreamSync, Log: d.log}, d.dataDir, d.opts.ListenOpen)
	if err != nil {
		return configErr(err)
	}
	d.srv, d.token, d.natsURL = srv, token, srv.ClientURL()
	addr := srv.Addr()
	d.push("embedded NATS server", func(context.Context) error {
		// Stopping: fire and the bridge must not find this address as a
		// running daemon's (a SIGKILL leaves it; Find says so). Forgotten
		// while the server still holds its port, so no newer daemon can
		// have recorded the same address yet.
		err := natsbus.ForgetAddr(d.dataDir, addr)
		srv.Shutdown()
		return err
	})
	d.log.Info("embedded NATS server started", "url", d.natsURL, "data_dir", d.dataDir)
	w := &jetStreamWatch{srv: srv, dir: filepath.Join(d.dataDir, "jetstream"), log: d.log, every: 2 * time.Second}
	d.background(w.run)
	d.addHealth("embedded JetStream", w.health)
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_jetstream_up",
		Help: "1 while JetStream runs on the embedded NATS server (it stops by itself when its disk is full; reactord restarts the server once there is room)."},
		func() float64 { return b2f(!w.down.Load()) }))
	return nil
}

// connect opens the NATS connection and the pipeline's metrics.
func (d *Daemon) connect(ctx context.Context) error {
	copts, err := d.opts.NATS.ConnOptions("reactord", d.dataDir)
	if err != nil {
		return configErr(err)
	}
	if d.srv != nil {
		copts = natsbus.ConnOptions{URL: d.natsURL, Name: "reactord", Token: d.token}
	}
	copts.Logger = d.log
	d.metrics = reactor.NewMetrics(d.reg)
	RegisterRuntimeMetrics(d.reg)
	copts.SlowConsumer = func(n int64) { d.metrics.Dropped.WithLabelValues(reactor.DropSlowConsumer).Add(float64(n)) }
	conn, err := natsbus.Connect(copts)
	if err != nil {
		return configErr(err)
	}
	d.conn = conn
	d.push("NATS connection", func(ctx context.Context) error {
		if c, ok := d.sub.(*consume.Consumer); ok && conn.NATS().IsConnected() {
			// Acknowledgements sent after the consumer closed (events
			// whose audit records the store's close wrote): the server
			// drops those it has not applied when it shuts down.
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := c.ConfirmAcks(cctx)
			cancel()
			if err != nil {
				d.log.Warn("NATS server did not confirm the last acknowledgements", "err", err,
					"detail", "their events may react again after the acknowledgement wait")
			}
		}
		conn.Close()
		return nil
	})
	if err := d.chooseDelivery(ctx); err != nil {
		return configErr(err)
	}
	if err := d.gateFeatures(ctx); err != nil {
		return configErr(err)
	}
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_nats_connected", Help: "1 while the NATS connection is up."},
		func() float64 { return b2f(conn.Connected()) }))
	d.addHealth("NATS connection", func() error {
		if !conn.Connected() {
			return errors.New("NATS disconnected")
		}
		return nil
	})
	return nil
}

// openDriver makes the driver; its Close runs after the pipeline drained.
func (d *Daemon) openDriver(context.Context) error {
	drv := d.opts.DriverOverride
	if d.opts.Drivers.Log == nil {
		d.opts.Drivers.Log = d.log
	}
	if drv == nil {
		var err error
		if drv, err = d.opts.Drivers.Driver(d.driver, d.opts.Stdout, d.conn); err != nil {
			return configErr(err)
		}
	}
	if nd, ok := drv.(*natsdriver.Driver); ok {
		nd.Durable = d.jetstream // events are redelivered until a reaction is stored
	}
	d.drv = drv
	d.push("driver", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, d.opts.DrainTimeout)
		defer cancel()
		return drv.Close(cctx)
	})
	caller := drv
	if d.opts.Shadow {
		// Salt's reactor runs the jobs: the configured driver serves the
		// files' read-only Salt calls alone.
		d.drv = actions.Shadow{}
	}
	if d.opts.DryRun && d.opts.Drivers.APIURL != "" && d.opts.SaltCalls != "off" {
		// --dry-run executes nothing, but the files' read-only Salt calls
		// run for real, as explain's do.
		api, err := d.opts.Drivers.Driver("saltapi", d.opts.Stdout, d.conn)
		if err != nil {
			return configErr(err)
		}
		caller = api
		d.push("salt calls' driver", func(ctx context.Context) error { return api.Close(ctx) })
	}
	sc, err := NewSaltCalls(d.opts.SaltCalls, caller, d.log)
	if err != nil {
		return configErr(err)
	}
	if d.opts.Stubs != "" && sc == nil {
		d.log.Warn("--stubs unused: --salt-calls off, reaction files call nothing", "stubs", d.opts.Stubs)
	}
	if d.opts.Stubs != "" && sc != nil {
		// A preview: the files' Salt calls answered by the stubs.
		stubs, err := ruletest.LoadStubs(d.opts.Stubs)
		if err != nil {
			return configErr(fmt.Errorf("--stubs: %w", err))
		}
		sc.Caller, sc.CacheFor = stubs, -1
	}
	d.saltCalls = sc
	reactor.RegisterDriverMetrics(d.reg, drv)
	if p, ok := drv.(actions.Prober); ok && !d.opts.DryRun { // shadow mode: the driver of the Salt calls
		dp := &driverProbe{p: p, name: drv.Name(), log: d.log, every: 30 * time.Second}
		dp.probe(d.runCtx)
		d.background(dp.run)
		d.addHealth("driver", dp.health)
	}
	if s, ok := drv.(interface{ Status() string }); ok && !d.opts.DryRun {
		d.addNote(func() string {
			if st := s.Status(); st != "" {
				return "driver " + drv.Name() + ": " + st
			}
			return ""
		})
	}
	return nil
}

// buildEngine loads the configuration (unless the caller did) and
// compiles its rules. Reaction files that do not load refuse the start
// with every problem, unless --start-broken.
func (d *Daemon) buildEngine(context.Context) error {
	d.compiled = prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_reaction_files_compiled_total",
		Help: "Reaction files compiled (read and parsed): each once at start and at each reload, and once per change on disk."})
	d.reg.MustRegister(d.compiled)
	cfg := d.opts.Loaded
	if cfg == nil {
		var err error
		if cfg, err = config.Load(d.opts.Config); err != nil {
			return configErr(&LoadError{err})
		}
	}
	d.cfg = cfg
	for _, w := range TopologyWarnings(cfg, d.opts) {
		d.log.Warn("configuration topology needs a setting", "warning", w)
	}
	eng, err := d.loadEngine(cfg)
	if err != nil {
		return configErr(&LoadError{err})
	}
	d.eng = eng
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_reaction_files_broken",
		Help: "Reaction files that do not load (with --start-broken; without it they refuse the start and the reload), and those whose last change did not load, which react with their previous version."},
		func() float64 { return float64(len(d.brokenFiles())) }))
	d.addHealth("reaction files", func() error {
		broken := d.brokenFiles()
		if len(broken) == 0 {
			return nil
		}
		names := make([]string, 0, len(broken))
		for p := range broken {
			names = append(names, p)
		}
		sort.Strings(names)
		return fmt.Errorf("reaction files that do not load: %s (reactord check -c %s says why)", strings.Join(names, ", "), d.opts.Config)
	})
	return nil
}

// brokenFiles are the reaction files that do not load, as the running
// engine finds them now (before the pipeline runs: the start's engine).
func (d *Daemon) brokenFiles() map[string]error {
	if p := d.running.Load(); p != nil {
		return p.Engine().BrokenFiles()
	}
	return d.eng.BrokenFiles()
}

// loadEngine builds the engine of a configuration and checks it as
// `check` does, without an event, at start and on each reload: the check
// compiles the engine's own reaction files, so that a load compiles each
// file once. Reaction files that exist but do not load are an error
// listing each of their problems, unless --start-broken; every other
// problem (configuration warnings, files that match nothing, no rules at
// all) is logged, and the daemon runs with what loads.
//
// At start the driver that serves the files' Salt calls is not open yet:
// the pipeline's engine is built once it is, from the files this one
// compiled (startPipeline).
func (d *Daemon) loadEngine(cfg *config.Config) (*engine.Engine, error) {
	o := engine.Options{Renderer: d.opts.Renderer.Effective(d.opts.Jinja), SaltCalls: d.saltCalls, Log: d.log, Settle: d.opts.ReloadSettle}
	if c := d.compiled; c != nil {
		o.OnCompile = func(string) { c.Inc() }
	}
	eng, err := engine.New(cfg, o)
	if err != nil {
		return nil, err
	}
	rep := engine.CheckEngine(eng)
	if len(rep.Broken) > 0 && !d.opts.StartBroken {
		return nil, errors.Join(append(rep.Broken, fmt.Errorf("%d problem(s) in reaction files that do not load: fix them (reactord check -c %s lists every problem), or run with --start-broken to react with the files that load", len(rep.Broken), d.opts.Config))...)
	}
	d.logProblems(rep)
	return eng, nil
}

// logProblems logs each problem of a configuration taken (at start or on
// a reload).
func (d *Daemon) logProblems(rep engine.CheckReport) {
	for _, p := range rep.Problems {
		d.log.Warn("configuration problem (run reactord check -c CONF for all of them)", "problem", p.Error())
	}
}

// storeURL is the audit store's URL: --store, --store-file or
// $REACTORD_STORE as merged, else SQLite under the data directory.
func (d *Daemon) storeURL() (string, error) {
	u, err := SecretValue(d.opts.Store, "", d.opts.StoreFile)
	if err != nil {
		return "", fmt.Errorf("--store-file: %w", err)
	}
	if u == "" {
		u = sqliteStore(d.dataDir)
	}
	return u, nil
}

// openStore opens the audit store and its writer, and starts the purge.
// A database that does not answer does not stop the start: records wait
// in the disk spool.
func (d *Daemon) openStore(ctx context.Context) error {
	url, err := d.storeURL()
	if err != nil {
		return configErr(err)
	}
	if url == "none" {
		return nil
	}
	cuts := sqlstore.NewCuts(d.log)
	st, err := sqlstore.OpenWith(ctx, url, sqlstore.Options{Cuts: cuts})
	if errors.Is(err, sqlstore.ErrBadURL) {
		return configErr(fmt.Errorf("--store: %w", err))
	}
	if err != nil {
		// The database being down must not stop reactions: records
		// wait in the spool and the store is retried in the background.
		d.log.Error("audit store unreachable at start: reacting anyway", "err", err,
			"detail", "records wait in the disk spool until it answers")
		st = sqlstore.NewLazy(url, sqlstore.Options{Cuts: cuts})
	}
	d.push("audit store", func(context.Context) error { return st.Close() })
	spool := filepath.Join(d.dataDir, "store-spool")
	w, err := store.OpenWriter(st, store.WriterOptions{Logger: d.log, SpoolDir: spool, SpoolLimit: d.opts.StoreSpool})
	if err != nil {
		return configErr(err)
	}
	d.push("audit store writer", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, d.opts.DrainTimeout)
		defer cancel()
		switch err := w.Close(cctx); {
		case err == nil:
		case errors.Is(err, store.ErrSpooled):
			d.log.Warn("audit store did not answer before the drain timeout", "err", err.Error(),
				"detail", "records kept on disk, written at the next start")
		default:
			d.log.Error("audit store: records lost at exit", "err", err)
			return errors.Join(ErrUnfinished, err)
		}
		return nil
	})
	reactor.RegisterStoreMetrics(d.reg, w)
	for _, col := range sqlstore.CutColumns() {
		d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_values_cut_total",
			Help: "Values cut to the width of their audit store column (255), by table.column.", ConstLabels: prometheus.Labels{"column": col}},
			func() float64 { return float64(cuts.Count(col)) }))
	}
	d.archive = &reactor.Archive{W: w, KeepAll: d.opts.ArchiveAll, MasterID: d.opts.MasterID}
	if d.opts.ArchiveTags != "" {
		for _, g := range strings.Split(d.opts.ArchiveTags, ",") {
			d.archive.Tags = append(d.archive.Tags, matchers.Compile(strings.TrimSpace(g)))
		}
	}
	d.background(func(ctx context.Context) { d.purge(ctx, st) })
	d.log.Info("audit store open", "store", redact.URL(url), "keep_jobs", d.opts.KeepJobs.String(), "spool", spool)
	return nil
}

// purge deletes archived records older than --keep-jobs until ctx ends:
// every quarter of --keep-jobs, at least a minute and at most an hour
// apart, so that the store holds at most a quarter more than it keeps.
func (d *Daemon) purge(ctx context.Context, st store.Store) {
	t := time.NewTicker(purgeEvery(d.opts.KeepJobs))
	defer t.Stop()
	for {
		if n, err := st.Purge(ctx, time.Now().Add(-d.opts.KeepJobs)); err != nil && !errors.Is(err, sqlstore.ErrNotConnected) && ctx.Err() == nil {
			d.log.Error("audit store: purge failed", "err", err)
		} else if n > 0 {
			d.log.Info("audit store: purged old records", "rows", n, "keep_jobs", d.opts.KeepJobs.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openGuard makes the loop guard, loaded from the shared state bucket
// when --shared-state (what the other replicas, or this one before a
// restart, left) before any event is taken.
func (d *Daemon) openGuard(ctx context.Context) error {
	gopts := guard.Options{Settle: d.opts.Settle, JobTimeout: d.opts.JobTimeout, Disabled: d.opts.NoLoopGuard, Log: d.log}
	if d.jetstream {
		// The stream holds the events while a throttle waits for the
		// shared state through a NATS node's death (the bucket's leader
		// election takes a few seconds).
		gopts.SharedWait = sharedWaitJetStream
	}
	d.guard = guard.New(gopts)
	if !d.opts.SharedState {
		return nil
	}
	err := d.sharedRefused // a server too old: not asked
	if err == nil {
		err = d.attachSharedState(ctx, d.guard, sharedOpenTimeout)
	}
	var tooOld *natsbus.FeatureError
	switch {
	case err == nil:
		d.shared.Store(true)
	case errors.As(err, &tooOld):
		d.log.Warn("shared state unavailable: the guard's state stays in this process", "err", err.Error(),
			"detail", "the loop guard, throttle and debounce state is not shared with the replicas, and a restart loses it",
			"fix", "--shared-state=false says this is meant")
	case errors.Is(err, kv.ErrStateUnsupported):
		d.log.Warn("shared state unavailable: the guard's state stays in this process", "err", err,
			"detail", "the loop guard, throttle and debounce state is not shared with the replicas, and a restart loses it")
	default:
		// A cluster still electing, a bucket whose replicas cannot be
		// placed yet: keep trying in the background, and say so on
		// /healthz until it works.
		d.log.Warn("shared state not available yet: retrying in the background",
			"bucket", kv.DefaultStateBucket, "err", err,
			"detail", "the loop guard, throttle and debounce count in this replica alone until it is; /healthz answers 503 meanwhile",
			"fix", "check the NATS cluster's JetStream, e.g. nats server report jetstream")
		d.sharedErr.Store(&err)
		g := d.guard
		d.background(func(ctx context.Context) { d.retrySharedState(ctx, g) })
	}
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_shared_state_up",
		Help: "1 while the loop guard, throttle and debounce share their state with the other replicas (--shared-state)."},
		func() float64 { return b2f(d.shared.Load()) }))
	d.addHealth("shared state", func() error {
		if p := d.sharedErr.Load(); p != nil && !d.shared.Load() {
			return fmt.Errorf("shared state: not available, retrying: %w", *p)
		}
		return nil
	})
	return nil
}

// sharedOpenTimeout bounds one attempt to open the shared state bucket
// (the start waits for one, then goes on without it); attempts in the
// background come at most sharedRetryMax apart, so the bucket is shared
// within about half a minute of the cluster answering again.
const (
	sharedOpenTimeout = 10 * time.Second
	sharedRetryMax    = 20 * time.Second
)

// attachSharedState opens the shared state bucket, makes g share its
// state through it and loads what the bucket holds into g; the bucket's
// watch lasts until Stop.
func (d *Daemon) attachSharedState(ctx context.Context, g *guard.Guard, timeout time.Duration) error {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	state, err := kv.Open(lctx, d.conn, kv.StateOptions{Replicas: d.opts.StreamReplicas, Logger: d.log, Resend: guard.ResendShared})
	if err != nil {
		return err
	}
	g.AttachShared(state)
	if err := state.Watch(lctx, d.runCtx, func(e kv.StateEntry) { g.ApplyShared(e.Key, e.Value, e.Deleted) }); err != nil {
		return err
	}
	probe := newWriteProbe(state, d.log)
	d.background(probe.run)
	d.addHealth("JetStream writes", probe.health)
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_jetstream_writable",
		Help: "0 while the NATS server refuses the daemon's heartbeat writes (its disk full, a stream damaged); --shared-state only."},
		func() float64 { return b2f(!probe.failing.Load()) }))
	d.log.Info("shared state loaded", "bucket", kv.DefaultStateBucket,
		"detail", "the loop guard, throttle and debounce are the replicas' together")
	return nil
}

// retrySharedState tries to open the shared state bucket, with backoff,
// until it can or ctx ends (the daemon stops).
func (d *Daemon) retrySharedState(ctx context.Context, g *guard.Guard) {
	start := time.Now()
	b := retry.Backoff{Min: time.Second, Max: sharedRetryMax, Jitter: 0.5}
	for attempt := 0; ; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.Delay(attempt + 1)):
		}
		err := d.attachSharedState(ctx, g, sharedOpenTimeout)
		if err == nil {
			d.shared.Store(true)
			d.log.Info("shared state available again", "after", time.Since(start).Round(time.Second),
				"detail", "this replica's loop guard, throttle and debounce now share the others' state")
			return
		}
		d.sharedErr.Store(&err)
		d.log.Debug("shared state still not available", "err", err)
	}
}

// openCopies opens the multi-master copies bucket (--dedupe-masters).
func (d *Daemon) openCopies(ctx context.Context) error {
	if d.opts.DedupeMasters <= 0 {
		return nil
	}
	copies, err := kv.OpenCopies(ctx, d.conn, kv.CopiesOptions{Window: d.opts.DedupeMasters, Replicas: d.opts.StreamReplicas, WaitLog: d.log})
	if err != nil {
		return configErr(fmt.Errorf("--dedupe-masters: %w", err))
	}
	d.copyOf = func(ctx context.Context, tag string, raw []byte, seq uint64) (bool, error) {
		key, stamp, ok := bridge.CopyKey(tag, raw)
		if !ok {
			return false, nil // not fired by a master: nothing to match
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return copies.Claim(cctx, key, stamp, seq)
	}
	d.log.Info("multi-master: copies of one event from several masters react once", "window", d.opts.DedupeMasters.String())
	return nil
}

// b2f is 1 for true.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// purgeEvery is the time between purges of an archive kept for keep.
func purgeEvery(keep time.Duration) time.Duration {
	return min(time.Hour, max(time.Minute, keep/4))
}
