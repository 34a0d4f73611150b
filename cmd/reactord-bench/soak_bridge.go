package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
)

// The bridged share of the traffic: the soak plays a Salt master's event
// publisher (master_event_pub.ipc in a sock_dir of its own) for minions
// b0000, b0001, ..., a real `reactord bridge` process (reactord-bench
// bridge, the same assembly) reads it and publishes to the event stream,
// and the bridge-kill fault SIGKILLs that process. Salt's bus keeps
// nothing for a subscriber that is not there, so an event of these
// minions is counted:
//
//   - unread when the master emitted it while no bridge was connected;
//   - acknowledged when the event stream stored it (the bridge's
//     JetStream publish acknowledged): the soak reads the stream with a
//     durable consumer of its own, filtered to these minions' keys; an
//     event that reacted was stored too, seen by that consumer or not
//     (ConsumerMissed counts those it did not see);
//   - unconfirmed when it was written to a connected bridge but the
//     stream never stored it (in the socket's buffer or the bridge's
//     memory when it was killed: what a master's bridge would miss too);
//   - lost when acknowledged and no reaction came.
//
// Order is checked on what reacted: an event reacting after a later
// event of its minion reacted is out of order; gaps (unread and
// unconfirmed events) are not.

// bridgedSummary is the summary's account of the bridged events.
type bridgedSummary struct {
	Minions      int   `json:"minions"`
	Emitted      int64 `json:"emitted"`
	Unread       int64 `json:"unread"`
	Unconfirmed  int64 `json:"unconfirmed"`
	Acknowledged int64 `json:"acknowledged"`
	Reacted      int64 `json:"reacted"`
	Lost         int64 `json:"lost"`
	Duplicates   int64 `json:"duplicates"`
	OutOfOrder   int64 `json:"out_of_order"`
	// StoredOutOfOrder is the events the stream stored after a later
	// event of their minion (the bridge's order, read before any
	// reaction): an out-of-order reaction with none here is the daemon's.
	StoredOutOfOrder int64 `json:"stored_out_of_order"`
	// ConsumerMissed is the acknowledged events the soak's consumer of
	// the stream did not see (they reacted).
	ConsumerMissed   int64    `json:"consumer_missed"`
	LostSample       []string `json:"lost_sample,omitempty"`
	OutOfOrderSample []string `json:"out_of_order_sample,omitempty"`
}

// bridgedShare is the bridged part of --rate and --minions.
func (c soakConfig) bridgedShare() (rate float64, minions int) {
	if c.bridgeShare <= 0 {
		return 0, 0
	}
	return float64(c.rate) * c.bridgeShare, max(1, int(math.Round(float64(c.minions)*c.bridgeShare)))
}

// fakeMaster is the soak's Salt master event publisher: it writes each
// bridged event, framed as Salt does, to the bridge connected, if any.
type fakeMaster struct {
	ln   net.Listener
	mu   sync.Mutex
	conn net.Conn
}

// listenMaster opens master_event_pub.ipc in sockDir.
func listenMaster(sockDir string) (*fakeMaster, error) {
	ln, err := net.Listen("unix", filepath.Join(sockDir, bridge.MasterEventSocket))
	if err != nil {
		return nil, err
	}
	m := &fakeMaster{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			m.mu.Lock()
			if m.conn != nil {
				m.conn.Close()
			}
			m.conn = c
			m.mu.Unlock()
		}
	}()
	return m, nil
}

// emit writes frame to the connected bridge; false when no bridge is
// connected (a failed write drops the connection).
func (m *fakeMaster) emit(frame []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return false
	}
	_ = m.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := m.conn.Write(frame); err != nil {
		m.conn.Close()
		m.conn = nil
	}
	return true // written, or partly: the stream tells whether it arrived
}

func (m *fakeMaster) close() {
	m.ln.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn != nil {
		m.conn.Close()
	}
}

// saltFrame packs a soakEvent body ({"tag", "data"}, flat data) as the
// master's publisher frames it, with the master's _stamp.
func saltFrame(body []byte, stamp time.Time) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var env struct {
		Tag  string          `json:"tag"`
		Data json.RawMessage `json:"data"`
	}
	if err := d.Decode(&env); err != nil {
		return nil, err
	}
	d = json.NewDecoder(bytes.NewReader(env.Data))
	d.UseNumber()
	var kv []any
	if _, err := d.Token(); err != nil { // {
		return nil, err
	}
	for d.More() {
		k, err1 := d.Token()
		v, err2 := d.Token()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = i
			} else if v, err = n.Float64(); err != nil {
				return nil, err
			}
		}
		kv = append(kv, k, v)
	}
	kv = append(kv, "_stamp", stamp.UTC().Format("2006-01-02T15:04:05.000000"))
	var data bytes.Buffer
	e := msgpack.NewEncoder(&data)
	e.UseCompactInts(true) // as Salt's msgpack packs them
	if err := e.EncodeMapLen(len(kv) / 2); err != nil {
		return nil, err
	}
	for _, x := range kv {
		if err := e.Encode(x); err != nil {
			return nil, err
		}
	}
	return bridge.SaltFrame(env.Tag, data.Bytes()), nil
}

// bridgedTraffic emits the bridged share of the events ten times a
// second, each minion at most once a round, whether a bridge reads or
// not (a master does not wait).
func (s *soak) bridgedTraffic(ctx context.Context, stderr io.Writer) {
	rate, minions := s.cfg.bridgedShare()
	r := rand.New(rand.NewPCG(s.cfg.seed, 3))
	newSoakRounds(rate, minions, "b").run(ctx, func(evs []soakNumbered) {
		for _, e := range evs {
			_, body := soakEvent(r, e.minion, e.n)
			now := time.Now()
			frame, err := saltFrame(body, now)
			if err != nil {
				fmt.Fprintf(stderr, "soak: bridged event %s/%d: %v\n", e.minion, e.n, err)
				continue
			}
			s.bledger.sent(e.minion, e.n, now)
			if !s.master.emit(frame) {
				s.bledger.unreadOne()
			}
		}
	})
}

// startBridge listens as the master, creates the soak's consumer of the
// bridged minions' events in the event stream, and starts the bridge.
func (s *soak) startBridge(ctx context.Context, stderr io.Writer) error {
	_, minions := s.cfg.bridgedShare()
	sockDir := filepath.Join(s.dir, "master")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		return err
	}
	var err error
	if s.master, err = listenMaster(sockDir); err != nil {
		return err
	}
	var filters []string
	for i := range minions {
		filters = append(filters, natsbus.PartitionPrefix(natsbus.DefaultPrefix)+strconv.Itoa(s.cfg.partitions)+".*."+natsbus.KeyToken(fmt.Sprintf("b%04d", i))+".>")
	}
	st, err := s.js.Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		return fmt.Errorf("the event stream: %w", err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "soak-bridged", FilterSubjects: filters,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second, MaxAckPending: 20000})
	if err != nil {
		return fmt.Errorf("the bridged events' consumer: %w", err)
	}
	if s.bridgedCC, err = cons.Consume(func(m jetstream.Msg) {
		var v struct {
			Data struct {
				ID string `json:"id"`
				N  *int   `json:"n"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Data(), &v) == nil && v.Data.N != nil {
			redelivered := false
			if md, err := m.Metadata(); err == nil {
				redelivered = md.NumDelivered > 1
			}
			s.bledger.stored(v.Data.ID, *v.Data.N, redelivered)
		}
		_ = m.Ack()
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		// Said, a few times: what this consumer misses is counted
		// (consumer_missed) when it reacts.
		if n := s.consumeErrs.Add(1); n <= 5 {
			fmt.Fprintf(stderr, "soak: the bridged events' consumer: %v\n", err)
		}
	})); err != nil {
		return fmt.Errorf("the bridged events' consumer: %w", err)
	}
	s.bridge = &soakProc{name: "bridge", log: s.logPath("bridge"), http: true, args: []string{"bridge", "--sock-dir", sockDir, "--job-cache", "",
		"--nats", strings.Join(s.urls, ","), "--data-dir", filepath.Join(s.dir, "bridge"), "--http", "127.0.0.1:0", "--pprof"}}
	if err := s.bridge.start(s.self); err != nil {
		return err
	}
	return waitFor(ctx, 60*time.Second, []*child{s.bridge.cur()}, func() error { return s.bridge.cur().healthy() })
}

// bridgedSummary accounts for the bridged events (see above).
func (s *soak) bridgedSummary() *bridgedSummary {
	_, minions := s.cfg.bridgedShare()
	if minions == 0 {
		return nil
	}
	l := s.bledger
	lost, some := l.lost()
	dups, ooo, oooSome := l.gapOrder()
	l.mu.Lock()
	defer l.mu.Unlock()
	var missed int64 // reacted, never seen stored
	for _, m := range l.minions {
		for i := range min(len(m.stored), len(m.reacted)) {
			if m.reacted[i] && !m.stored[i] {
				missed++
			}
		}
	}
	acked := l.acked + missed
	return &bridgedSummary{Minions: minions, Emitted: l.published, Unread: l.unread, Unconfirmed: l.published - l.unread - acked,
		Acknowledged: acked, Reacted: l.reactedN, Lost: lost, LostSample: some, Duplicates: int64(dups), OutOfOrder: int64(ooo),
		OutOfOrderSample: oooSome, StoredOutOfOrder: l.storedOOO, ConsumerMissed: missed}
}

// cmdBenchBridge is the soak's bridge: `reactord bridge`'s flags,
// assembled by the daemon package as reactord does.
func cmdBenchBridge(ctx context.Context, args []string, stderr io.Writer) int {
	o := daemon.DefaultBridgeOptions()
	fs := newFlags("bridge", "reactord-bench bridge [reactord bridge flags]", "The bridge of reactord-bench soak.", stderr)
	o.Flags(fs)
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := daemon.CheckLogFormat(o.LogFormat); err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	o.Log = daemon.NewLogger(stderr, o.LogLevel, o.LogFormat, false)
	o.Registry = prometheus.NewRegistry()
	b, err := daemon.NewBridge(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	if err := b.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	return exitOK
}
