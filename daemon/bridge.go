package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/natsbus"
)

// BridgeOptions are the settings of `reactord bridge`, which publishes a
// Salt master's events to NATS.
type BridgeOptions struct {
	// NATS is the server to publish to; the bridge never starts one.
	NATS NATSOptions
	// SockDir is the master's sock_dir, holding master_event_pub.ipc,
	// read unless SaltAPI.URL is set.
	SockDir string
	// JobCache is the master's job cache (cachedir/jobs), read after a
	// reconnection to recover the job returns of the blind window; ""
	// turns that off.
	JobCache string
	// SaltAPI, when its URL is set, reads salt-api's /events instead.
	SaltAPI BridgeSaltAPI
	// DataDir holds the disk spool; "" is the user cache directory's
	// reactord-bridge folder.
	DataDir string
	// SpoolMemory and SpoolDisk bound the events held while NATS cannot
	// take them: in memory, then on disk under DataDir.
	SpoolMemory, SpoolDisk int64
	// HTTP, when set, serves /metrics and /healthz there.
	HTTP string
	// Pprof also serves Go's runtime profiles under /debug/pprof/ on
	// HTTP (Options.Pprof).
	Pprof bool

	// Registry receives the bridge's metrics; nil makes one.
	Registry *prometheus.Registry
	// Log receives the bridge's lines; nil discards them.
	Log *slog.Logger
	// LogLevel and LogFormat are what the command line asked of the
	// bridge's log (see Options); its caller builds Log from them.
	LogLevel, LogFormat string
}

// BridgeSaltAPI are the salt-api settings of the bridge's /events source.
type BridgeSaltAPI struct {
	URL, User, EAuth, CA   string
	Password, PasswordFile string
	Token, TokenFile       string
}

// DefaultBridgeOptions returns the bridge's defaults.
func DefaultBridgeOptions() BridgeOptions {
	return BridgeOptions{SockDir: bridge.DefaultSockDir, JobCache: bridge.DefaultJobCache, SaltAPI: BridgeSaltAPI{EAuth: "auto"},
		SpoolMemory: bridge.DefaultSpoolMemory, SpoolDisk: bridge.DefaultSpoolDisk, LogLevel: DefaultLogLevel, LogFormat: DefaultLogFormat}
}

// Flags registers the bridge's flags, with o's values as defaults.
func (o *BridgeOptions) Flags(fs *flag.FlagSet) {
	o.NATS.Flags(fs, "NATS URL(s) to publish to (default: $NATS_URL, else the embedded server of a local daemon: the address it recorded in ~/.cache/reactord or /var/lib/reactord, else "+DefaultNATSURL+")")
	fs.StringVar(&o.SockDir, "sock-dir", o.SockDir, "the master's sock_dir, holding master_event_pub.ipc")
	fs.StringVar(&o.JobCache, "job-cache", o.JobCache, "the master's job cache (cachedir/jobs), read after a reconnection to publish the job returns the bridge did not see (\"\": off)")
	fs.StringVar(&o.SaltAPI.URL, "saltapi-url", o.SaltAPI.URL, "read salt-api's /events at this base URL instead of the socket")
	fs.StringVar(&o.SaltAPI.User, "saltapi-user", o.SaltAPI.User, "eauth user (with --saltapi-url)")
	fs.StringVar(&o.SaltAPI.Password, "saltapi-password", o.SaltAPI.Password, "eauth password (shows in ps: prefer --saltapi-password-file or $"+EnvName("saltapi-password")+")")
	fs.StringVar(&o.SaltAPI.PasswordFile, "saltapi-password-file", o.SaltAPI.PasswordFile, "file holding the eauth password")
	fs.StringVar(&o.SaltAPI.EAuth, "saltapi-eauth", o.SaltAPI.EAuth, "eauth backend")
	fs.StringVar(&o.SaltAPI.Token, "saltapi-token", o.SaltAPI.Token, "session token from /login (shows in ps: prefer --saltapi-token-file or $"+EnvName("saltapi-token")+")")
	fs.StringVar(&o.SaltAPI.TokenFile, "saltapi-token-file", o.SaltAPI.TokenFile, "file holding the session token")
	fs.StringVar(&o.SaltAPI.CA, "saltapi-ca", o.SaltAPI.CA, "CA file for salt-api's certificate")
	stringAuto(fs, &o.DataDir, "data-dir", "directory of the disk spool", "the user cache directory's reactord-bridge folder")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, LogLevelUsage())
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, LogFormatUsage())
	fs.Int64Var(&o.SpoolMemory, "spool-memory", o.SpoolMemory, "bytes of events held in memory while NATS cannot take them")
	fs.Int64Var(&o.SpoolDisk, "spool-disk", o.SpoolDisk, "further bytes held on disk under --data-dir (0: no disk spool)")
	fs.StringVar(&o.HTTP, "http", o.HTTP, "serve /metrics and /healthz on this address")
	fs.BoolVar(&o.Pprof, "pprof", o.Pprof, "with --http, also serve Go's runtime profiles under /debug/pprof/ (heap, goroutines, CPU); they show the process's internals to whoever reaches --http")
}

// eventSource is what both bridges (the master's socket, salt-api's
// /events) offer.
type eventSource interface {
	Run(ctx context.Context) error
	Connected() bool
	Stats() *bridge.Stats
	Outbox() *bridge.Outbox
}

// Bridge is one running `reactord bridge`: a connection to NATS, a
// master's event bus as its source, and its HTTP endpoints, started and
// stopped as the daemon's parts are.
type Bridge struct {
	opts     BridgeOptions
	log      *slog.Logger
	reg      *prometheus.Registry
	conn     *natsbus.Conn
	src      eventSource
	httpAddr string

	lifecycle
}

// NewBridge starts the bridge's parts (its connection, its source and
// its HTTP endpoints) but not the reading of events, which Run does. On
// error every part started is taken down; errors.Is ErrConfig tells a
// setting's error from a part that could not start.
func NewBridge(ctx context.Context, o BridgeOptions) (*Bridge, error) {
	b := &Bridge{opts: o, log: o.Log, reg: o.Registry, lifecycle: newLifecycle()}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.reg == nil {
		b.reg = prometheus.NewRegistry()
	}
	if err := b.start(ctx, []part{
		{"settings", b.settle},
		{"NATS connection", b.connect},
		{"event source", b.openSource},
		{"HTTP endpoints", b.serveHTTP},
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// settle finds the NATS server, reads the secrets and fills in the data
// directory.
func (b *Bridge) settle(context.Context) error {
	o := &b.opts
	if o.Pprof && o.HTTP == "" {
		return configErr(errors.New("--pprof serves Go's profiles on --http: give --http ADDR too"))
	}
	// Like fire and events, the bridge finds the local daemon's embedded
	// server (which may listen elsewhere than its default address).
	where, ok := o.NATS.Find()
	if !ok {
		// No daemon has recorded its address (none started yet, or
		// under another user): the embedded server's default is where
		// one started later listens, unless --listen moves it.
		o.NATS.URL, where = DefaultNATSURL, "the embedded server's default address"
		b.log.Warn("no daemon has recorded its NATS address: using the default", "url", o.NATS.URL,
			"fix", "start the daemon before the bridge, or give --nats")
	}
	b.log.Info("publishing to NATS", "url", redact.URLs(o.NATS.URL), "from", where)
	var err error
	if o.SaltAPI.Password, err = SecretValue(o.SaltAPI.Password, EnvName("saltapi-password"), o.SaltAPI.PasswordFile); err != nil {
		return configErr(fmt.Errorf("--saltapi-password-file: %w", err))
	}
	if o.SaltAPI.Token, err = SecretValue(o.SaltAPI.Token, EnvName("saltapi-token"), o.SaltAPI.TokenFile); err != nil {
		return configErr(fmt.Errorf("--saltapi-token-file: %w", err))
	}
	if o.DataDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		o.DataDir = filepath.Join(base, "reactord-bridge")
	}
	return nil
}

// connect connects to NATS; publishes fail while it is down (the spool
// holds the events), and /healthz says so.
func (b *Bridge) connect(ctx context.Context) error {
	co, err := b.opts.NATS.ConnOptions("reactord-bridge")
	if err != nil {
		return configErr(err)
	}
	co.NoReconnectBuffer = true
	co.Logger = b.log
	conn, err := natsbus.Connect(co)
	if err != nil {
		return configErr(err)
	}
	b.conn = conn
	b.push("NATS connection", func(context.Context) error { conn.Close(); return nil })
	if s := conn.EventStream(ctx); s != "" {
		b.log.Info("publishing to JetStream", "stream", s, "max_payload", conn.MaxPayload())
	} else {
		b.log.Info("publishing with core NATS (no stream captures salt.evt.>)", "max_payload", conn.MaxPayload())
	}
	b.addHealth("NATS connection", func() error {
		if !conn.Connected() {
			return errors.New("NATS disconnected")
		}
		return nil
	})
	b.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_nats_connected", Help: "1 while the NATS connection is up."},
		func() float64 { return b2f(conn.Connected()) }))
	return nil
}

// openSource opens the master's event bus (or salt-api's /events) with
// its spool.
func (b *Bridge) openSource(context.Context) error {
	o := b.opts
	outCfg := bridge.OutboxConfig{Dir: o.DataDir, MemoryBytes: o.SpoolMemory, DiskBytes: o.SpoolDisk, Logger: b.log}
	if o.SaltAPI.URL != "" {
		s := o.SaltAPI
		src, err := bridge.New(bridge.Config{URL: s.URL, Token: s.Token, Username: s.User, Password: s.Password, EAuth: s.EAuth, CAFile: s.CA, Logger: b.log, Outbox: outCfg}, b.conn)
		if err != nil {
			return configErr(err)
		}
		b.src = src
	} else {
		src, err := bridge.NewMasterBus(bridge.MasterConfig{SockDir: o.SockDir, JobCache: o.JobCache, Logger: b.log, Outbox: outCfg}, b.conn)
		if err != nil {
			return configErr(err)
		}
		b.src = src
	}
	b.addHealth("event source", func() error {
		if !b.src.Connected() {
			return errors.New("not reading the event source (the master's socket or salt-api)")
		}
		return nil
	})
	b.addHealth("spool", func() error {
		if b.conn.Connected() && !b.src.Outbox().Healthy() {
			return errors.New("NATS refuses events")
		}
		return nil
	})
	registerBridgeMetrics(b.reg, b.src)
	return nil
}

// serveHTTP serves /metrics and /healthz on --http.
func (b *Bridge) serveHTTP(context.Context) error {
	if b.opts.HTTP == "" {
		return nil
	}
	var more func(*http.ServeMux)
	if b.opts.Pprof {
		more = ServePprof
	}
	addr, err := b.lifecycle.serveHTTP(b.opts.HTTP, b.reg, b.log, more)
	b.httpAddr = addr
	return err
}

// HTTPAddr returns the address /metrics and /healthz listen on; "" without
// --http.
func (b *Bridge) HTTPAddr() string { return b.httpAddr }

// Run reads the master's events and publishes them until ctx ends or the
// source fails for good, then stops the bridge's parts (Stop).
func (b *Bridge) Run(ctx context.Context) error {
	b.markReady()
	err := b.src.Run(ctx)
	return errors.Join(err, b.Stop(context.WithoutCancel(ctx)))
}

// Stop takes the bridge's parts down in the reverse of their start; it is
// safe after a partial start and returns the same error when called again.
func (b *Bridge) Stop(ctx context.Context) error { return b.stop(ctx) }

// Summary is what the bridge counted: events received, published,
// dropped, truncated, malformed, reconnections and events still held.
func (b *Bridge) Summary() map[string]int64 {
	st := b.src.Stats()
	mem, disk, _ := b.src.Outbox().Pending()
	return map[string]int64{"received": st.Received.Load(), "published": st.Published.Load(),
		"dropped": st.Dropped.Load(), "truncated": st.Truncated.Load(), "trimmed_by_salt": st.TrimmedBySalt.Load(), "malformed": st.Malformed.Load(),
		"reconnects": st.Reconnects.Load(), "recovered": st.Recovered.Load(), "held": int64(mem + disk)}
}

// registerBridgeMetrics exports the bridge's counters and the Go
// runtime's and the process's metrics (go_*, process_*).
func registerBridgeMetrics(reg *prometheus.Registry, src eventSource) {
	st := src.Stats()
	counter := func(name, help string, f func() int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter("reactord_bridge_events_received_total", "Events read from the master's bus.", st.Received.Load)
	counter("reactord_bridge_events_published_total", "Events NATS accepted.", st.Published.Load)
	counter("reactord_bridge_events_dropped_total", "Events dropped because the spool was full.", st.Dropped.Load)
	counter("reactord_bridge_events_unpublishable_total", "Events that could not be cut to fit the NATS max payload.", st.Unpublishable.Load)
	counter("reactord_events_truncated_total", "Events published with values cut to fit the NATS max payload.", st.Truncated.Load)
	counter("reactord_events_trimmed_by_salt_total", "Events that arrived with values the Salt master replaced with VALUE_TRIMMED (over its max_event_size).", st.TrimmedBySalt.Load)
	counter("reactord_bridge_malformed_total", "Events read but not understood (not a Salt event, invalid data).", st.Malformed.Load)
	counter("reactord_bridge_reconnects_total", "Reconnections to the event source (the master's bus, or salt-api's stream) after the first connection.", st.Reconnects.Load)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_bridge_blind_seconds_total",
		Help: "Time the native bridge spent disconnected from the master's bus after its first connection: events published then were not seen."},
		func() float64 { return float64(st.BlindNanos.Load()) / 1e9 }))
	counter("reactord_bridge_returns_recovered_total", "Job returns fired while the native bridge was disconnected, rebuilt from the master's job cache and published.", st.Recovered.Load)
	counter("reactord_bridge_publish_errors_total", "Failed publish attempts (each retried).", st.PublishErrors.Load)
	counter("reactord_bridge_spooled_total", "Events that went to the disk spool.", st.Spooled.Load)
	gauge("reactord_bridge_spool_events", "Events waiting for NATS, in memory and on disk.", func() float64 {
		m, d, _ := src.Outbox().Pending()
		return float64(m + d)
	})
	gauge("reactord_bridge_spool_bytes", "Bytes of events waiting for NATS.", func() float64 {
		_, _, b := src.Outbox().Pending()
		return float64(b)
	})
	gauge("reactord_bridge_source_connected", "1 while the bridge reads the master's bus.", func() float64 { return b2f(src.Connected()) })
	RegisterRuntimeMetrics(reg)
}
