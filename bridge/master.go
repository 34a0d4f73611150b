package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
)

// DefaultSockDir is Salt's default sock_dir for the master.
const DefaultSockDir = "/var/run/salt/master"

// The master bus's lines.
const (
	msgJobCacheUnreadable = "cannot read the master's job cache"
	msgMasterUnreachable  = "cannot connect to the master's event bus; retrying"
	msgMasterReconnected  = "reconnected to the master's event bus; events meanwhile not seen"
)

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
	// JobCache is the master's job cache (cachedir/jobs with
	// master_job_cache local_cache; DefaultJobCache for Salt's defaults);
	// "" turns recovery off. After a reconnection the bridge publishes the
	// job returns the master stored while the bridge was disconnected
	// (rebuilt from the cache, marked with RecoveredKey) and that it had
	// not read from the bus.
	JobCache string
	// RecoverDelay is how long after the recovery window's end (the
	// reconnection and a 2 s margin) the job cache is read (default 1s:
	// the master fires a return and then writes it).
	RecoverDelay time.Duration
}

// recoverMargin widens the window read from the job cache on both sides:
// the returns read from the bus in it are skipped, so a wider window costs
// a few file reads, a narrower one could miss a return.
const recoverMargin = 2 * time.Second

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

	jobCache     string
	recoverDelay time.Duration
	seen         seenReturns
	recovering   sync.WaitGroup
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
	if cfg.RecoverDelay <= 0 {
		cfg.RecoverDelay = time.Second
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

		jobCache:     cfg.JobCache,
		recoverDelay: cfg.RecoverDelay,
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
	defer m.recovering.Wait()
	if m.jobCache != "" {
		if _, err := os.ReadDir(m.jobCache); err != nil {
			m.log.Warn(msgJobCacheUnreadable, "job_cache", m.jobCache, "error", err,
				"effect", "job returns fired while the bridge is disconnected will not be recovered",
				"fix", "--job-cache: the master's cachedir/jobs (master_job_cache local_cache)")
		}
	}

	pace := redialPace{delay: retry.Backoff{Min: m.minDelay, Max: m.maxDelay}}
	var lost time.Time // when the last connection ended; zero before the first
	var lostErr error  // why the last connection ended, not logged yet
	failing := false
	watch := newSockWatch(filepath.Dir(m.path)) // nil: retry on the timer alone
	defer func() { watch.close() }()
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", m.path)
		if lostErr != nil {
			m.log.Warn("lost the master's event bus; reconnecting", "error", lostErr)
			lostErr = nil
		}
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
				m.log.Error(msgMasterUnreachable, "error", err, "retry_every", m.maxDelay,
					"fix", dialFix(m.path, err))
			}
			if !pace.wait(ctx, watch) {
				m.log.Info("bridge stopped")
				return nil
			}
			continue
		}
		failing = false
		pace.connected()
		watch.close()
		watch = nil
		if lost.IsZero() {
			m.log.Info("connected to the master's event bus")
		} else {
			m.reconnected(ctx, lost)
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
		// Logged after the first dial, not before: a restarting master's
		// first events reach only the subscribers already connected, and
		// a log line (a write to a pipe, on a loaded machine) is time
		// another subscriber redialling at once does not lose.
		lostErr = err
	}
}

// reconnected counts and reports a reconnection after the outage that
// began at lost, and recovers the job returns of that window.
func (m *MasterBus) reconnected(ctx context.Context, lost time.Time) {
	blind := time.Since(lost)
	m.stats.Reconnects.Add(1)
	m.stats.BlindNanos.Add(int64(blind))
	hint := "the job returns of that window are in the master's job cache: salt-run jobs.list_jobs, jobs.lookup_jid"
	if m.jobCache != "" {
		hint = "job returns of that window are recovered from the master's job cache"
	}
	m.log.Warn(msgMasterReconnected, "fix", hint,
		"blind_for", blind.Round(time.Millisecond), "from", lost.UTC().Format(time.RFC3339Nano), "to", time.Now().UTC().Format(time.RFC3339Nano))
	if m.jobCache != "" {
		m.recovering.Add(1)
		go m.recoverReturns(ctx, lost, time.Now())
	}
}

// After a file is created in sock_dir (a master starting), the bridge dials
// every quickDial for quickWindow.
const (
	quickDial   = time.Millisecond
	quickWindow = 2 * time.Second
)

// redialPace spaces the dials of the master's socket while it refuses
// them: backing off, except just after a file was created in sock_dir.
type redialPace struct {
	delay      retry.Backoff
	quickUntil time.Time // dial every quickDial until then: a master is starting
}

// wait waits before the next dial, or until a file is created in the
// watched sock_dir; false when ctx ended.
func (p *redialPace) wait(ctx context.Context, watch *sockWatch) bool {
	d := quickDial
	if time.Now().After(p.quickUntil) {
		d = p.delay.Next()
	}
	ok, created := watch.wait(ctx, d)
	if created {
		// A master binds its socket a moment before it listens (a
		// starting, loaded master: tens of ms), and a dial in between is
		// refused. Every event it publishes once it listens and before the
		// bridge is back is lost, so the bridge dials every quickDial for a
		// while (a refused dial of a local socket costs microseconds), then
		// backs off from the shortest delay, not the longest the outage
		// reached.
		p.delay.Reset()
		p.quickUntil = time.Now().Add(quickWindow)
	}
	return ok
}

// connected starts the next outage's delays from the shortest.
func (p *redialPace) connected() { p.delay.Reset() }

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
		if key := returnKey(tag); key != "" && m.jobCache != "" {
			m.seen.add(key, time.Now())
		}
		m.out.Offer(tag, encodeEnvelope(tag, data), receiptID(tag, data))
	}
}

// recoverReturns publishes the job returns the master stored between lost
// and back (widened by recoverMargin) that the bridge did not read from
// the bus, once the master has had RecoverDelay to write them.
func (m *MasterBus) recoverReturns(ctx context.Context, lost, back time.Time) {
	defer m.recovering.Done()
	from, to := lost.Add(-recoverMargin), back.Add(recoverMargin)
	// The window's end must have passed, and the master had RecoverDelay
	// to write what it fired by then.
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(to) + m.recoverDelay):
	}
	found, unreadable, err := jobCacheReturns(ctx, m.jobCache, from, to, m.seen.has)
	if err != nil && ctx.Err() == nil {
		m.log.Error("cannot recover the job returns fired while disconnected", "job_cache", m.jobCache, "error", err)
		return
	}
	slices.SortFunc(found, func(a, b recoveredReturn) int { return a.at.Compare(b.at) })
	n := 0
	for _, r := range found {
		if m.seen.has(returnKey(r.tag)) { // read from the bus meanwhile
			continue
		}
		n++
		m.seen.add(returnKey(r.tag), time.Now()) // a next window overlapping this one skips it
		m.stats.Recovered.Add(1)
		m.out.Offer(r.tag, encodeEnvelope(r.tag, r.data), receiptID(r.tag, r.data))
	}
	if n > 0 || unreadable > 0 {
		m.log.Warn("recovered job returns fired while disconnected from the master's job cache", "returns", n,
			"unreadable", unreadable, "from", from.UTC().Format(time.RFC3339Nano), "to", to.UTC().Format(time.RFC3339Nano))
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
