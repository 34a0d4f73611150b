// Package embedded runs the NATS server inside reactord: its default
// when no NATS URL is given, with JetStream and a token.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/reactord/reactord/internal/ratelog"
)

// Options configure the embedded NATS natsserver.
type Options struct {
	// Listen is host:port; port 0 or -1 picks a free port.
	Listen string
	// DataDir holds JetStream's storage; empty disables JetStream.
	DataDir string
	// ListenFlag names the flag that set Listen, for error messages.
	ListenFlag string
	// MaxPayload is the largest message the server accepts, in bytes
	// (default DefaultMaxPayload). A Salt job return is often larger than
	// NATS's own default of 1 MB.
	MaxPayload int
	// Token, when set, is required of every client (see EnsureToken);
	// empty leaves the server open to anyone who can reach its address.
	Token string
	// Name is the server's name (default reactord-embedded); the nodes
	// of a cluster need distinct names.
	Name string
	// Cluster, when set, makes the server a node of a NATS cluster.
	Cluster *ClusterOptions
	// SyncInterval is how long JetStream may keep an acknowledged write
	// before it flushes it to disk. Zero (the default) flushes every
	// write before acknowledging it, so that what the server acknowledged
	// survives a crash of the machine; NATS's own default is two minutes.
	SyncInterval time.Duration
	// Log, when set, receives the server's warnings and errors (each
	// kind at most once a minute); its notices go out at debug level.
	Log *slog.Logger
}

// ClusterOptions make the embedded server one node of a NATS cluster
// (reactord bench --cluster runs each node in a process of its own).
type ClusterOptions struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Listen is the host:port the node takes routes from the others on.
	Listen string
	// Routes are the nats-route:// URLs of the cluster's nodes (this
	// one's may be among them).
	Routes []string
	// NoAdvertise keeps the node from telling its clients the other
	// nodes' addresses: a client reconnects only to the URLs it was
	// given (reactord-bench soak's replicas, which reach the cluster
	// through proxies that cut the network).
	NoAdvertise bool
}

// DefaultMaxPayload is the embedded server's default message size limit:
// 8 MiB, the largest NATS recommends.
const DefaultMaxPayload = 8 << 20

// Server is an in-process NATS server. Restart replaces the NATS server
// inside it, so every use goes through current.
type Server struct {
	srv         atomic.Pointer[natsserver.Server]
	opts        *natsserver.Options // ours: each server gets a copy
	log         *serverLog
	writeFailed atomic.Bool

	mu     sync.Mutex // serializes Restart and Shutdown
	closed bool       // Shutdown was called; under mu
}

// current is the running NATS server.
func (e *Server) current() *natsserver.Server { return e.srv.Load() }

// ErrAddrInUse reports that the embedded server's address is taken.
var ErrAddrInUse = errors.New("address already in use")

// Start starts a NATS server in this process and waits until it
// accepts connections.
func Start(opts Options) (*Server, error) {
	host, portText, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flagName(opts), opts.Listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("%s %q: bad port", flagName(opts), opts.Listen)
	}
	if port > 0 {
		l, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w (is another NATS server running? pass --nats URL to use it, or choose another %s)", flagName(opts), opts.Listen, ErrAddrInUse, flagName(opts))
		}
		_ = l.Close()
	}
	if port == 0 {
		port = -1
	}
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = DefaultMaxPayload
	}
	if opts.MaxPayload > 64<<20 {
		return nil, fmt.Errorf("max payload %d exceeds NATS's hard limit of 64 MiB", opts.MaxPayload)
	}
	so := &natsserver.Options{
		MaxPayload: int32(opts.MaxPayload),
		// The pending buffer of a client must hold several messages of the
		// largest size.
		MaxPending: max(int64(opts.MaxPayload)*8, 64<<20),
		Host:       host,
		Port:       port,
		// The log is read for write errors (WriteFailed) even when it
		// goes nowhere.
		NoLog:      false,
		NoSigs:     true,
		JetStream:  opts.DataDir != "",
		StoreDir:   opts.DataDir,
		ServerName: cmp.Or(opts.Name, "reactord-embedded"),
		// Token authentication (empty: none).
		Authorization: opts.Token,
		SyncInterval:  opts.SyncInterval,
		SyncAlways:    opts.SyncInterval <= 0,
		// The server keeps a record of each closed connection for its
		// monitoring port's /connz, 10,000 by default: some MB that a
		// daemon filled over weeks of short connections (reactord fire
		// and events, a bridge's restarts, each client's reading of
		// the nodes' versions). The embedded server has no monitoring
		// port: the last few are kept.
		MaxClosedClients: maxClosedClients,
	}
	if c := opts.Cluster; c != nil {
		chost, cport, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return nil, fmt.Errorf("cluster listen %q: %w", c.Listen, err)
		}
		so.Cluster = natsserver.ClusterOpts{Name: c.Name, Host: chost, NoAdvertise: c.NoAdvertise}
		if so.Cluster.Port, err = strconv.Atoi(cport); err != nil {
			return nil, fmt.Errorf("cluster listen %q: bad port", c.Listen)
		}
		so.Routes = natsserver.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	e := &Server{opts: so}
	log := slog.New(slog.DiscardHandler)
	if opts.Log != nil {
		log = opts.Log.With("component", "nats-server")
	}
	e.log = &serverLog{log: log, limit: ratelog.NewKeyed(time.Minute, 256), writeFailed: &e.writeFailed}
	srv, err := e.start(so)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server on %s: %w", opts.Listen, err)
	}
	// Restart listens on the same ports, also where these were picked at
	// random.
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		so.Port = a.Port
	}
	if a := srv.ClusterAddr(); a != nil {
		so.Cluster.Port = a.Port
	}
	e.srv.Store(srv)
	return e, nil
}

// start creates a NATS server with a copy of so (the server keeps and
// reads the options it is given) and waits until it accepts connections.
func (e *Server) start(so *natsserver.Options) (*natsserver.Server, error) {
	srv, err := natsserver.NewServer(so.Clone())
	if err != nil {
		return nil, err
	}
	srv.SetLoggerV2(e.log, false, false, false)
	// Start reads JetStream's streams back from disk before it takes
	// connections, which takes a while on a large store. It is waited
	// for, however long: shutting down a server that is still opening
	// the store would not stop it, and the next one would open the same
	// files beside it.
	started := make(chan struct{})
	go func() {
		srv.Start()
		close(started)
	}()
	select {
	case <-started:
	case <-time.After(startNote):
		e.log.log.Info("the embedded NATS server is still starting", "waited", startNote, "why", "JetStream reads its streams back from disk")
		<-started
	}
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("did not take connections within 10s of starting (see its log lines)")
	}
	return srv, nil
}

// startNote is how long a start goes before the log says it is under way.
const startNote = 10 * time.Second

func flagName(o Options) string {
	if o.ListenFlag != "" {
		return o.ListenFlag
	}
	return "--listen"
}

// ClientURL is the URL clients connect to.
func (e *Server) ClientURL() string { return e.current().ClientURL() }

// Name is the server's name (Options.Name), as a cluster's nodes know it.
func (e *Server) Name() string { return e.current().Name() }

// Addr is the address the server listens on (host:port).
func (e *Server) Addr() string {
	if a := e.current().Addr(); a != nil {
		return a.String()
	}
	return ""
}

// JetStreamEnabled reports whether JetStream runs on the server: the
// server turns it off by itself when its disk is full.
func (e *Server) JetStreamEnabled() bool { return e.current().JetStreamEnabled() }

// WriteFailed reports that JetStream failed to write a stream to disk
// since it last started (a full disk): the stream then refuses every
// message until the server restarts (Restart), whatever space comes back.
// The NATS server says so only in its log, which is how it is noticed.
func (e *Server) WriteFailed() bool { return e.writeFailed.Load() }

// Restart stops the NATS server and starts a new one on the same
// address with the same settings, which reads the streams back from disk:
// a stream that failed to write takes messages again. Clients lose their
// connection for that moment and reconnect by themselves. (Restarting
// only JetStream inside the running server, as a NATS configuration
// reload does, races with the server's handling of JetStream API
// requests: nats-server 2.15 sets up its API queues without a lock.)
// On an error no server runs until Restart succeeds.
func (e *Server) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("the embedded NATS server was shut down")
	}
	old := e.current()
	old.Shutdown()
	old.WaitForShutdown()
	e.writeFailed.Store(false)
	srv, err := e.start(e.opts)
	if err != nil {
		return fmt.Errorf("restarting the embedded NATS server: %w", err)
	}
	e.srv.Store(srv)
	return nil
}

// maxClosedClients bounds the records of closed connections the server
// keeps (natsserver.Options.MaxClosedClients).
const maxClosedClients = 64

// serverLog hands the NATS server's log lines to slog, and notes the
// write errors that leave a stream refusing messages.
type serverLog struct {
	log         *slog.Logger
	limit       *ratelog.Keyed
	writeFailed *atomic.Bool
}

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLog) Errorf(format string, v ...any) {
	// The stream's and the file store's own lines (formats, not the
	// values in them): "JetStream stream '%s > %s' critical write error:
	// %v", "Filestore [%s] Critical write error: %v".
	if strings.Contains(strings.ToLower(format), "critical write error") {
		l.writeFailed.Store(true)
	}
	l.emit(slog.LevelError, format, v)
}
func (l *serverLog) Fatalf(format string, v ...any) { l.emit(slog.LevelError, format, v) }
func (l *serverLog) Debugf(string, ...any)          {}
func (l *serverLog) Tracef(string, ...any)          {}

// emit logs one line per format a minute, however often the server
// repeats it (once per message, when its disk is full).
func (l *serverLog) emit(level slog.Level, format string, v []any) {
	n, ok := l.limit.Tick(format)
	if !ok {
		return
	}
	var args []any
	if n > 1 {
		args = append(args, "occurrences_since_last_line", n)
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...), args...)
}

// Shutdown stops the server and waits for it. It is safe to call twice.
func (e *Server) Shutdown() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if srv := e.current(); srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}
