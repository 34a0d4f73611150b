package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
)

// DefaultSockDir is Salt's default sock_dir for the master.
const DefaultSockDir = "/var/run/salt/master"

// MasterEventSocket is the name of the master's event publisher socket in
// its sock_dir.
const MasterEventSocket = "master_event_pub.ipc"

// MasterConfig configures a MasterBus.
type MasterConfig struct {
	// SockDir is the master's sock_dir (default DefaultSockDir).
	SockDir string
	// MinBackoff and MaxBackoff space reconnection attempts (defaults
	// 10ms and 250ms: while disconnected the bridge sees nothing, and
	// dialling a socket that is not there yet costs nothing, so it
	// retries often). On Linux it also watches sock_dir and dials as soon
	// as the master creates its socket.
	MinBackoff, MaxBackoff time.Duration
	// LogInterval spaces repeated warnings (default DefaultLogInterval).
	LogInterval time.Duration
	// Logger receives the bridge's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Outbox configures the spool that holds events while NATS cannot
	// take them (its Logger defaults to Logger).
	Outbox OutboxConfig
}

// MasterBus reads a Salt master's event bus directly from its publisher
// socket (sock_dir/master_event_pub.ipc, both the Salt 3006 and 3007
// framings; see readFrame) and hands every event to an Outbox. It needs no
// salt-api and no credentials, only read access to the socket (the master's
// user or root), and changes nothing on the master.
//
// It never stops reading: Salt's publisher buffers without limit for a
// subscriber that does not read, and a stalled subscriber delays every
// other subscriber of the bus (salt-api, the master's own job returns).
// So events go to the outbox, which never blocks; past its bounds they are
// dropped and counted. When the master restarts, the bridge reconnects and
// logs how long it was blind (the master keeps no history for it).
type MasterBus struct {
	out      *Outbox
	path     string
	log      *slog.Logger
	minDelay time.Duration
	maxDelay time.Duration
	badLog   *ratelog.Every
	stats    Stats
	up       atomic.Bool
	running  atomic.Bool
}

// NewMasterBus prepares a bridge from the master bus in cfg.SockDir to pub.
// It does not connect; Run does.
func NewMasterBus(cfg MasterConfig, pub Publisher) (*MasterBus, error) {
	if cfg.SockDir == "" {
		cfg.SockDir = DefaultSockDir
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 250 * time.Millisecond
	}
	if cfg.MinBackoff > cfg.MaxBackoff {
		return nil, fmt.Errorf("bridge: MinBackoff %v exceeds MaxBackoff %v", cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = DefaultLogInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Outbox.Logger == nil {
		cfg.Outbox.Logger = log
	}
	out, err := NewOutbox(cfg.Outbox, pub)
	if err != nil {
		return nil, err
	}
	m := &MasterBus{
		out:      out,
		path:     filepath.Join(cfg.SockDir, MasterEventSocket),
		log:      log.With("component", "bridge", "socket", filepath.Join(cfg.SockDir, MasterEventSocket)),
		minDelay: cfg.MinBackoff,
		maxDelay: cfg.MaxBackoff,
		badLog:   ratelog.New(cfg.LogInterval),
	}
	m.stats.OutboxStats = out.Stats()
	return m, nil
}

// Stats returns the live counters.
func (m *MasterBus) Stats() *Stats { return &m.stats }

// Outbox is the bridge's outbox, for its health and spool size.
func (m *MasterBus) Outbox() *Outbox { return m.out }

// Connected reports whether the bridge is reading the master's socket.
func (m *MasterBus) Connected() bool { return m.up.Load() }

// Run reads the master's event bus and publishes its events until ctx ends,
// then persists what the outbox still holds and returns nil.
func (m *MasterBus) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("bridge: Run is already running")
	}
	defer m.running.Store(false)
	stop := runOutbox(ctx, m.out)
	defer stop()

	delay := retry.Backoff{Min: m.minDelay, Max: m.maxDelay}
	var lost time.Time // when the last connection ended; zero before the first
	failing := false
	watch := newSockWatch(filepath.Dir(m.path)) // nil: retry on the timer alone
	defer func() { watch.close() }()
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", m.path)
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			m.log.Info("bridge stopped")
			return nil
		}
		if err != nil {
			if !failing {
				failing = true
				m.log.Error("cannot connect to the master's event bus; retrying (is the master running, and is --sock-dir its sock_dir?)",
					"error", err, "retry_every", m.maxDelay)
			}
			if !watch.wait(ctx, delay.Next()) {
				m.log.Info("bridge stopped")
				return nil
			}
			continue
		}
		failing = false
		delay.Reset()
		watch.close()
		watch = nil
		if lost.IsZero() {
			m.log.Info("connected to the master's event bus")
		} else {
			blind := time.Since(lost)
			m.stats.Reconnects.Add(1)
			m.stats.BlindNanos.Add(int64(blind))
			m.log.Warn("reconnected to the master's event bus; events published while disconnected were not seen (the job returns of that window are in the master's job cache: salt-run jobs.list_jobs, jobs.lookup_jid)",
				"blind_for", blind.Round(time.Millisecond), "from", lost.UTC().Format(time.RFC3339Nano), "to", time.Now().UTC().Format(time.RFC3339Nano))
		}
		m.up.Store(true)
		err = m.consume(ctx, conn)
		m.up.Store(false)
		lost = time.Now()
		if ctx.Err() != nil {
			m.log.Info("bridge stopped")
			return nil
		}
		// Watch for the master's new socket before the first dial.
		watch = newSockWatch(filepath.Dir(m.path))
		if ctx.Err() != nil {
			m.log.Info("bridge stopped")
			return nil
		}
		m.log.Warn("lost the master's event bus; reconnecting", "error", err)
	}
}

// consume reads frames from conn until it fails or ctx ends.
func (m *MasterBus) consume(ctx context.Context, conn net.Conn) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	d := msgpack.NewDecoder(bufio.NewReaderSize(conn, 1<<20))
	for {
		body, err := readFrame(d)
		if err != nil {
			if errors.Is(err, errNotEvent) {
				// The frame was read whole: the stream is still in step.
				m.stats.Received.Add(1)
				m.bad(nil, err)
				continue
			}
			if errors.Is(err, io.EOF) {
				return errors.New("the master closed the socket")
			}
			// A broken msgpack stream cannot be resynchronised: start a
			// new connection.
			return err
		}
		m.stats.Received.Add(1)
		tag, data, err := eventJSON(body)
		if err != nil {
			m.bad(body, err)
			continue
		}
		m.out.Offer(tag, encodeEnvelope(tag, data), receiptID(tag, data))
	}
}

// bad counts and logs (the first, then one per interval) an event that
// could not be read.
func (m *MasterBus) bad(body []byte, err error) {
	m.stats.Malformed.Add(1)
	if n, ok := m.badLog.Tick(); ok {
		m.log.Error("unreadable event on the master's bus discarded", "error", err, "bytes", len(body),
			"prefix", prefix(body), "discarded_since_last_log", n)
	}
}
