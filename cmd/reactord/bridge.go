package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/reactor"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/natsbus"
)

// bridgeSource is what both bridges offer the command.
type bridgeSource interface {
	Run(ctx context.Context) error
	Stats() *bridge.Stats
	Outbox() *bridge.Outbox
}

func cmdBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bridge", "reactord bridge [--sock-dir DIR | --saltapi-url URL ...] [--nats URL] [--data-dir DIR] [--http ADDR]",
		`Publishes every event of a Salt master's event bus to NATS: to JetStream
(with a Nats-Msg-Id naming the master's emission, its tag, data and _stamp, so
a retried publish or a second bridge on the same master is stored once) when a
stream captures salt.evt.>, else with core NATS.

By default it reads the master's event publisher socket directly
(--sock-dir, Salt's sock_dir; master_event_pub.ipc), which needs no salt-api
and no credentials: run it on the master's host as the master's user. With
--saltapi-url it reads salt-api's /events stream instead, for masters on
other hosts.

It never makes the master wait: events NATS cannot take yet (NATS or the
daemon restarting) are held in a bounded spool, in memory, then on disk
under --data-dir, and published in order when NATS is back; past the bounds
they are dropped and counted. Events over the server's max payload are
published with their biggest values (the job return first) cut. Runs until
interrupted.`, stderr)
	var nf natsFlags
	// The bridge joins the daemon's server; it never starts one.
	nf.register(fs, "NATS URL(s) to publish to (the daemon's embedded server listens on 127.0.0.1:4222 by default)")
	natsFlag := fs.Lookup("nats")
	natsFlag.DefValue = "nats://127.0.0.1:4222"
	_ = natsFlag.Value.Set(natsFlag.DefValue)
	sockDir := fs.String("sock-dir", bridge.DefaultSockDir, "the master's sock_dir, holding master_event_pub.ipc")
	url := fs.String("saltapi-url", "", "read salt-api's /events at this base URL instead of the socket")
	aliasFlag(fs, "salt-api", "saltapi-url") // the former spelling, kept for one release
	user := fs.String("saltapi-user", "", "eauth user (with --saltapi-url)")
	pw := fs.String("saltapi-password", "", "eauth password (shows in ps: prefer --saltapi-password-file or $"+daemon.EnvName("saltapi-password")+")")
	pwFile := fs.String("saltapi-password-file", "", "file holding the eauth password")
	eauth := fs.String("saltapi-eauth", "auto", "eauth backend")
	token := fs.String("saltapi-token", "", "session token from /login (shows in ps: prefer --saltapi-token-file or $"+daemon.EnvName("saltapi-token")+")")
	tokenFile := fs.String("saltapi-token-file", "", "file holding the session token")
	ca := fs.String("saltapi-ca", "", "CA file for salt-api's certificate")
	dataDir := fs.String("data-dir", "", "directory of the disk spool; default: the user cache directory's reactord-bridge folder")
	spoolMem := fs.Int64("spool-memory", bridge.DefaultSpoolMemory, "bytes of events held in memory while NATS cannot take them")
	spoolDisk := fs.Int64("spool-disk", bridge.DefaultSpoolDisk, "further bytes held on disk under --data-dir (0: no disk spool)")
	httpAddr := fs.String("http", "", "serve /metrics and /healthz on this address")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if nf.URL == "" {
		fmt.Fprintln(stderr, "bridge: --nats must not be empty")
		return exitUsage
	}
	var err error
	if *pw, err = daemon.SecretValue(*pw, daemon.EnvName("saltapi-password"), *pwFile); err != nil {
		fmt.Fprintf(stderr, "bridge: --saltapi-password-file: %v\n", err)
		return exitUsage
	}
	if *token, err = daemon.SecretValue(*token, daemon.EnvName("saltapi-token"), *tokenFile); err != nil {
		fmt.Fprintf(stderr, "bridge: --saltapi-token-file: %v\n", err)
		return exitUsage
	}
	dir := *dataDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "reactord-bridge")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := nf.options("reactord-bridge")
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	opts.NoReconnectBuffer = true
	opts.Logger = log
	conn, err := natsbus.Connect(opts)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	defer conn.Close()
	if s := conn.EventStream(ctx); s != "" {
		log.Info("publishing to JetStream", "stream", s, "max_payload", conn.MaxPayload())
	} else {
		log.Info("publishing with core NATS (no stream captures salt.evt.>)", "max_payload", conn.MaxPayload())
	}
	outCfg := bridge.OutboxConfig{Dir: dir, MemoryBytes: *spoolMem, DiskBytes: *spoolDisk, Logger: log}
	var src bridgeSource
	var sourceUp func() bool
	if *url != "" {
		b, err := bridge.New(bridge.Config{URL: *url, Token: *token, Username: *user, Password: *pw, EAuth: *eauth, CAFile: *ca, Logger: log, Outbox: outCfg}, conn)
		if err != nil {
			fmt.Fprintf(stderr, "bridge: %v\n", err)
			return exitUsage
		}
		src, sourceUp = b, b.Connected
	} else {
		m, err := bridge.NewMasterBus(bridge.MasterConfig{SockDir: *sockDir, Logger: log, Outbox: outCfg}, conn)
		if err != nil {
			fmt.Fprintf(stderr, "bridge: %v\n", err)
			return exitUsage
		}
		src, sourceUp = m, m.Connected
	}
	if *httpAddr != "" {
		ln, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			fmt.Fprintf(stderr, "bridge: --http %s: %v\n", *httpAddr, err)
			return exitUsage
		}
		reg := prometheus.NewRegistry()
		registerBridgeMetrics(reg, src, conn, sourceUp)
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			var problems []string
			if !sourceUp() {
				problems = append(problems, "not reading the event source (the master's socket or salt-api)")
			}
			if !conn.Connected() {
				problems = append(problems, "NATS disconnected")
			} else if !src.Outbox().Healthy() {
				problems = append(problems, "NATS refuses events")
			}
			if len(problems) > 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				for _, p := range problems {
					fmt.Fprintln(w, p)
				}
				return
			}
			fmt.Fprintln(w, "ok")
		})
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		log.Info("serving metrics", "addr", ln.Addr().String())
	}
	err = src.Run(ctx)
	st := src.Stats()
	mem, disk, _ := src.Outbox().Pending()
	sum, _ := json.Marshal(map[string]int64{"received": st.Received.Load(), "published": st.Published.Load(),
		"dropped": st.Dropped.Load(), "truncated": st.Truncated.Load(), "malformed": st.Malformed.Load(),
		"reconnects": st.Reconnects.Load(), "held": int64(mem + disk)})
	fmt.Fprintf(stderr, "%s\n", sum)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// registerBridgeMetrics exports the bridge's counters, its build and the
// Go runtime's and the process's metrics (go_*, process_*).
func registerBridgeMetrics(reg *prometheus.Registry, src bridgeSource, conn *natsbus.Conn, sourceUp func() bool) {
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
	counter("reactord_bridge_malformed_total", "Events read but not understood (not a Salt event, invalid data).", st.Malformed.Load)
	counter("reactord_bridge_reconnects_total", "Reconnections to the master's bus.", st.Reconnects.Load)
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
	gauge("reactord_bridge_source_connected", "1 while the bridge reads the master's bus.", func() float64 { return b2f(sourceUp()) })
	gauge("reactord_nats_connected", "1 while the NATS connection is up.", func() float64 { return b2f(conn.Connected()) })
	registerBuildInfo(reg)
	reactor.RegisterRuntimeMetrics(reg)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
