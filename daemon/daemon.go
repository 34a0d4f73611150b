// Package daemon is reactord's process: it assembles the reactor from
// Options (embedded NATS, the connection, the driver, the audit store, the
// loop guard, the pipeline, the HTTP endpoints, the consumer), runs it
// until its context ends, reloads its configuration on SIGHUP and on file
// changes, and takes it down in the reverse order. `reactord run` and the
// benchmark (cmd/reactord-bench) both build their daemon here.
//
// New starts the parts in order, each stacking its teardown; a part that
// fails to start stops New with an error naming it, after the parts
// already started were taken down (Stop is safe after a partial start).
// See docs/architecture.md for what each part does when it fails later.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/internal/tasks"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/consume"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/reactions"
	"github.com/reactord/reactord/reactor"
)

// ErrConfig marks a start that failed on the configuration or a setting
// (an exit 2 of `reactord run`); the error joined with it says which.
var ErrConfig = errors.New("configuration")

// configErr marks err as a configuration or setting error (ErrConfig),
// its text unchanged.
func configErr(err error) error { return setupError{err} }

// setupError is an error that errors.Is ErrConfig.
type setupError struct{ err error }

func (e setupError) Error() string        { return e.err.Error() }
func (e setupError) Unwrap() error        { return e.err }
func (e setupError) Is(target error) bool { return target == ErrConfig }

// LoadError is a configuration that did not load or compile: its errors
// (joined) each name a file, line and column.
type LoadError struct{ Err error }

func (e *LoadError) Error() string { return e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// ErrUnfinished marks a stop that left work undone: events still in
// flight at the drain timeout, or audit records lost.
var ErrUnfinished = errors.New("stopped with work undone")

// Daemon is one running reactor.
type Daemon struct {
	opts Options
	log  *slog.Logger
	reg  *prometheus.Registry
	cfg  *config.Config

	// Settled settings.
	dataDir   string
	jetstream bool
	driver    string
	natsURL   string

	// Parts, set as New starts them.
	srv         *embedded.Server
	token       string
	conn        *natsbus.Conn
	drv         actions.Driver
	eng         *engine.Engine
	saltCalls   *reactions.SaltCalls
	rules       *ruleBook          // the running rules and their counts (/rules)
	compiled    prometheus.Counter // reaction files compiled
	metrics     *reactor.Metrics
	archive     *reactor.Archive
	guard       *guard.Guard
	copyOf      func(context.Context, string, []byte, uint64) (bool, error)
	pipe        *reactor.Reactor
	running     atomic.Pointer[reactor.Reactor] // pipe, once started, for metrics read meanwhile
	httpAddr    string
	sub         natsbus.Subscription
	partitioned *consume.Partitioned

	// runCtx bounds the background work of the parts (purge, the shared
	// state's watch, the consumers); cancel ends it at Stop.
	runCtx context.Context
	cancel context.CancelFunc
	// bg counts the parts' goroutines (background), which Stop waits for.
	bg tasks.Set

	// sharedRefused, when set, is why the NATS server is too old to keep
	// the shared state (natsbus.FeatureSharedState).
	sharedRefused error

	shared    atomic.Bool
	sharedErr atomic.Pointer[error] // the last failure to open it, until it opened

	hup <-chan os.Signal

	// The changes salt-run reactor.* made (rulechanges.go, manage.go):
	// their store, the current ones and their stored form; applyMu
	// orders the engine swaps of changes and reloads.
	ruleDoc    docStore
	changes    atomic.Pointer[ruleChanges]
	changesRaw []byte
	// changesRev is the bucket revision of the changes applied last: a
	// watched revision not above it is older than what this replica wrote.
	changesRev uint64
	applyMu    sync.Mutex
	mengine    *masterdriver.Engine

	// lifecycle holds the parts' teardowns and health checks.
	lifecycle
}

// New builds a daemon from o and starts its parts, except the consumer,
// which Run starts. On error every part started is taken down; errors.Is
// ErrConfig tells a setting's error from a part that could not start.
func New(ctx context.Context, o Options) (*Daemon, error) {
	d := &Daemon{opts: o, lifecycle: newLifecycle(), rules: newRuleBook(o.Config)}
	d.runCtx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.push("background work", func(ctx context.Context) error { d.stopBackground(ctx); return nil })
	if err := d.settle(); err != nil {
		d.cancel()
		return nil, configErr(err)
	}
	if err := d.start(ctx, d.startOrder()); err != nil {
		if d.stoppedWaiting(ctx, err) {
			return nil, fmt.Errorf("%w: %w", ErrStopped, err)
		}
		return nil, err
	}
	return d, nil
}

// background runs f in a goroutine of its own until runCtx ends; the stop
// waits for it (stopBackground). Once the stop began, f is not run.
func (d *Daemon) background(f func(ctx context.Context)) {
	ctx := d.runCtx
	d.bg.Go(func() { f(ctx) })
}

// stopBackground ends the parts' background work and waits for it, at most
// --drain-timeout: a goroutine still running then is logged, not waited for.
func (d *Daemon) stopBackground(ctx context.Context) {
	d.cancel()
	wait := d.opts.DrainTimeout
	if wait <= 0 {
		wait = DefaultDrainTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := d.bg.Close(wctx); err != nil && d.log != nil {
		d.log.Warn("background work did not stop", "timeout", wait.String(), "err", err)
	}
}

// ErrStopped is New's error when its context ended (the stop signal)
// while it waited for NATS to create a stream, a consumer or a bucket (a
// cluster forming): a clean stop, logged in one line ("stopped while
// waiting for ..."), not a failure.
var ErrStopped = errors.New("stopped while starting")

// stoppedWaiting tells whether err is a wait for JetStream
// (natsbus.WaitError) that ctx's end cut short, and if so logs it in
// one line.
func (d *Daemon) stoppedWaiting(ctx context.Context, err error) bool {
	var we *natsbus.WaitError
	if ctx.Err() == nil || !errors.As(err, &we) || !errors.Is(we.Cause, context.Cause(ctx)) {
		return false
	}
	d.log.Info("stopped while waiting for JetStream", "creating", we.What, "waited", we.Waited.Round(time.Millisecond).String(),
		"attempts", we.Attempts, "last_err", we.Last)
	return true
}

// startOrder lists the parts in start order.
func (d *Daemon) startOrder() []part {
	return []part{
		{"signals", d.startSignals},
		{"engine", d.buildEngine},
		{"data directory", d.openDataDir},
		{"embedded NATS server", d.startNATS},
		{"NATS connection", d.connect},
		{"driver", d.openDriver},
		{"audit store", d.openStore},
		{"loop guard", d.openGuard},
		{"multi-master copies", d.openCopies},
		{"salt-run reactor changes", d.openRuleChanges},
		{"HTTP endpoints", d.serveHTTP},
		{"pipeline", d.startPipeline},
		{"salt-run reactor requests", d.startManage},
	}
}

// settle applies the defaults that depend on other settings and refuses
// settings that contradict each other.
func (d *Daemon) settle() error {
	o := &d.opts
	if o.Config == "" {
		return errors.New("need -c CONF")
	}
	if o.Shadow && o.DryRun {
		return errors.New("reactord shadow dispatches nothing already: drop --dry-run (--driver serves the reaction files' read-only Salt calls)")
	}
	if o.Shadow && o.Partitions > 0 {
		return errors.New("reactord shadow pairs each decision with Salt's job in one process: --partitions would hand an event and its job to different replicas; run one shadow daemon, without --partitions")
	}
	if o.Shadow && o.ShadowWindow <= 0 {
		return fmt.Errorf("--shadow-window %s: want a positive duration", o.ShadowWindow)
	}
	if o.Stubs != "" && !o.DryRun && o.Driver != "dryrun" {
		return errors.New("--stubs answers Salt calls for a preview: give --dry-run too (a daemon that executes reactions asks the master)")
	}
	if o.DryRun && o.Driver != "" && o.Driver != "dryrun" {
		return fmt.Errorf("--dry-run executes nothing but --driver %s executes reactions: give one of them", o.Driver)
	}
	if o.Pprof && o.HTTP == "" {
		return errors.New("--pprof (or pprof:) serves Go's profiles on --http: give --http ADDR (or http:) too")
	}
	if o.Partitions < 0 || o.Partitions > 1024 {
		return fmt.Errorf("--partitions %d (or partitions:): want 0 to 1024", o.Partitions)
	}
	d.driver = o.Driver
	if o.DryRun || d.driver == "" {
		d.driver = DefaultDriver
	}
	if o.DriverOverride != nil {
		d.driver = o.DriverOverride.Name()
	}
	if o.Workers == 0 { // --workers auto
		o.Workers = reactor.DefaultLanes
		if slices.Contains(CallDrivers, d.driver) {
			o.Workers = CallLanes
		}
	}
	if o.JetStream.Given && !o.JetStream.Value {
		if err := needJetStream(o); err != nil {
			return err
		}
	}
	if o.LogLevel != "" {
		if _, err := config.ParseLogLevel(o.LogLevel); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
	}
	if err := CheckLogFormat(o.LogFormat); err != nil {
		return err
	}
	if o.KeepJobs == 0 {
		o.KeepJobs = DefaultKeepJobs
	}
	d.log = o.Log
	if d.log == nil {
		d.log = NewLogger(o.Stderr, o.LogLevel, o.LogFormat, o.Verbose)
	}
	d.reg = o.Registry
	if d.reg == nil {
		d.reg = prometheus.NewRegistry()
	}
	return nil
}

// NewLogger returns the daemon's logger on w (stderr when nil) at a Salt
// log level name, in format "text" (or "") or "json"; verbose is debug.
func NewLogger(w io.Writer, level, format string, verbose bool) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	lv, _ := config.ParseLogLevel(level) // New refuses a bad name; "" is info
	l := config.Settings{LogLevel: lv}.SlogLevel()
	if verbose {
		l = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// CheckLogFormat refuses a --log-format other than those of LogFormats
// ("" is the default).
func CheckLogFormat(format string) error {
	names := make([]string, 0, len(LogFormats))
	for _, f := range LogFormats {
		if f.Name == format || format == "" {
			return nil
		}
		names = append(names, f.Name)
	}
	return fmt.Errorf("--log-format %q: want %s", format, orList(names, "or"))
}

// Log returns the daemon's logger.
func (d *Daemon) Log() *slog.Logger { return d.log }

// Registry returns the registry holding the daemon's metrics.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// NATSURL returns the URL the daemon is connected to (the embedded
// server's when it started one).
func (d *Daemon) NATSURL() string { return d.natsURL }

// DataDir returns the daemon's data directory.
func (d *Daemon) DataDir() string { return d.dataDir }

// HTTPAddr returns the address /metrics and /healthz are served on, ""
// without --http.
func (d *Daemon) HTTPAddr() string { return d.httpAddr }

// SharedState reports whether the loop guard's state is the replicas'
// shared bucket (false: this process's memory).
func (d *Daemon) SharedState() bool { return d.shared.Load() }

// JetStream reports whether the daemon consumes the event stream.
func (d *Daemon) JetStream() bool { return d.jetstream }

// Run consumes events and reloads the configuration on SIGHUP and on file
// changes until ctx ends, then stops the daemon (Stop) and returns its
// error.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.subscribe(ctx); err != nil {
		stopErr := d.Stop(context.WithoutCancel(ctx))
		if d.stoppedWaiting(ctx, err) {
			return stopErr // a clean stop, before any event was taken
		}
		return err
	}
	d.markReady()
	mode := "core"
	if d.jetstream {
		mode = "jetstream"
	}
	if d.partitioned != nil {
		mode = fmt.Sprintf("jetstream, %d partitions", d.opts.Partitions)
	}
	d.log.Info("reactord ready", "nats", redact.URLs(d.natsURL), "mode", mode, "driver", d.drv.Name(), "rules", len(d.cfg.Rules))
	if d.opts.Shadow {
		d.log.Info("shadow mode: dispatching nothing, comparing with Salt's reactor",
			"detail", "each decision is compared with the jobs Salt's own reactor starts (reactord shadow report)", "window", d.opts.ShadowWindow.String(), "salt_user", d.opts.ShadowSaltUser, "salt_calls_driver", d.driver)
	}
	d.reloader().run(ctx, d.hup)
	d.log.Info("stopping: draining in-flight events", "timeout", d.opts.DrainTimeout.String())
	return d.Stop(context.WithoutCancel(ctx))
}

// Stop takes the parts down in the reverse of their start: the consumer
// stops taking events, the pipeline drains within the drain timeout, the
// driver, the store, the connection and the embedded server close. It is
// safe after a partial start and returns the same error when called
// again; errors.Is ErrUnfinished when events or records were left.
func (d *Daemon) Stop(ctx context.Context) error { return d.stop(ctx) }

// startSignals catches SIGHUP (reload) unless the caller passed its own
// channel, caught before the configuration was read.
func (d *Daemon) startSignals(context.Context) error {
	if d.opts.Hup != nil {
		d.hup = d.opts.Hup
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	d.hup = hup
	d.push("signals", func(context.Context) error { signal.Stop(hup); return nil })
	return nil
}
