package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/matchers"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/store"
)

const daemonSynopsis = "reactord -c CONF [--dry-run | --driver NAME] [--nats URL | --listen ADDR] [--jetstream] [--http ADDR]"

func cmdDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	// Catch SIGHUP from the start: its default action would end the
	// process if a reload arrived while it starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := newFlags("reactord", daemonSynopsis,
		`Runs the reactor: events arrive on NATS (subjects salt.evt.<tag>), match the
configuration's rules, and their reactions are executed by the driver. With no
--nats URL an embedded NATS server is started on --listen (JetStream data
under --data-dir). SIGHUP (or a change to a configuration file) reloads the
configuration, keeping the old one when the new one fails; SIGTERM drains
in-flight events within --drain-timeout.`, stderr)
	conf := fs.String("c", "", "reactor configuration: a file or a master.d directory (required)")
	var nf natsFlags
	nf.register(fs, "NATS URL(s) to connect to (default: the reactord: section's nats); empty: start an embedded server on --listen")
	listen := fs.String("listen", "127.0.0.1:4222", "address of the embedded NATS server")
	listenOpen := fs.Bool("listen-open", false, "run the embedded NATS server without authentication (default: clients need the token in DATA_DIR/"+natsbus.TokenFileName+"); any local user can then read and publish events")
	maxPayload := fs.Int("max-payload", natsbus.DefaultMaxPayload, "largest message the embedded NATS server accepts, in bytes (NATS's own default is 1 MB; a highstate return is often bigger)")
	dataDir := fs.String("data-dir", "", "data directory (embedded JetStream); default: the user cache directory's reactord folder")
	httpAddr := fs.String("http", "", "serve /metrics and /healthz on this address")
	dryRun := fs.Bool("dry-run", false, "execute nothing; print each reaction as a JSON line (same as --driver dryrun)")
	driverName := fs.String("driver", "", "driver: dryrun, saltapi, exec, nats, null (dispatches nothing: benchmarks) (default: the reactord: section's driver, else dryrun)")
	jetstream := fs.Bool("jetstream", false, "consume a JetStream stream with a shared durable consumer (ack after dispatch; a burst waits on disk, nothing is dropped) instead of a core queue group; default: true with the embedded server, false with --nats URL (--jetstream=false: core)")
	partitions := fs.Int("partitions", 0, "JetStream: split the stream into this many partitions by minion, each handled by one replica at a time, so one minion's events are handled in order across replicas and through a replica's death (every replica must give the same number; about the number of replicas; 0: one shared consumer, no order across replicas)")
	lanes := fs.Int("workers", 0, "ordered worker lanes (default: the reactord: section's workers, else 32 for the saltapi and exec drivers, 8 for the others)")
	queue := fs.Int("queue", 1024, "events queued per lane")
	drain := fs.Duration("drain-timeout", 10*time.Second, "how long SIGTERM waits for in-flight events")
	deadLetter := fs.String("dead-letter", "reactord.deadletter", "subject receiving reactions that failed after retries")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "JetStream: redeliver an event not acknowledged within this time")
	streamReplicas := fs.Int("stream-replicas", 0, "JetStream: servers of the NATS cluster that keep the event stream (default 1 for a new stream; a value given here or in the file is applied to an existing stream too, and logged)")
	dedupeMasters := fs.Duration("dedupe-masters", 0, "JetStream: treat events with the same tag and data (but _stamp) whose masters stamped them at most this far apart as one, the first copy taken reacting (multi-master pairs, each with its bridge; e.g. 2s; 0: off)")
	dedupeWindow := fs.Duration("dedupe-window", 2*time.Minute, "JetStream: the stream's duplicate window for the bridge's Nats-Msg-Id (one master emission); applied to an existing stream too")
	reloadSettle := fs.Duration("reload-settle", defaultReloadSettle, "reload on a configuration file change once the files were unchanged this long")
	settle := fs.Duration("settle", 0, "loop guard: after a reaction's job returned, hold the same reaction for its minions this long (default: the reactord: section's settle, else 5s)")
	jobTimeout := fs.Duration("job-timeout", 0, "loop guard: stop waiting for a job's returns after this long (default: job_timeout, else 5m)")
	maxHops := fs.Int("max-hops", 0, "suppress events caused by reactions more than this many times in a row (default: max_hops, else 3)")
	storeURL := fs.String("store", "", "audit store: sqlite:///path.db, mysql://..., postgres://..., or none (default: the reactord: section's store, else sqlite under --data-dir)")
	fs.String("store-file", "", "file holding the --store URL, so its password stays out of ps (or $REACTORD_STORE)")
	storeSpool := fs.Int64("store-spool", 1<<30, "bytes of disk the audit store's records may take under --data-dir while the database is down (JetStream acknowledges an event once its records are written or spooled)")
	keepJobs := fs.Duration("keep-jobs", 0, "keep archived events, jobs and returns this long (default: keep_jobs, else 24h, like Salt)")
	masterID := fs.String("master-id", store.DefaultMasterID(), "the Salt master's id (its id option): archived events carry it and runner and wheel jobs return under it, as in Salt's job cache")
	archiveAll := fs.Bool("archive-all", false, "also archive saltutil.find_job polling and Salt's legacy duplicate tags")
	archiveTags := fs.String("archive-tags", "", "archive only events whose tag matches one of these comma-separated globs (job publishes and returns are always kept)")
	noGuard := fs.Bool("no-loop-guard", false, "turn the job-linked loop guard off (throttle, debounce and the hop limit still apply)")
	sharedState := fs.Bool("shared-state", true, "keep the loop guard's jobs, hop counts, throttle counts and debounces in a JetStream key-value bucket (REACTORD_GUARD) that every replica shares and a restarted one reloads, in core mode too; false, or a NATS server without JetStream 2.11+: in this process's memory")
	var df driverFlags
	df.register(fs)
	verbose := fs.Bool("v", false, "debug logging")
	jinja := jinjaFlag(fs)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *conf == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "reactord: need -c CONF")
		fs.Usage()
		return exitUsage
	}
	if *dryRun && *driverName != "" && *driverName != "dryrun" {
		fmt.Fprintf(stderr, "reactord: --dry-run executes nothing but --driver %s executes reactions: give one of them\n", *driverName)
		return exitUsage
	}
	cfg, err := config.Load(*conf)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	// The reactord: section sets the flags the command line did not.
	if err := applyFileSettings(fs, cfg.Settings.Flags); err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	if *partitions < 0 || *partitions > 1024 {
		fmt.Fprintf(stderr, "reactord: --partitions %d (or partitions:): want 0 to 1024\n", *partitions)
		return exitUsage
	}
	// The embedded server has JetStream and a disk: by default its events
	// go through the stream, so that a burst waits there instead of
	// overflowing the lanes.
	if _, inFile := cfg.Settings.Flags["jetstream"]; !inFile && !flagGiven(fs, "jetstream") && nf.url == "" && cfg.Settings.NATS == "" {
		*jetstream = true
	}
	cfg.Settings.Jinja = cfg.Settings.Jinja || *jinja
	level := cfg.Settings.SlogLevel()
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	logProblems(log, *conf, cfg.Settings.Jinja)
	if *driverName == "" {
		*driverName = cfg.Settings.Driver
	}
	if *dryRun {
		*driverName = "dryrun"
	}
	if *driverName == "" {
		*driverName = "dryrun"
	}
	if nf.url == "" {
		nf.url = cfg.Settings.NATS
	}
	if *lanes == 0 {
		*lanes = cfg.Settings.Workers
	}
	if *lanes == 0 && (*driverName == "saltapi" || *driverName == "exec") {
		// A lane waits for its reaction's call; the drivers batch and merge
		// only what waits, so give them more lanes than request slots.
		*lanes = 32
	}

	dir := *dataDir
	if dir == "" {
		dir = cfg.Settings.DataDir
	}
	if dir == "" {
		// The clients look for the NATS token in the same place.
		dir = natsbus.DefaultDataDir()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		fmt.Fprintf(stderr, "reactord: --data-dir: %v\n", err)
		return exitUsage
	}
	// NATS: embedded or external.
	var srv *natsbus.Embedded
	var embeddedToken string
	if nf.url == "" {
		srv, embeddedToken, err = startEmbedded(log, natsbus.ServerOptions{Listen: *listen, DataDir: filepath.Join(dir, "jetstream"), ListenFlag: "--listen", MaxPayload: *maxPayload}, dir, *listenOpen)
		if err != nil {
			fmt.Fprintf(stderr, "reactord: %v\n", err)
			return exitUsage
		}
		defer srv.Shutdown()
		nf.url = srv.ClientURL()
		log.Info("embedded NATS server started", "url", nf.url, "data_dir", dir)
	} else if *listenOpen {
		log.Warn("--listen-open applies to the embedded server only; ignored with --nats")
	}
	copts, err := nf.options("reactord", dir)
	if err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	if srv != nil {
		copts = natsbus.ConnOptions{URL: nf.url, Name: "reactord", Token: embeddedToken}
	}
	copts.Logger = log
	reg := prometheus.NewRegistry()
	registerBuildInfo(reg)
	metrics := engine.NewMetrics(reg)
	copts.SlowConsumer = func(n int64) { metrics.Dropped.WithLabelValues(engine.DropSlowConsumer).Add(float64(n)) }
	conn, err := natsbus.Connect(copts)
	if err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	defer conn.Close()

	drv, err := df.driver(*driverName, stdout, conn)
	if err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	engine.RegisterDriverMetrics(reg, drv)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_nats_connected", Help: "1 while the NATS connection is up."},
		func() float64 { return b2f(conn.Connected()) }))
	eng, err := engine.New(cfg, log)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	if *settle == 0 {
		*settle = cfg.Settings.Settle
	}
	if *jobTimeout == 0 {
		*jobTimeout = cfg.Settings.JobTimeout
	}
	if *maxHops == 0 {
		*maxHops = cfg.Settings.MaxHops
	}
	// The audit store.
	if *storeURL, err = secretValue(*storeURL, envStore, fs.Lookup("store-file").Value.String()); err != nil {
		fmt.Fprintf(stderr, "reactord: --store-file: %v\n", err)
		return exitUsage
	}
	if *storeURL == "" {
		if *storeURL, err = settingsStore(cfg.Settings); err != nil {
			fmt.Fprintf(stderr, "reactord: %v\n", err)
			return exitUsage
		}
	}
	if *storeURL == "" {
		*storeURL = "sqlite://" + filepath.Join(dir, "reactord.db")
	}
	if *keepJobs == 0 {
		*keepJobs = cfg.Settings.KeepJobs
	}
	if *keepJobs == 0 {
		*keepJobs = 24 * time.Hour
	}
	var archive *engine.Archive
	if *storeURL != "none" {
		var st store.Store
		st, err = store.Open(ctx, *storeURL)
		if errors.Is(err, store.ErrBadURL) {
			fmt.Fprintf(stderr, "reactord: --store: %v\n", err)
			return exitUsage
		}
		if err != nil {
			// The database being down must not stop reactions: records
			// wait in the spool and the store is retried in the background.
			log.Error("audit store unreachable at start; reacting anyway, records wait in the disk spool until it answers", "err", err)
			st = store.NewLazy(*storeURL)
		}
		defer st.Close()
		w, err := store.OpenWriter(st, store.WriterOptions{Logger: log, SpoolDir: filepath.Join(dir, "store-spool"), SpoolLimit: *storeSpool})
		if err != nil {
			fmt.Fprintf(stderr, "reactord: %v\n", err)
			return exitUsage
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), *drain)
			defer cancel()
			switch err := w.Close(cctx); {
			case err == nil:
			case errors.Is(err, store.ErrSpooled):
				log.Warn("audit store did not answer before the drain timeout: records kept on disk, written at the next start", "detail", err.Error())
			default:
				log.Error("audit store: records lost at exit", "err", err)
				if code == exitOK {
					code = exitFound
				}
			}
		}()
		engine.RegisterStoreMetrics(reg, w)
		store.SetCutLogger(log)
		for _, col := range store.CutColumns() {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_values_cut_total",
				Help: "Values cut to the width of their audit store column (255), by table.column.", ConstLabels: prometheus.Labels{"column": col}},
				func() float64 { return float64(store.ValuesCut(col)) }))
		}
		archive = &engine.Archive{W: w, KeepAll: *archiveAll, MasterID: *masterID}
		if *archiveTags != "" {
			for _, g := range strings.Split(*archiveTags, ",") {
				archive.Tags = append(archive.Tags, matchers.Compile(strings.TrimSpace(g)))
			}
		}
		go func() {
			t := time.NewTicker(time.Hour)
			defer t.Stop()
			for {
				if n, err := st.Purge(ctx, time.Now().Add(-*keepJobs)); err != nil && !errors.Is(err, store.ErrNotConnected) {
					log.Error("audit store: purge failed", "err", err)
				} else if n > 0 {
					log.Info("audit store: purged old records", "rows", n, "keep_jobs", keepJobs.String())
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
		log.Info("audit store open", "store", redact.URLs(*storeURL), "keep_jobs", keepJobs.String(), "spool", filepath.Join(dir, "store-spool"))
	}
	gopts := engine.GuardOptions{Settle: *settle, JobTimeout: *jobTimeout, Disabled: *noGuard, Log: log}
	if *jetstream {
		// The stream holds the events while a throttle waits for the
		// shared state through a NATS node's death (the bucket's leader
		// election takes a few seconds).
		gopts.SharedWait = sharedWaitJetStream
	}
	guard := engine.NewGuard(gopts)
	stateCtx, stateCancel := context.WithCancel(context.Background())
	defer stateCancel()
	if *sharedState {
		// Load what the other replicas (or this one before a restart)
		// left before taking events.
		var shared *engine.Guard
		shared, err = loadSharedState(ctx, stateCtx, conn, gopts, *streamReplicas, log)
		if err != nil {
			log.Warn("shared state unavailable: the loop guard, throttle and debounce state stays in this process (replicas do not share it, a restart loses it)", "err", err)
		} else {
			guard = shared
		}
	}
	if *partitions > 0 && !*jetstream {
		fmt.Fprintln(stderr, "reactord: --partitions needs --jetstream (core NATS queue groups cannot keep a minion's events in order across replicas)")
		return exitUsage
	}
	var copyOf func(context.Context, string, []byte, uint64) (bool, error)
	if *dedupeMasters > 0 {
		if !*jetstream {
			fmt.Fprintln(stderr, "reactord: --dedupe-masters needs --jetstream (the copies are told apart through a JetStream key-value bucket)")
			return exitUsage
		}
		copies, err := conn.Copies(ctx, natsbus.CopiesOptions{Window: *dedupeMasters, Replicas: *streamReplicas})
		if err != nil {
			fmt.Fprintf(stderr, "reactord: --dedupe-masters: %v\n", err)
			return exitUsage
		}
		copyOf = func(ctx context.Context, tag string, raw []byte, seq uint64) (bool, error) {
			key, stamp, ok := bridge.CopyKey(tag, raw)
			if !ok {
				return false, nil // not fired by a master: nothing to match
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return copies.Claim(cctx, key, stamp, seq)
		}
		log.Info("multi-master: copies of one event from several masters react once", "window", dedupeMasters.String())
	}
	d, err := engine.NewDaemon(eng, engine.DaemonOptions{
		Driver: drv, Lanes: *lanes, QueueSize: *queue, Block: *jetstream, Log: log, Metrics: metrics, Guard: guard, MaxHops: *maxHops, Archive: archive,
		DeadLetter: func(a actions.Action, cause error) { conn.DeadLetter(*deadLetter, a, cause) }, Copy: copyOf,
	})
	if err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.Start(runCtx)

	var ready atomic.Bool
	var jsc atomic.Pointer[natsbus.Consumer]
	var parts *natsbus.Partitioned
	var partsHealth atomic.Pointer[natsbus.Partitioned]
	if *httpAddr != "" {
		ln, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			fmt.Fprintf(stderr, "reactord: --http %s: %v\n", *httpAddr, err)
			return exitUsage
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			if !conn.Connected() {
				http.Error(w, "NATS disconnected", http.StatusServiceUnavailable)
				return
			}
			if c := jsc.Load(); c != nil && !c.Healthy() {
				http.Error(w, "JetStream stream or consumer missing (being recreated)", http.StatusServiceUnavailable)
				return
			}
			if p := partsHealth.Load(); p != nil {
				if err := p.Health(); err != nil {
					http.Error(w, "partitions: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			fmt.Fprintln(w, "ok")
		})
		// The store is a separate check: reactions go on while it is down
		// (records wait in the spool), so it does not fail /healthz.
		mux.HandleFunc("/healthz/store", func(w http.ResponseWriter, _ *http.Request) {
			if archive == nil {
				fmt.Fprintln(w, "no store")
				return
			}
			if since := archive.W.DownSince(); !since.IsZero() {
				st := archive.W.Stats()
				http.Error(w, fmt.Sprintf("audit store failing for %s; %d records in memory, %d in the disk spool", time.Since(since).Round(time.Second), st.Pending, st.Spooled), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		log.Info("serving metrics", "addr", ln.Addr().String())
	}

	var sub natsbus.Subscription
	handler := func(m *natsbus.Message) {
		dl := engine.Delivery{Body: m.Body, Received: m.Received, Sent: m.Meta.Sent, Hop: m.Meta.Hop, Seq: m.Seq, MsgID: m.Meta.MsgID}
		if *jetstream {
			dl.Done = func() { _ = m.Ack() }
			dl.Nak = func() { _ = m.Nak() }
		}
		if *jetstream && *partitions > 0 {
			dl.Moved = m.Moved
		}
		if !d.Submit(runCtx, dl) && *jetstream {
			_ = m.Nak()
		}
	}
	if *jetstream && *partitions > 0 {
		parts, err = consumePartitioned(runCtx, conn, natsbus.StreamOptions{AckWait: *ackWait, MaxAckPending: maxAckPending(*queue, *lanes), Duplicates: *dedupeWindow,
			Replicas: *streamReplicas, Logger: log}, *partitions, reg, handler)
		if err == nil {
			sub = parts
			partsHealth.Store(parts)
		}
	} else if *jetstream {
		// An event is acknowledged once dispatched and its archive
		// records are durable, a batch of the store's writer later: leave
		// room for the events in the lanes, the client's pull buffer
		// (1024) and those waiting for a write (about a batch). Progress
		// acknowledgements keep a backlog (and debounced events) from
		// being redelivered to another replica while this one lives.
		var c *natsbus.Consumer
		c, err = conn.Consume(runCtx, natsbus.StreamOptions{AckWait: *ackWait, MaxAckPending: maxAckPending(*queue, *lanes), Duplicates: *dedupeWindow,
			Replicas: *streamReplicas, Progress: true, Logger: log}, handler)
		if err == nil {
			sub = c
			jsc.Store(c)
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_jetstream_recreated_total", Help: "Times the JetStream stream or consumer was found missing and recreated."},
				func() float64 { return float64(c.Recreated()) }))
		}
	} else {
		sub, err = conn.SubscribeQueue("", "reactord", handler)
	}
	if err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	if err := conn.Flush(runCtx); err != nil {
		fmt.Fprintf(stderr, "reactord: %v\n", err)
		return exitUsage
	}
	ready.Store(true)
	mode := "core"
	if *jetstream {
		mode = "jetstream"
	}
	if parts != nil {
		mode = fmt.Sprintf("jetstream, %d partitions", *partitions)
	}
	log.Info("reactord ready", "nats", redact.URLs(nf.url), "mode", mode, "driver", drv.Name(), "rules", len(cfg.Rules))

	newReloader(*conf, cfg, *reloadSettle, log, func(ncfg *config.Config) error {
		ncfg.Settings.Jinja = cfg.Settings.Jinja // the reactord: section is read at start
		neng, err := engine.New(ncfg, log)
		if err != nil {
			return err
		}
		if err := d.Reload(neng); err != nil {
			return err
		}
		logProblems(log, *conf, cfg.Settings.Jinja)
		return nil
	}, func(ok bool) { metrics.ReloadOK.Set(b2f(ok)) }).run(ctx, hup)
	log.Info("stopping: draining in-flight events", "timeout", drain.String())
	ready.Store(false)
	sub.Stop()
	sctx, scancel := context.WithTimeout(context.Background(), *drain)
	defer scancel()
	err = d.Stop(sctx)
	if parts != nil {
		// The drained events are acknowledged: hand the partitions over
		// to the other replicas at once.
		parts.Release(sctx)
	}
	if err != nil {
		log.Error("drain incomplete", "err", err)
		return exitFound
	}
	return exitOK
}

// consumePartitioned consumes the stream in partitions by minion (the key
// of the daemon's lanes) and registers the ownership metrics.
func consumePartitioned(ctx context.Context, conn *natsbus.Conn, so natsbus.StreamOptions, n int, reg prometheus.Registerer, handler func(*natsbus.Message)) (*natsbus.Partitioned, error) {
	changes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_partition_changes_total",
		Help: "Changes of partition ownership in this replica: acquired, released (handed over), lost (lease not renewed), resync (reset to the acknowledgement floor)."}, []string{"change"})
	for _, c := range []string{"acquired", "released", "lost", "resync"} {
		changes.WithLabelValues(c)
	}
	reg.MustRegister(changes)
	p, err := conn.ConsumePartitioned(ctx, natsbus.PartitionOptions{StreamOptions: so, Partitions: n, Key: engine.OrderKey,
		OnChange: func(change string, _ int) { changes.WithLabelValues(change).Inc() }}, handler)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_partitions_owned", Help: "Partitions of the event stream this replica holds (--partitions)."},
		func() float64 { return float64(len(p.Owned())) }))
	return p, nil
}

// loadSharedState opens the shared state bucket and returns a guard
// backed by it, loaded with what the bucket holds; run bounds the
// bucket's watch.
func loadSharedState(ctx, run context.Context, conn *natsbus.Conn, o engine.GuardOptions, replicas int, log *slog.Logger) (*engine.Guard, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	state, err := conn.State(lctx, natsbus.StateOptions{Replicas: replicas, Logger: log, Resend: engine.ResendShared})
	if err != nil {
		return nil, err
	}
	o.Shared = state
	g := engine.NewGuard(o)
	wctx, stop := context.WithCancel(run)
	if err := state.Watch(lctx, wctx, func(e natsbus.StateEntry) { g.ApplyShared(e.Key, e.Value, e.Deleted) }); err != nil {
		stop()
		return nil, err
	}
	context.AfterFunc(run, stop)
	log.Info("shared state loaded: the loop guard, throttle and debounce are the replicas' together", "bucket", "REACTORD_GUARD")
	return g, nil
}

// driverFlags configure the drivers.
type driverFlags struct {
	execPrefix string
	// salt-api
	apiURL, apiUser, apiPassword, apiEAuth, apiToken, apiCA string
	apiPasswordFile, apiTokenFile                           string
	apiInsecure                                             bool
	// salt CLIs
	saltBin, saltRunBin, saltCallBin string
	execTimeout, killGrace           time.Duration
	saltConfigDir                    string
	// concurrency
	apiMaxInFlight, apiMaxBatch int
	apiMaxMerge                 int
	execMaxProcs, execCoalesce  int
}

func (f *driverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.execPrefix, "exec-subject", natsbus.DefaultExecPrefix, "nats driver: subject prefix reactions are published under (<prefix><state>)")
	fs.StringVar(&f.apiURL, "saltapi-url", "", "saltapi driver: salt-api base URL")
	fs.StringVar(&f.apiUser, "saltapi-user", "", "saltapi driver: eauth user")
	fs.StringVar(&f.apiPassword, "saltapi-password", "", "saltapi driver: eauth password (shows in ps: prefer --saltapi-password-file or $"+envSaltAPIPassword+")")
	fs.StringVar(&f.apiPasswordFile, "saltapi-password-file", "", "saltapi driver: file holding the eauth password")
	fs.StringVar(&f.apiEAuth, "saltapi-eauth", "auto", "saltapi driver: eauth backend")
	fs.StringVar(&f.apiToken, "saltapi-token", "", "saltapi driver: a session token from /login (shows in ps: prefer --saltapi-token-file or $"+envSaltAPIToken+")")
	fs.StringVar(&f.apiTokenFile, "saltapi-token-file", "", "saltapi driver: file holding the session token")
	fs.StringVar(&f.apiCA, "saltapi-ca", "", "saltapi driver: CA file for salt-api's certificate")
	fs.BoolVar(&f.apiInsecure, "saltapi-insecure", false, "saltapi driver: do not verify salt-api's certificate (tests only)")
	fs.StringVar(&f.saltBin, "salt-bin", "salt", "exec driver: the salt program")
	fs.StringVar(&f.saltRunBin, "salt-run-bin", "salt-run", "exec driver: the salt-run program")
	fs.StringVar(&f.saltCallBin, "salt-call-bin", "salt-call", "exec driver: the salt-call program (also runs caller reactions for saltapi)")
	fs.DurationVar(&f.execTimeout, "exec-timeout", 30*time.Second, "exec driver: timeout of one command")
	fs.DurationVar(&f.killGrace, "exec-kill-grace", 5*time.Second, "exec driver: SIGTERM to SIGKILL grace")
	fs.StringVar(&f.saltConfigDir, "salt-config-dir", "", "exec driver: pass -c DIR to the salt programs")
	fs.IntVar(&f.apiMaxInFlight, "saltapi-max-in-flight", saltapi.DefaultMaxInFlight, "saltapi driver: requests to salt-api at once")
	fs.IntVar(&f.apiMaxBatch, "saltapi-max-batch", saltapi.DefaultMaxBatch, "saltapi driver: reactions waiting for a request slot are sent together, up to this many in one POST (1: never)")
	fs.IntVar(&f.apiMaxMerge, "saltapi-merge", saltapi.DefaultMaxMerge, "saltapi driver: waiting local reactions that differ only in their literal minion target become one job with a list target, up to this many (1: never)")
	fs.IntVar(&f.execMaxProcs, "exec-max-procs", 0, "exec driver: salt/salt-run programs running at once (default: the CPU count, 2 to 8)")
	fs.IntVar(&f.execCoalesce, "exec-coalesce", execdriver.DefaultMaxCoalesce, "exec driver: waiting local reactions that differ only in their literal minion target share one salt -L run, up to this many (1: never)")
}

var errUnknownDriver = errors.New("unknown driver")

func (f *driverFlags) exec() (*execdriver.Driver, error) {
	cfg := execdriver.Config{Salt: f.saltBin, SaltRun: f.saltRunBin, SaltCall: f.saltCallBin, Timeout: f.execTimeout, KillGrace: f.killGrace,
		MaxProcs: f.execMaxProcs, MaxCoalesce: f.execCoalesce}
	if f.saltConfigDir != "" {
		cfg.ExtraArgs = []string{"-c", f.saltConfigDir}
	}
	return execdriver.New(cfg)
}

func (f *driverFlags) driver(name string, stdout io.Writer, conn *natsbus.Conn) (actions.Driver, error) {
	switch name {
	case "dryrun":
		return actions.NewDryRun(stdout), nil
	case "null":
		return actions.Null{}, nil
	case "nats":
		return natsbus.NewDriver(conn, f.execPrefix, fmt.Sprintf("reactord-%d", os.Getpid())), nil
	case "exec":
		return f.exec()
	case "saltapi":
		pw, err := secretValue(f.apiPassword, envSaltAPIPassword, f.apiPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--saltapi-password-file: %w", err)
		}
		tok, err := secretValue(f.apiToken, envSaltAPIToken, f.apiTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--saltapi-token-file: %w", err)
		}
		api, err := saltapi.New(saltapi.Config{URL: f.apiURL, Username: f.apiUser, Password: pw, EAuth: f.apiEAuth, Token: tok, CAFile: f.apiCA, InsecureSkipVerify: f.apiInsecure,
			MaxInFlight: f.apiMaxInFlight, MaxBatch: f.apiMaxBatch, MaxMerge: f.apiMaxMerge})
		if err != nil {
			return nil, fmt.Errorf("--driver saltapi: %w", err)
		}
		// salt-api cannot run caller reactions: salt-call runs them here.
		call, err := f.exec()
		if err != nil {
			return nil, err
		}
		if call.Supports("caller") {
			return actions.Router{Primary: api, Fallback: call}, nil
		}
		return api, nil
	}
	return nil, fmt.Errorf("--driver %q: %w (known: dryrun, saltapi, exec, nats, null)", name, errUnknownDriver)
}

// logProblems logs, at start and after each reload, every problem `check`
// would report without an event: configuration warnings, reaction files
// that do not load or match no file, no rules at all. The daemon runs with
// what loads; each of these lines says what does not.
func logProblems(log *slog.Logger, conf string, jinja bool) {
	for _, p := range engine.Check(conf, jinja).Problems {
		log.Warn("configuration problem (run reactord check -c CONF for all of them)", "problem", p.Error())
	}
}

// sharedWaitJetStream is how long, with JetStream, a throttle keeps asking
// a failing shared state before counting in its replica alone.
const sharedWaitJetStream = 15 * time.Second

// maxAckPending bounds the events a JetStream daemon holds unacknowledged:
// its lanes' queues, the client's pull buffer and a store batch's worth
// waiting to be durable. Only these can run twice after a crash.
func maxAckPending(queue, lanes int) int { return queue*lanes + 1024 + 1024 }

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}
