package daemon

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/kv"
	"github.com/reactord/reactord/reactor"
)

// Options are every setting of a daemon. Defaults returns them with their
// defaults; Flags binds them to a flag set, whose flags Merge then fills
// from the environment and the configuration's reactord: section. The
// fields below the flags (Stdout, Log, Registry, Hooks) are for programs
// that embed a daemon, such as the benchmark.
type Options struct {
	// Config is the reactor configuration: a file or a master.d directory.
	Config string
	// NATS is the connection to an outside NATS server; with no URL an
	// embedded server is started on Listen.
	NATS NATSOptions
	// Listen, ListenOpen and MaxPayload configure the embedded server.
	Listen     string
	ListenOpen bool
	MaxPayload int
	// DataDir holds the embedded server's JetStream data and token, the
	// SQLite store and the store spool (default: natsbus.DefaultDataDir).
	DataDir string
	// HTTP serves /metrics and /healthz on this address.
	HTTP string
	// Pprof also serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ on HTTP: a heap profile at two times tells what
	// memory grew, a goroutine dump what a stalled daemon waits for.
	Pprof bool
	// DryRun is Driver "dryrun".
	DryRun bool
	// Shadow runs shadow mode (reactord shadow): the pipeline runs as if
	// live and dispatches nothing; each decision is compared with the jobs
	// Salt's own reactor starts (package shadow). The configured driver
	// serves only the reaction files' read-only Salt calls.
	Shadow bool
	// ShadowWindow is how long after an event Salt's reactor's job may
	// start and still pair with reactord's decision (shadow mode).
	ShadowWindow time.Duration
	// ShadowSaltUser is the user the master runs as (its user: option):
	// the user of the local jobs Salt's reactor publishes (shadow mode).
	ShadowSaltUser string
	// SaltCalls is what reaction files may call while rendering
	// (--salt-calls: read-only, off, or function globs).
	SaltCalls string
	// Driver names the driver (default dryrun); Drivers configure them.
	Driver  string
	Drivers DriverOptions
	// JetStream consumes the event stream with a durable consumer; unset,
	// it is on with the embedded server and off with a NATS URL.
	JetStream AutoBool
	// Partitions splits the stream by minion (JetStream; 0: off).
	Partitions int
	// Workers is the number of ordered lanes (default 32 for the saltapi
	// and exec drivers, else the engine's); Queue the events per lane.
	Workers int
	Queue   int
	// InFlight is how many reactions' driver calls a lane may have in
	// flight (reactor.Options.InFlight; 1: one at a time; 0: by the
	// driver, 8 for those that wait for Salt, 1 for nats, dryrun, null).
	InFlight int
	// HandOverAfter is how long a lane waits for a driver call before it
	// hands it over (reactor.Options.HandOverAfter; 0: at once).
	HandOverAfter time.Duration
	// DrainTimeout bounds the drain on stop.
	DrainTimeout time.Duration
	// DeadLetter is the subject of reactions that failed for good.
	DeadLetter string
	// ParkedSubject receives events parked because the daemon kept dying
	// on them (JetStream).
	ParkedSubject string
	// AckWait, StreamReplicas, DedupeMasters and DedupeWindow configure
	// the JetStream stream and consumer.
	AckWait        time.Duration
	StreamReplicas int
	// JetStreamSync is how long the embedded server may keep an
	// acknowledged write before flushing it to disk; zero flushes each
	// write before acknowledging it.
	JetStreamSync time.Duration
	DedupeMasters time.Duration
	DedupeWindow  time.Duration
	// ReloadSettle is how long changed configuration files must stay
	// unchanged before they are reloaded.
	ReloadSettle time.Duration
	// Settle, JobTimeout, MaxHops, NoLoopGuard and SharedState configure
	// the loop guard (zero: the guard's defaults).
	Settle      time.Duration
	JobTimeout  time.Duration
	MaxHops     int
	NoLoopGuard bool
	SharedState bool
	// Store is the audit store URL ("none": off; default: SQLite under
	// DataDir); StoreFile a file holding it.
	Store      string
	StoreFile  string
	StoreSpool int64
	// KeepJobs is the archive's retention (default 24h).
	KeepJobs    time.Duration
	MasterID    string
	ArchiveAll  bool
	ArchiveTags string
	// LogLevel is a Salt log level name; Verbose is "debug".
	LogLevel string
	// LogFormat is "text" (the default: logfmt, key=value) or "json" (one
	// JSON object a line, for log shippers).
	LogFormat string
	Verbose   bool
	// Renderer is how reaction files without a shebang, or with Salt's
	// Jinja one, are read (config.Renderers; "" is auto). Jinja is the
	// older --jinja, the same as Renderer "jinja".
	Renderer RendererMode
	Jinja    bool
	// StartBroken starts the daemon even when reaction files do not load
	// (by default such a start is refused with every problem).
	StartBroken bool
	// Stubs, with DryRun, answers the reaction files' Salt calls from a
	// file of stubs (ruletest.LoadStubs) instead of the master.
	Stubs string

	// Loaded is the configuration Config names, when the caller loaded
	// it already (to merge its reactord: section); nil: New loads it.
	Loaded *config.Config
	// Hup, when set, delivers the reload signal (caught by the caller
	// before it read the configuration); nil: New catches SIGHUP.
	Hup <-chan os.Signal

	// Stdout receives the dryrun driver's lines (default: discarded).
	Stdout io.Writer
	// Log is the daemon's logger; nil builds one on Stderr at LogLevel.
	Log    *slog.Logger
	Stderr io.Writer
	// Registry receives the daemon's metrics; nil makes one.
	Registry *prometheus.Registry
	// Hooks observe the pipeline (the benchmark measures with them).
	Hooks Hooks
	// DriverOverride, when set, is the driver instead of the one Driver
	// names (tests, the benchmark).
	DriverOverride actions.Driver
}

// Hooks are called by the pipeline; each may be nil.
type Hooks struct {
	// OnDispatch is called after each dispatched reaction.
	OnDispatch func(d reactor.Delivery, a actions.Action, res actions.Result, err error)
	// OnDone is called after each event was fully handled.
	OnDone func(d reactor.Delivery)
}

// Flags registers a flag for every setting, its default the option's
// current value (Defaults: the value the daemon uses when nothing gives
// one). A setting decided at start shows as auto, its help saying what
// auto is.
func (o *Options) Flags(fs *flag.FlagSet) {
	fs.StringVar(&o.Config, "c", o.Config, "reactor configuration: a file or a master.d directory (required)")
	o.NATS.Flags(fs, "NATS URL(s) to connect to; empty: start an embedded server on --listen")
	fs.StringVar(&o.Listen, "listen", o.Listen, "address of the embedded NATS server")
	fs.BoolVar(&o.ListenOpen, "listen-open", o.ListenOpen, "run the embedded NATS server without authentication, so that any local user can read and publish events (false: clients need the token in DATA_DIR/"+natsbus.TokenFileName+")")
	fs.IntVar(&o.MaxPayload, "max-payload", o.MaxPayload, "largest message the embedded NATS server accepts, in bytes (NATS alone accepts 1 MB; a highstate return is often bigger)")
	stringAuto(fs, &o.DataDir, "data-dir", "data directory: the embedded server's JetStream, its token, the SQLite store and the store spool",
		"the user cache directory's reactord folder ($XDG_CACHE_HOME/reactord or ~/.cache/reactord); without a home directory, reactord-UID in the temporary directory; the packaged service gives "+natsbus.SystemDataDir+"")
	fs.StringVar(&o.HTTP, "http", o.HTTP, "serve /metrics and /healthz on this address")
	fs.BoolVar(&o.Pprof, "pprof", o.Pprof, "with --http, also serve Go's runtime profiles under /debug/pprof/ (heap, goroutines, CPU): what memory grew, what a stalled daemon waits for; they show the process's internals to whoever reaches --http")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "execute nothing; print each reaction as a JSON line (same as --driver dryrun); with --saltapi-url, reaction files' read-only Salt calls still run (--salt-calls off: not)")
	SaltCallsFlag(fs, &o.SaltCalls)
	fs.StringVar(&o.Driver, "driver", o.Driver, DriverUsage())
	fs.Var(autoBool{&o.JetStream}, "jetstream", autoHelp("consume a JetStream stream with a shared durable consumer (ack after dispatch; a burst waits on disk, nothing is dropped) instead of a core queue group, which drops what overflows the lanes",
		"true when the NATS server has JetStream, as the embedded server does; false, logged once, when it has none"))
	fs.IntVar(&o.Partitions, "partitions", o.Partitions, "JetStream: split the stream into this many partitions by minion, each handled by one replica at a time, so one minion's events are handled in order across replicas and through a replica's death (every replica must give the same number; about the number of replicas; 0: one shared consumer, no order across replicas; needs nats-server "+natsbus.FeaturePartitions.Min().String()+" or later, for its consumer reset: refused at start on an older one)")
	intAuto(fs, &o.Workers, "workers", "ordered worker lanes", workersAuto())
	fs.IntVar(&o.Queue, "queue", o.Queue, "events queued per lane")
	intAuto(fs, &o.InFlight, "in-flight", "reactions' driver calls a lane may have in flight: a call the driver has not answered once its request left (or within --hand-over-after) is handed over and the lane goes on with its minion's next event, calls beginning in the events' order (1: the lane waits for each call)",
		fmt.Sprintf("%d for the master, exec and saltapi drivers, which wait for Salt; 1 for the others, which answer at once", reactor.DefaultInFlight))
	fs.DurationVar(&o.HandOverAfter, "hand-over-after", o.HandOverAfter, "with --in-flight above 1: how long a lane waits for a call of a driver that does not say when its request was written (exec; the master driver's wheel reactions without its Salt engine) before handing it over and going on with its minion's next event; the master and saltapi drivers say so, and the lane waits for each call until its request is written, then goes on: one minion's calls overlap and still reach Salt in the events' order; 0 hands every call over at once, before its request was written, so two calls in flight may reach Salt in either order, as two reactions in the threads of Salt's reactor do; an event the loop guard may tie to a call in flight still waits for that call's job")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "how long SIGTERM waits for in-flight events")
	fs.StringVar(&o.DeadLetter, "dead-letter", o.DeadLetter, "subject receiving reactions that failed after retries")
	fs.StringVar(&o.ParkedSubject, "parked-subject", o.ParkedSubject, "JetStream: subject receiving an event the daemon died on three times while handling it, which is then acknowledged and not handled again (reactord_events_parked_total; the ledger says so)")
	fs.DurationVar(&o.AckWait, "ack-wait", o.AckWait, "JetStream: redeliver an event not acknowledged within this time (what a crashed daemon held comes back after it; longer work sends progress acknowledgements)")
	fs.DurationVar(&o.JetStreamSync, "jetstream-sync", o.JetStreamSync, "embedded server: how long JetStream may keep an acknowledged event before flushing it to disk (0: flush each write before acknowledging it, so an acknowledged event survives a power failure; NATS alone uses 2m, many times faster on slow disks, and loses up to that much acknowledged work when the machine crashes)")
	intAuto(fs, &o.StreamReplicas, "stream-replicas", "JetStream: servers of the NATS cluster that keep the event stream and the key-value buckets (a number given here or in the file is applied to an existing stream too, and logged)",
		"1 for a new stream; an existing stream keeps its own")
	fs.DurationVar(&o.DedupeMasters, "dedupe-masters", o.DedupeMasters, "JetStream: treat events with the same tag and data (but _stamp) whose masters stamped them at most this far apart as one, the first copy taken reacting (multi-master pairs, each with its bridge; e.g. 2s; 0: off)")
	fs.DurationVar(&o.DedupeWindow, "dedupe-window", o.DedupeWindow, "JetStream: the stream's duplicate window for the bridge's Nats-Msg-Id (one master emission); applied to an existing stream too")
	fs.DurationVar(&o.ReloadSettle, "reload-settle", o.ReloadSettle, "reload on a configuration file change once the files were unchanged this long; a changed reaction file is used once it was unchanged this long")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "loop guard: after a reaction's job returned on a minion, hold the reaction back from that minion's beacons this long")
	fs.DurationVar(&o.JobTimeout, "job-timeout", o.JobTimeout, "loop guard: stop waiting for a job's returns after this long")
	fs.IntVar(&o.MaxHops, "max-hops", o.MaxHops, "suppress events caused by reactions more than this many times in a row")
	stringAuto(fs, &o.Store, "store", "audit store: "+StoreUsage()+", or none",
		"sqlite under --data-dir")
	fs.StringVar(&o.StoreFile, "store-file", o.StoreFile, "file holding the --store URL, so its password stays out of ps (or $"+EnvName("store")+")")
	fs.Int64Var(&o.StoreSpool, "store-spool", o.StoreSpool, "bytes of disk the audit store's records may take under --data-dir while the database is down (JetStream acknowledges an event once its records are written or spooled)")
	fs.DurationVar(&o.KeepJobs, "keep-jobs", o.KeepJobs, "keep archived events, jobs and returns this long (Salt's keep_jobs)")
	fs.StringVar(&o.MasterID, "master-id", o.MasterID, "the Salt master's id (its id option): archived events carry it and runner and wheel jobs return under it, as in Salt's job cache")
	fs.BoolVar(&o.ArchiveAll, "archive-all", o.ArchiveAll, "also archive saltutil.find_job polling and Salt's legacy duplicate tags")
	fs.StringVar(&o.ArchiveTags, "archive-tags", o.ArchiveTags, "archive only events whose tag matches one of these comma-separated globs (job publishes and returns are always kept)")
	fs.BoolVar(&o.NoLoopGuard, "no-loop-guard", o.NoLoopGuard, "turn the job-linked loop guard off (throttle, debounce and the hop limit still apply)")
	fs.BoolVar(&o.SharedState, "shared-state", o.SharedState, "keep the loop guard's jobs, hop counts, throttle counts and debounces in a JetStream key-value bucket ("+kv.DefaultStateBucket+") that every replica shares and a restarted one reloads, in core mode too; false, or a NATS server without JetStream or older than "+natsbus.FeatureSharedState.Min().String()+" (no per-message TTLs; a warning names the versions): in this process's memory")
	o.Drivers.Flags(fs)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, LogLevelUsage())
	fs.BoolVar(&o.Verbose, "v", o.Verbose, "debug logging (--log-level debug)")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, LogFormatUsage())
	RendererFlags(fs, &o.Renderer, &o.Jinja)
	fs.StringVar(&o.Stubs, "stubs", o.Stubs, "with --dry-run: answer the reaction files' Salt calls from this file instead of the master (a reactord test file's stubs:, or a file of salt:, pillar:, grains: and opts:)")
	fs.BoolVar(&o.StartBroken, "start-broken", o.StartBroken, "start (and reload) even when reaction files do not load: each event they match fails, /healthz answers 503 naming them and reactord_reaction_files_broken counts their problems (false: refuse the start, or keep the previous configuration on a reload, printing every problem)")
}

// ShadowFlags registers the settings of shadow mode (reactord shadow),
// which `run` does not take.
func (o *Options) ShadowFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.ShadowWindow, "shadow-window", o.ShadowWindow, "how long after an event a job of Salt's reactor may start and still pair with reactord's decision for it (the master's _stamp on both)")
	fs.StringVar(&o.ShadowSaltUser, "salt-user", o.ShadowSaltUser, "the user the Salt master runs as (its user: option): Salt's reactor publishes local jobs as this user; runner and wheel jobs as Reactor")
}

// RendererFlags registers --renderer and the older --jinja on a command
// that loads reaction files.
func RendererFlags(fs *flag.FlagSet, mode *RendererMode, jinja *bool) {
	fs.Var(rendererFlag{mode}, "renderer", RendererUsage())
	fs.BoolVar(jinja, "jinja", *jinja, "the same as --renderer "+config.RendererJinja)
}

// rendererFlag registers a RendererMode so that the help shows its
// default.
type rendererFlag struct{ m *RendererMode }

func (r rendererFlag) String() string {
	switch {
	case r.m == nil:
		return ""
	case *r.m == "":
		return Auto
	}
	return r.m.String()
}

func (r rendererFlag) Set(s string) error { return r.m.Set(s) }

// RendererMode is the value of --renderer: one of config.Renderers.
type RendererMode string

// String returns the mode.
func (m *RendererMode) String() string { return string(*m) }

// Set accepts one of config.Renderers. auto, as every setting decided at
// start, is the zero value "": the configuration's renderer, else Salt's
// way (the engine's choice).
func (m *RendererMode) Set(s string) error {
	if !slices.Contains(config.Renderers, s) {
		return fmt.Errorf("want one of %s", strings.Join(config.Renderers, ", "))
	}
	if s == config.RendererAuto {
		s = ""
	}
	*m = RendererMode(s)
	return nil
}

// Effective is the mode a --renderer and a --jinja mean: --jinja (given on
// the command line or as $REACTORD_JINJA) is jinja whatever the renderer
// merged from the configuration; "" when neither was given: the
// configuration's.
func (m RendererMode) Effective(jinja bool) string {
	if jinja {
		return config.RendererJinja
	}
	return string(m)
}

// AutoBool is a boolean setting whose default depends on other settings:
// it remembers whether it was set.
type AutoBool struct {
	// Given is true once a value was given.
	Given bool
	// Value is the value given.
	Value bool
}

// On returns the value given, else def.
func (b AutoBool) On(def bool) bool {
	if b.Given {
		return b.Value
	}
	return def
}

// String implements flag.Value.
func (b *AutoBool) String() string {
	if b == nil || !b.Given {
		return "auto"
	}
	return strconv.FormatBool(b.Value)
}

// Set implements flag.Value.
func (b *AutoBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.Given, b.Value = true, v
	return nil
}

// IsBoolFlag makes --jetstream a flag without a value.
func (b *AutoBool) IsBoolFlag() bool { return true }

// Get implements flag.Getter.
func (b *AutoBool) Get() any { return b.Value }
