package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/tcpproxy"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/store/sqlstore"
)

// The fault kinds of reactord-bench soak, in the order the issue ranks them.
const (
	faultNATSKill    = "nats-kill"    // SIGKILL a NATS node, restart it
	faultReplicaKill = "replica-kill" // SIGKILL a replica, restart it
	faultReplicaTerm = "replica-term" // SIGTERM a replica, restart it
	faultNetCut      = "net-cut"      // cut a replica from its node for a while
	faultReload      = "reload"       // change the reaction file, SIGHUP the replicas
	faultStoreCut    = "store-cut"    // cut the replicas from the audit database
	faultDiskFull    = "disk-full"    // fill a replica's data directory, then free it
)

// faultKinds are the faults soak implements.
var faultKinds = []string{faultNATSKill, faultReplicaKill, faultReplicaTerm, faultNetCut, faultReload}

// kinds are the faults this run chooses from: store-cut too when the
// audit store is a database on the network (reached through a proxy).
func (s *soak) kinds() []string {
	kinds := slices.Clone(faultKinds)
	if s.storeProxy != nil {
		kinds = append(kinds, faultStoreCut)
	}
	if s.cfg.tmpfs {
		kinds = append(kinds, faultDiskFull)
	}
	return kinds
}

// soakConfig is what reactord-bench soak runs.
type soakConfig struct {
	duration, interval, faultEvery, warmup, down time.Duration
	rate, minions, replicas, nodes, partitions   int
	seed                                         uint64
	out, store                                   string
	// keepJobs is the replicas' --keep-jobs: the audit store's retention.
	keepJobs time.Duration
	// tmpfs mounts each replica's data directory as a 64 MiB tmpfs, for
	// the disk-full fault.
	tmpfs bool
	// schedule, when set, is the faults in order (cycled) in place of
	// random ones: the test forces every kind.
	schedule []string
}

// soakProc is a process soak runs and restarts: a NATS node or a replica.
type soakProc struct {
	name  string
	args  []string
	proxy *tcpproxy.Proxy // a replica's way to its node
	mu    sync.Mutex
	c     *child
}

func (p *soakProc) cur() *child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// start runs the process (again) with its arguments.
func (p *soakProc) start(self string) error {
	c := &child{name: p.name, cmd: exec.Command(self, p.args...), scrp: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableCompression: true}}}
	if err := c.start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.c = c
	p.mu.Unlock()
	return nil
}

// soak is one run's state.
type soak struct {
	cfg      soakConfig
	self     string
	dir      string
	conf     string
	nodes    []*soakProc
	reps     []*soakProc
	urls     []string
	js       jetstream.JetStream
	ledger   *soakLedger
	timeline *os.File
	tlMu     sync.Mutex
	faults   map[string]int
	faultLog []soakFault
	// storeProxy stands between the replicas and a --store database;
	// storeURL is --store through it.
	storeProxy *tcpproxy.Proxy
	storeURL   string
	// audit counts the rows of the --store database, directly (not
	// through storeProxy), at every sample; nil without a --store.
	audit   rowCounter
	mounts  []string // --tmpfs's, unmounted at the end
	samples []soakSample
	fmu     sync.Mutex
}

// rowCounter is the audit store's count of its rows, by table.
type rowCounter interface {
	Rows(ctx context.Context) (map[string]int64, error)
}

// soakSummary is the JSON line soak prints last.
type soakSummary struct {
	DurationS     float64        `json:"duration_s"`
	Faults        map[string]int `json:"faults"`
	Published     int64          `json:"published"`
	Acknowledged  int64          `json:"acknowledged"`
	Reacted       int64          `json:"reacted"`
	Lost          int64          `json:"lost"`
	Duplicates    int64          `json:"duplicates"`
	OutOfOrder    int64          `json:"out_of_order"`
	RSSGrowth     float64        `json:"rss_growth_mb_per_hour"`
	RSSGrowthProc string         `json:"rss_growth_process"`
	GoroutinesIn  int64          `json:"goroutines_start"`
	GoroutinesOut int64          `json:"goroutines_end"`
	FDsIn         int64          `json:"fds_start"`
	FDsOut        int64          `json:"fds_end"`
	P50ms         float64        `json:"p50_ms"`
	P99ms         float64        `json:"p99_ms"`
	// StreamMsgsMax is the most messages the event stream held at a
	// sample; AuditRowsMax the most rows of the audit tables (with a
	// --store database), and AuditRowsWarm that after the warm-up: both
	// bounded when retention holds.
	StreamMsgsMax uint64   `json:"stream_msgs_max"`
	AuditRowsMax  int64    `json:"audit_rows_max,omitempty"`
	AuditRowsWarm int64    `json:"audit_rows_max_after_warmup,omitempty"`
	Seed          uint64   `json:"seed"`
	Rate          int      `json:"rate"`
	Minions       int      `json:"minions"`
	Replicas      int      `json:"replicas"`
	Nodes         int      `json:"nodes"`
	Partitions    int      `json:"partitions"`
	Store         string   `json:"store"`
	LostSample    []string `json:"lost_sample,omitempty"`
	NotDone       []string `json:"not_implemented"`
}

// soakNotDone lists the faults soak does not inject.
var soakNotDone = []string{"the audit database server stopped and started (store-cut cuts it off through a proxy instead)", "bridge SIGKILL (no bridge runs)"}

// cmdSoak is reactord-bench soak.
func cmdSoak(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("soak", "reactord-bench soak [--duration D] [--rate R] [--minions M] [--replicas N] [--nodes N] [--fault-every D] [--seed S] [--out DIR] [--store URL]",
		`Runs a NATS cluster (--nodes processes, the stream on min(3, nodes)),
--replicas daemons (--jetstream --partitions, the nats driver publishing
each reaction to a stream the soak reads) and steady master-shaped traffic
(minion starts, beacons, job returns, some of ~100 KB, key events; each
event numbered per minion), and every --fault-every injects one fault
chosen with --seed among: `+strings.Join(faultKinds, ", ")+`, and
`+faultStoreCut+` (the replicas' way to a --store database cut for twice
--down) when --store is a mysql:// or postgres:// URL, and `+faultDiskFull+` (a
replica's data directory filled for twice --down, then freed) with --tmpfs.
Not implemented: `+strings.Join(soakNotDone, "; ")+`.
Every --interval it samples each process (RSS and open files from /proc,
goroutines, Go heap and audit store records from the replicas' /metrics),
the event stream and
the publish-to-reaction latency into DIR/timeline.jsonl (faults as their
own lines), draws DIR/soak.png, and prints one JSON summary line last.`, stderr)
	var c soakConfig
	fs.DurationVar(&c.duration, "duration", 2*time.Minute, "how long traffic and faults run")
	fs.DurationVar(&c.interval, "interval", 5*time.Second, "sampling interval")
	fs.DurationVar(&c.faultEvery, "fault-every", time.Minute, "time between faults (0: none)")
	fs.DurationVar(&c.warmup, "warmup", 0, "samples ignored for growth (default: a fifth of --duration)")
	fs.DurationVar(&c.down, "down", 3*time.Second, "how long a killed process stays down, a cut lasts")
	fs.IntVar(&c.rate, "rate", 100, "events per second")
	fs.IntVar(&c.minions, "minions", 200, "minions")
	fs.IntVar(&c.replicas, "replicas", 3, "daemon replicas")
	fs.IntVar(&c.nodes, "nodes", 3, "NATS nodes")
	fs.IntVar(&c.partitions, "partitions", 6, "the daemons' --partitions")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the faults and the traffic")
	fs.StringVar(&c.out, "out", "", "directory for timeline.jsonl and soak.png (default: a temporary one)")
	fs.DurationVar(&c.keepJobs, "keep-jobs", 20*time.Minute, "the replicas' --keep-jobs: how long the audit store keeps records")
	fs.StringVar(&c.store, "store", "", "audit store URL for every replica (default: SQLite in each replica's data directory)")
	fs.BoolVar(&c.tmpfs, "tmpfs", false, "each replica's data directory a 64 MiB tmpfs (root, Linux), and the disk-full fault")
	sched := fs.String("faults", "", "comma-separated fault kinds in order, cycled, in place of random ones")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *sched != "" {
		for _, k := range strings.Split(*sched, ",") {
			if !containsString(faultKinds, k) && k != faultStoreCut && k != faultDiskFull {
				fmt.Fprintf(stderr, "soak: unknown fault %q (have %s)\n", k, strings.Join(faultKinds, ", "))
				return exitUsage
			}
			c.schedule = append(c.schedule, k)
		}
	}
	if c.nodes < 1 || c.replicas < 1 || c.minions < 1 || c.rate < 1 {
		fmt.Fprintln(stderr, "soak: --nodes, --replicas, --minions and --rate must be at least 1")
		return exitUsage
	}
	if c.warmup == 0 {
		c.warmup = c.duration / 5
	}
	sum, err := runSoak(ctx, c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return exitUsage
	}
	out, _ := json.Marshal(sum)
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// soakRule is the reaction every soak event triggers: its minion and its
// number, published by the nats driver.
const soakRule = "soak:\n  local.test.arg:\n    - tgt: {{ .data.id }}\n    - arg:\n      - {{ .data.n }}\n"

// writeSoakConf writes the reactor configuration; generation changes it
// (a rule that never matches comes and goes) for the reload fault.
func writeSoakConf(dir string, generation int) (string, error) {
	sls := filepath.Join(dir, "soak.sls")
	if err := os.WriteFile(sls, []byte(soakRule), 0o644); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("reactor:\n")
	for _, tag := range []string{"salt/minion/*/start", "salt/beacon/*", "salt/job/*/ret/*", "salt/key"} {
		fmt.Fprintf(&b, "  - '%s':\n      - %s\n", tag, sls)
	}
	if generation%2 == 1 {
		fmt.Fprintf(&b, "  - 'soak/reload/%d':\n      - %s\n", generation, sls)
	}
	conf := filepath.Join(dir, "reactor.conf")
	tmp := conf + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return conf, os.Rename(tmp, conf)
}

// runSoak starts everything, runs traffic and faults for the duration,
// drains and returns the summary.
func runSoak(ctx context.Context, cfg soakConfig, stderr io.Writer) (soakSummary, error) {
	s := &soak{cfg: cfg, faults: map[string]int{}, ledger: newSoakLedger()}
	var err error
	if s.self, err = os.Executable(); err != nil {
		return soakSummary{}, err
	}
	if s.dir, err = os.MkdirTemp("", "reactord-soak-"); err != nil {
		return soakSummary{}, err
	}
	defer os.RemoveAll(s.dir)
	if cfg.out == "" { // kept: the run's timeline and picture
		if cfg.out, err = os.MkdirTemp("", "reactord-soak-out-"); err != nil {
			return soakSummary{}, err
		}
		s.cfg.out = cfg.out
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return soakSummary{}, err
	}
	if s.timeline, err = os.Create(filepath.Join(cfg.out, "timeline.jsonl")); err != nil {
		return soakSummary{}, err
	}
	defer s.timeline.Close()
	if s.conf, err = writeSoakConf(s.dir, 0); err != nil {
		return soakSummary{}, err
	}
	defer s.stopAll()
	if err := s.startCluster(ctx); err != nil {
		return soakSummary{}, err
	}
	nc, err := nats.Connect(strings.Join(s.urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return soakSummary{}, fmt.Errorf("NATS: %w", err)
	}
	defer nc.Close()
	if s.js, err = jetstream.New(nc); err != nil {
		return soakSummary{}, err
	}
	if err := s.collect(ctx); err != nil {
		return soakSummary{}, err
	}
	if err := s.proxyStore(); err != nil {
		return soakSummary{}, err
	}
	if s.storeProxy != nil {
		st, err := sqlstore.Open(ctx, cfg.store)
		if err != nil {
			return soakSummary{}, err
		}
		defer st.Close()
		s.audit, _ = st.(rowCounter)
	}
	if containsString(cfg.schedule, faultStoreCut) && s.storeProxy == nil {
		return soakSummary{}, errors.New("--faults store-cut needs a --store mysql:// or postgres:// URL")
	}
	if containsString(cfg.schedule, faultDiskFull) && !cfg.tmpfs {
		return soakSummary{}, errors.New("--faults disk-full needs --tmpfs")
	}
	if err := s.startReplicas(ctx); err != nil {
		return soakSummary{}, err
	}
	pc, err := natsbus.Connect(natsbus.ConnOptions{URL: strings.Join(s.urls, ","), Name: "soak-publisher"})
	if err != nil {
		return soakSummary{}, fmt.Errorf("NATS: %w", err)
	}
	defer pc.Close()
	fmt.Fprintf(stderr, "soak: seed %d, %d nodes, %d replicas, %d events/s for %v, a fault every %v; out %s\n",
		cfg.seed, cfg.nodes, cfg.replicas, cfg.rate, cfg.duration, cfg.faultEvery, cfg.out)

	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, cfg.duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { s.traffic(runCtx, pc) })
	wg.Go(func() { s.nemesis(runCtx, start, stderr) })
	s.sampleUntil(runCtx, start)
	wg.Wait()
	if ctx.Err() != nil {
		return soakSummary{}, ctx.Err()
	}
	if err := s.drain(ctx); err != nil {
		return soakSummary{}, err
	}
	s.sample(start) // the end, after the drain
	sum := s.summary(start)
	if err := plotSoak(filepath.Join(cfg.out, "soak.png"), s.samples, s.faultLog); err != nil {
		fmt.Fprintf(stderr, "soak: drawing soak.png: %v\n", err)
	}
	return sum, nil
}

// drain waits, once the faults stopped and every process runs again,
// until every acknowledged event reacted, or nothing moved for 30 s (3
// minutes at most).
func (s *soak) drain(ctx context.Context) error {
	for _, p := range append(append([]*soakProc{}, s.nodes...), s.reps...) {
		if err := p.cur().exited(); err != nil {
			return fmt.Errorf("after the faults: %w", err)
		}
	}
	last, moved := int64(-1), time.Now()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		lost, _ := s.ledger.lost()
		if lost == 0 {
			return nil
		}
		if r := s.ledger.reactedCount(); r != last {
			last, moved = r, time.Now()
		} else if time.Since(moved) > 30*time.Second {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// proxyStore puts a proxy between the replicas and a --store database on
// the network, for the store-cut fault.
func (s *soak) proxyStore() error {
	s.storeURL = s.cfg.store
	u, err := url.Parse(s.cfg.store)
	if err != nil || u.Host == "" || !containsString([]string{"mysql", "mariadb", "postgres", "postgresql"}, u.Scheme) {
		return nil // SQLite, none, or a form soak does not rewrite
	}
	host := u.Host
	if u.Port() == "" {
		port := "3306"
		if strings.HasPrefix(u.Scheme, "postgres") {
			port = "5432"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	if s.storeProxy, err = tcpproxy.Listen(host); err != nil {
		return err
	}
	u.Host = s.storeProxy.Addr()
	s.storeURL = u.String()
	return nil
}

// stopAll ends every process soak started.
func (s *soak) stopAll() {
	if s.storeProxy != nil {
		defer s.storeProxy.Down()
	}
	for _, p := range s.reps {
		if c := p.cur(); c != nil {
			c.stop(15 * time.Second)
		}
		if p.proxy != nil {
			p.proxy.Down()
		}
	}
	for _, p := range s.nodes {
		if c := p.cur(); c != nil {
			c.stop(10 * time.Second)
		}
	}
	for _, m := range s.mounts {
		_ = unmount(m)
	}
}

// startCluster starts the NATS nodes and waits for JetStream.
func (s *soak) startCluster(ctx context.Context) error {
	var routes []string
	var clientPorts, routePorts []int
	for range s.cfg.nodes {
		cp, err1 := freePort()
		rp, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		clientPorts, routePorts = append(clientPorts, cp), append(routePorts, rp)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", rp))
		s.urls = append(s.urls, fmt.Sprintf("nats://127.0.0.1:%d", cp))
	}
	var children []*child
	for i := range s.cfg.nodes {
		p := &soakProc{name: fmt.Sprintf("n%d", i+1), args: []string{"natsnode", "--name", fmt.Sprintf("n%d", i+1),
			"--listen", fmt.Sprintf("127.0.0.1:%d", clientPorts[i]), "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]),
			"--routes", strings.Join(routes, ","), "--data-dir", filepath.Join(s.dir, fmt.Sprintf("n%d", i+1))}}
		if err := p.start(s.self); err != nil {
			return err
		}
		s.nodes = append(s.nodes, p)
		children = append(children, p.cur())
	}
	var conn *natsbus.Conn
	if err := waitFor(ctx, 30*time.Second, children, func() (err error) {
		conn, err = natsbus.Connect(natsbus.ConnOptions{URL: strings.Join(s.urls, ","), Name: "soak"})
		return err
	}); err != nil {
		return fmt.Errorf("NATS: %w", err)
	}
	defer conn.Close()
	return waitFor(ctx, 30*time.Second, children, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return conn.JetStreamReady(cctx, min(s.cfg.nodes, 3))
	})
}

// startReplicas starts the replicas, each through a proxy to one node,
// one at a time (the first creates the stream), and waits for the
// partitions to be shared.
func (s *soak) startReplicas(ctx context.Context) error {
	sr := min(s.cfg.nodes, 3)
	for i := range s.cfg.replicas {
		data := filepath.Join(s.dir, fmt.Sprintf("replica%d", i+1))
		if s.cfg.tmpfs {
			if err := os.MkdirAll(data, 0o755); err != nil {
				return err
			}
			if err := mountTmpfs(data, 64<<20); err != nil {
				return fmt.Errorf("--tmpfs: %w", err)
			}
			s.mounts = append(s.mounts, data)
		}
		target := strings.TrimPrefix(s.urls[i%len(s.urls)], "nats://")
		px, err := tcpproxy.Listen(target)
		if err != nil {
			return err
		}
		args := []string{"replica", "-c", s.conf, "--nats", "nats://" + px.Addr(), "--driver", "nats",
			"--exec-subject", fmt.Sprintf("soak.exec.r%d.", i+1), "--jetstream", "--partitions", strconv.Itoa(s.cfg.partitions),
			"--stream-replicas", strconv.Itoa(sr), "--ack-wait", "5s", "--no-loop-guard",
			"--data-dir", data, "--http", "127.0.0.1:0", "--keep-jobs", s.cfg.keepJobs.String()}
		if s.storeURL != "" {
			args = append(args, "--store", s.storeURL)
		}
		p := &soakProc{name: fmt.Sprintf("replica%d", i+1), args: args, proxy: px}
		if err := p.start(s.self); err != nil {
			return err
		}
		s.reps = append(s.reps, p)
		if err := waitFor(ctx, 60*time.Second, []*child{p.cur()}, func() error { return p.cur().healthy() }); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return nil
}

// collect creates the stream the replicas' reactions are stored in (the
// nats driver then waits for its acknowledgement) and reads it in order.
func (s *soak) collect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A short duplicate window: a reaction published twice is counted.
	cfg := jetstream.StreamConfig{Name: "SOAK_REACTIONS", Subjects: []string{"soak.exec.>"}, Replicas: min(s.cfg.nodes, 3), Duplicates: time.Second,
		// The soak reads each reaction within seconds; an age bound keeps
		// its own stream from growing the nodes over hours.
		MaxAge: 15 * time.Minute}
	var st jetstream.Stream
	err := waitFor(cctx, 30*time.Second, nil, func() (err error) {
		st, err = s.js.CreateOrUpdateStream(cctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("the reactions' stream: %w", err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("the reactions' consumer: %w", err)
	}
	_, err = cons.Consume(func(m jetstream.Msg) {
		var v struct {
			Chunk struct {
				Tgt string `json:"tgt"`
				Arg []int  `json:"arg"`
			} `json:"chunk"`
		}
		if json.Unmarshal(m.Data(), &v) != nil || len(v.Chunk.Arg) != 1 {
			return
		}
		at := time.Now()
		if md, err := m.Metadata(); err == nil {
			at = md.Timestamp
		}
		s.ledger.reacted(v.Chunk.Tgt, v.Chunk.Arg[0], at)
	})
	return err
}

// record writes one line to the timeline.
func (s *soak) record(v any) {
	b, _ := json.Marshal(v)
	s.tlMu.Lock()
	defer s.tlMu.Unlock()
	_, _ = s.timeline.Write(append(b, '\n'))
}

// signal sends sig to a process.
func signalChild(c *child, sig syscall.Signal) error {
	if c == nil || c.cmd.Process == nil {
		return errors.New("not running")
	}
	return c.cmd.Process.Signal(sig)
}
