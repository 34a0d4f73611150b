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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/tcpproxy"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// The fault kinds of reactord-bench soak, in the order the issue ranks them.
const (
	faultNATSKill    = "nats-kill"    // SIGKILL a NATS node, restart it
	faultReplicaKill = "replica-kill" // SIGKILL a replica, restart it
	faultReplicaTerm = "replica-term" // SIGTERM a replica, restart it
	faultNetCut      = "net-cut"      // cut a replica from every node for a while
	faultReload      = "reload"       // change the reaction file, SIGHUP the replicas
	faultStoreCut    = "store-cut"    // cut the replicas from the audit database
	faultDiskFull    = "disk-full"    // fill a replica's data directory, then free it
	faultDBRestart   = "db-restart"   // SIGKILL the soak's own audit database server, start it again
	faultBridgeKill  = "bridge-kill"  // SIGKILL the bridge, restart it
)

// faultKinds are the faults every run can inject.
var faultKinds = []string{faultNATSKill, faultReplicaKill, faultReplicaTerm, faultNetCut, faultReload}

// optionalFaults are those a run injects when its options allow them.
var optionalFaults = []string{faultStoreCut, faultDiskFull, faultDBRestart, faultBridgeKill}

// kinds are the faults this run chooses from: store-cut too when the
// audit store is a database on the network (reached through a proxy),
// disk-full with --tmpfs, db-restart with --store-server, bridge-kill
// with a bridge.
func (s *soak) kinds() []string {
	kinds := slices.Clone(faultKinds)
	if s.storeProxy != nil {
		kinds = append(kinds, faultStoreCut)
	}
	if s.cfg.tmpfs {
		kinds = append(kinds, faultDiskFull)
	}
	if s.db != nil {
		kinds = append(kinds, faultDBRestart)
	}
	if s.bridge != nil {
		kinds = append(kinds, faultBridgeKill)
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
	// overlap is how many faults may be in progress at once.
	overlap int
	// storeServer, "mariadb" or "postgres", runs a private audit
	// database server the replicas store into (db-restart kills it).
	storeServer string
	// bridgeShare is the part of --rate and --minions that goes
	// through a bridge (0: none).
	bridgeShare float64
}

// soakProc is a process soak runs and restarts: a NATS node or a replica.
type soakProc struct {
	name string
	args []string
	// proxies are a replica's ways to the nodes, one to each, its own
	// node's first: a net-cut takes them all down.
	proxies []*tcpproxy.Proxy
	// http: the process serves /healthz, /metrics and Go's profiles (a
	// replica, the bridge, a NATS node), waited for and scraped.
	http bool
	// log is the file each life's stderr is appended to (DIR/logs/NAME.log).
	log string
	mu  sync.Mutex
	c   *child
}

func (p *soakProc) cur() *child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// start runs the process (again) with its arguments.
func (p *soakProc) start(self string) error {
	c := &child{name: p.name, cmd: exec.Command(self, p.args...), scrp: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableCompression: true}}}
	if p.log != "" {
		f, err := os.OpenFile(p.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("%s's log: %w", p.name, err)
		}
		c.log = f
	}
	if err := c.start(); err != nil {
		if c.log != nil {
			_ = c.log.Close()
		}
		return err
	}
	if c.log != nil {
		_, _ = fmt.Fprintf(c.log, "== %s (pid %d) started at %s\n", p.name, c.cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
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
	// through storeProxy), for the samples; nil without a --store.
	audit      *auditRows
	auditStore store.Store // the same database, read (Events, Trace) to tell what became of a lost event
	nc         *nats.Conn
	mounts     []string // --tmpfs's, unmounted at the end
	samples    []soakSample
	// db is --store-server's database server.
	db *dbServer
	// bridge, master, bledger and bridgedCC are the bridged share's
	// bridge process, the master it reads, the ledger of its events and
	// the soak's consumer of them in the event stream.
	bridge    *soakProc
	master    *fakeMaster
	bledger   *soakLedger
	bridgedCC jetstream.ConsumeContext
	// consumeErrs counts the errors bridgedCC reported.
	consumeErrs atomic.Int64
	// fmu guards faults, faultLog, samples, targetMu and generation (the
	// reaction file's, changed by each reload).
	fmu        sync.Mutex
	targetMu   map[string]*sync.Mutex
	generation int
}

// procs are the processes soak samples: the NATS nodes, the replicas
// and the bridge.
func (s *soak) procs() []*soakProc {
	ps := append(append([]*soakProc{}, s.nodes...), s.reps...)
	if s.bridge != nil {
		ps = append(ps, s.bridge)
	}
	return ps
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
	// RSSGrowthBy is every process's RSS slope after the warm-up (MB per
	// hour); AnonGrowth and AnonGrowthBy the same for the anonymous part of
	// the RSS, which leaves out the pages of mapped files (the binary's
	// code, touched a little more as faults run new paths).
	RSSGrowthBy    map[string]float64 `json:"rss_growth_by_process,omitempty"`
	AnonGrowth     float64            `json:"anon_growth_mb_per_hour"`
	AnonGrowthProc string             `json:"anon_growth_process"`
	AnonGrowthBy   map[string]float64 `json:"anon_growth_by_process,omitempty"`
	// FloorGrowth and FloorGrowthBy are the slopes of each process's
	// lowest RSS in each ten minutes of its life: a leak raises that floor,
	// while the bursts of a fault (records held through a store outage)
	// that the runtime gives back within minutes do not.
	FloorGrowth     float64            `json:"rss_floor_growth_mb_per_hour"`
	FloorGrowthProc string             `json:"rss_floor_growth_process"`
	FloorGrowthBy   map[string]float64 `json:"rss_floor_growth_by_process,omitempty"`
	// AnonFloorGrowthBy is the same slope for the anonymous part of the
	// RSS (without the binary's pages).
	AnonFloorGrowthBy map[string]float64 `json:"anon_floor_growth_by_process,omitempty"`
	// LiveGrowthBy and LiveFloorGrowthBy are the slope and the floor's
	// slope, in MB per hour, of each process's live heap (the heap its
	// last garbage collection found reachable) after the warm-up: a leak
	// in the Go code shows there without the runtime's own memory.
	LiveGrowthBy      map[string]float64 `json:"heap_live_growth_by_process,omitempty"`
	LiveFloorGrowthBy map[string]float64 `json:"heap_live_floor_growth_by_process,omitempty"`
	GoroutinesIn      int64              `json:"goroutines_start"`
	GoroutinesOut     int64              `json:"goroutines_end"`
	FDsIn             int64              `json:"fds_start"`
	FDsOut            int64              `json:"fds_end"`
	P50ms             float64            `json:"p50_ms"`
	P99ms             float64            `json:"p99_ms"`
	// StreamMsgsMax is the most messages the event stream held at a
	// sample; AuditRowsMax the most rows of the audit tables (with a
	// --store database), and AuditRowsWarm that after the warm-up: both
	// bounded when retention holds.
	StreamMsgsMax uint64 `json:"stream_msgs_max"`
	AuditRowsMax  int64  `json:"audit_rows_max,omitempty"`
	AuditRowsWarm int64  `json:"audit_rows_max_after_warmup,omitempty"`
	// StorePendingEnd is the audit records the replicas still held (in
	// memory or their spool) at the end, after the drain: 0 when
	// everything the store outages held back arrived.
	StorePendingEnd int64 `json:"store_pending_end"`
	// Bridged accounts for the events that went through the bridge.
	Bridged     *bridgedSummary `json:"bridged,omitempty"`
	Overlap     int             `json:"overlap"`
	Seed        uint64          `json:"seed"`
	Rate        int             `json:"rate"`
	Minions     int             `json:"minions"`
	Replicas    int             `json:"replicas"`
	Nodes       int             `json:"nodes"`
	Partitions  int             `json:"partitions"`
	Store       string          `json:"store"`
	StoreServer string          `json:"store_server,omitempty"`
	LostSample  []string        `json:"lost_sample,omitempty"`
	// LostInStream is how many of the events counted lost have a reaction
	// in the reactions' stream after all, read again from its start once
	// the run is over: the soak's own reader missed them, reactord did not.
	LostInStream int64 `json:"lost_in_stream,omitempty"`
	// LostDetail says, for a few lost events, where their reaction was
	// looked for.
	LostDetail []string `json:"lost_detail,omitempty"`
	NotDone    []string `json:"not_implemented"`
}

// soakNotDone lists the faults soak does not inject: none now.
var soakNotDone = []string{}

// cmdSoak is reactord-bench soak.
func cmdSoak(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	notDone := ""
	if len(soakNotDone) > 0 {
		notDone = "\nNot implemented: " + strings.Join(soakNotDone, "; ") + "."
	}
	fs := newFlags("soak", "reactord-bench soak [--duration D] [--rate R] [--minions M] [--replicas N] [--nodes N] [--fault-every D] [--overlap N] [--seed S] [--out DIR] [--store URL | --store-server mariadb|postgres] [--bridge-share F]",
		`Runs a NATS cluster (--nodes processes, the stream on min(3, nodes)),
--replicas daemons (--jetstream --partitions, the nats driver publishing
each reaction to a stream the soak reads) and steady master-shaped traffic
(minion starts, beacons, job returns, some of ~100 KB, key events; each
event numbered per minion). --bridge-share of the rate and the minions
goes through a reactord bridge process reading a Salt master's event
socket the soak plays; the rest is published to the stream directly.
Every --fault-every it injects one fault (up to --overlap in progress at
once) chosen with --seed among: `+strings.Join(faultKinds, ", ")+`,
`+faultBridgeKill+` (the bridge SIGKILLed, restarted) with a bridge,
`+faultStoreCut+` (the replicas' way to a --store database cut for twice
--down) when --store is a mysql:// or postgres:// URL or --store-server
is set, `+faultDBRestart+` (the private audit database server of
--store-server SIGKILLed for twice --down, started again), and
`+faultDiskFull+` (a replica's data directory filled for twice --down,
then freed) with --tmpfs.`+notDone+`
Every --interval it samples each process (RSS and open files from /proc,
goroutines, Go heap and audit store records from the replicas' /metrics),
the event stream and
the publish-to-reaction latency into DIR/timeline.jsonl (each fault's
start and end as lines of their own), draws DIR/soak.png, and prints one
JSON summary line last. It exits 1 when an acknowledged event was lost
or reacted out of order.`, stderr)
	var c soakConfig
	fs.DurationVar(&c.duration, "duration", 2*time.Minute, "how long traffic and faults run")
	fs.DurationVar(&c.interval, "interval", 5*time.Second, "sampling interval")
	fs.DurationVar(&c.faultEvery, "fault-every", time.Minute, "time between faults (0: none)")
	fs.IntVar(&c.overlap, "overlap", 1, "most faults in progress at once (a fault starts --fault-every after the previous one started while fewer are)")
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
	fs.StringVar(&c.storeServer, "store-server", "", "mariadb or postgres: a private database server of the soak's own, in a temporary directory on a free port, as every replica's store (the db-restart fault)")
	fs.Float64Var(&c.bridgeShare, "bridge-share", 0.2, "part of --rate and --minions sent through a reactord bridge (0: none; the bridge-kill fault)")
	fs.BoolVar(&c.tmpfs, "tmpfs", false, "each replica's data directory a 64 MiB tmpfs (root, Linux), and the disk-full fault")
	sched := fs.String("faults", "", "comma-separated fault kinds in order, cycled, in place of random ones")
	growthOf := fs.String("growth-of", "", "run nothing: read an earlier run's timeline.jsonl and print its processes' growth (after --warmup, default a fifth of the run) as one JSON line")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *growthOf != "" {
		g, err := growthOfTimeline(*growthOf, c.warmup)
		if err != nil {
			fmt.Fprintf(stderr, "soak: %v\n", err)
			return exitUsage
		}
		out, _ := json.Marshal(g)
		fmt.Fprintf(stdout, "%s\n", out)
		return exitOK
	}
	if err := c.check(*sched); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return exitUsage
	}
	sum, err := runSoak(ctx, c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return exitUsage
	}
	out, _ := json.Marshal(sum)
	fmt.Fprintf(stdout, "%s\n", out)
	lost, ooo := sum.Lost, sum.OutOfOrder
	if sum.Bridged != nil {
		lost, ooo = lost+sum.Bridged.Lost, ooo+sum.Bridged.OutOfOrder
	}
	if lost > 0 || ooo > 0 {
		fmt.Fprintf(stderr, "soak: seed %d: %d acknowledged events lost, %d out of order\n", sum.Seed, lost, ooo)
		return exitFound
	}
	return exitOK
}

// check validates the options and reads --faults into the schedule.
func (c *soakConfig) check(sched string) error {
	if sched != "" {
		for _, k := range strings.Split(sched, ",") {
			if !containsString(faultKinds, k) && !containsString(optionalFaults, k) {
				return fmt.Errorf("unknown fault %q (have %s)", k, strings.Join(append(slices.Clone(faultKinds), optionalFaults...), ", "))
			}
			c.schedule = append(c.schedule, k)
		}
	}
	if c.nodes < 1 || c.replicas < 1 || c.minions < 1 || c.rate < 1 || c.overlap < 1 {
		return errors.New("--nodes, --replicas, --minions, --rate and --overlap must be at least 1")
	}
	if c.bridgeShare < 0 || c.bridgeShare >= 1 {
		return fmt.Errorf("--bridge-share %v: want 0 or more, below 1", c.bridgeShare)
	}
	if _, m := c.bridgedShare(); m >= c.minions {
		return fmt.Errorf("--bridge-share %v leaves no minion of %d for the direct traffic", c.bridgeShare, c.minions)
	}
	if c.bridgeShare > 0 && c.partitions < 1 {
		return errors.New("--bridge-share needs --partitions (the soak reads the bridged events from the partitioned stream)")
	}
	if c.store != "" && c.storeServer != "" {
		return errors.New("--store and --store-server: give one")
	}
	if c.warmup == 0 {
		c.warmup = c.duration / 5
	}
	return nil
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
	// The reaction file is rewritten in place (truncated, then written),
	// as an editor or `cat >` does, while the replicas render it: none may
	// react to it as an empty file meanwhile (reactions.Library.Settle).
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
	s := &soak{cfg: cfg, faults: map[string]int{}, ledger: newSoakLedger(), bledger: newSoakLedger()}
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
	if err := os.MkdirAll(filepath.Join(cfg.out, "logs"), 0o755); err != nil {
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
	pc, err := s.setup(ctx, stderr)
	if err != nil {
		return soakSummary{}, err
	}
	defer pc.Close()
	fmt.Fprintf(stderr, "soak: seed %d, %d nodes, %d replicas, %d events/s for %v, a fault every %v (up to %d at once); out %s\n",
		cfg.seed, cfg.nodes, cfg.replicas, cfg.rate, cfg.duration, cfg.faultEvery, max(1, cfg.overlap), s.cfg.out)

	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, cfg.duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { s.traffic(runCtx, pc) })
	if s.bridge != nil {
		wg.Go(func() { s.bridgedTraffic(runCtx, stderr) })
	}
	wg.Go(func() { s.nemesis(runCtx, start, stderr) })
	wg.Go(func() {
		select {
		case <-time.After(cfg.warmup):
			s.heapProfiles("warm", stderr)
		case <-runCtx.Done():
		}
	})
	if s.audit != nil {
		wg.Go(func() { s.audit.run(runCtx) })
	}
	s.sampleUntil(runCtx, start)
	wg.Wait()
	if ctx.Err() != nil {
		return soakSummary{}, ctx.Err()
	}
	if err := s.drain(ctx); err != nil {
		return soakSummary{}, err
	}
	if s.audit != nil {
		if err := s.audit.count(ctx); err != nil { // the end's own count
			fmt.Fprintf(stderr, "soak: counting the audit rows at the end: %v (the summary keeps the last count)\n", err)
		}
	}
	s.sample(start) // the end, after the drain
	s.heapProfiles("end", stderr)
	sum := s.summary(start)
	if sum.Lost > 0 || (sum.Bridged != nil && sum.Bridged.Lost > 0) {
		s.recheckLost(ctx, start, &sum, stderr)
	}
	if err := plotSoak(filepath.Join(s.cfg.out, "soak.png"), s.samples, s.faultLog); err != nil {
		fmt.Fprintf(stderr, "soak: drawing soak.png: %v\n", err)
	}
	return sum, nil
}

// setup starts the NATS cluster, the reactions' reader, the audit
// database server, the replicas and the bridge, and returns the
// publisher's connection.
func (s *soak) setup(ctx context.Context, stderr io.Writer) (*natsbus.Conn, error) {
	cfg := s.cfg
	if err := s.startCluster(ctx); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(s.urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		return nil, err
	}
	if err := s.collect(ctx); err != nil {
		return nil, err
	}
	if cfg.storeServer != "" {
		if s.db, err = startDBServer(ctx, cfg.storeServer); err != nil {
			return nil, fmt.Errorf("--store-server %s: %w", cfg.storeServer, err)
		}
		s.cfg.store = s.db.url
	}
	if err := s.proxyStore(); err != nil {
		return nil, err
	}
	if s.storeProxy != nil {
		st, err := sqlstore.Open(ctx, s.cfg.store)
		if err != nil {
			return nil, err
		}
		s.auditStore = st
		if c, ok := st.(rowCounter); ok {
			s.audit = newAuditRows(c)
		}
	}
	for k, why := range map[string]string{faultStoreCut: "a --store mysql:// or postgres:// URL or --store-server", faultDiskFull: "--tmpfs",
		faultDBRestart: "--store-server", faultBridgeKill: "--bridge-share above 0"} {
		if containsString(cfg.schedule, k) && !s.can(k) {
			return nil, fmt.Errorf("--faults %s needs %s", k, why)
		}
	}
	if err := s.startReplicas(ctx); err != nil {
		return nil, err
	}
	if _, m := cfg.bridgedShare(); m > 0 {
		if err := s.startBridge(ctx, stderr); err != nil {
			return nil, fmt.Errorf("the bridge: %w", err)
		}
	}
	pc, err := natsbus.Connect(natsbus.ConnOptions{URL: strings.Join(s.urls, ","), Name: "soak-publisher"})
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	return pc, nil
}

// can tells whether this run's options allow an optional fault.
func (s *soak) can(kind string) bool {
	switch kind {
	case faultStoreCut:
		return s.storeProxy != nil
	case faultDiskFull:
		return s.cfg.tmpfs
	case faultDBRestart:
		return s.cfg.storeServer != ""
	case faultBridgeKill:
		return s.cfg.bridgeShare > 0
	}
	return true
}

// drain waits, once the faults stopped and every process runs again,
// until every acknowledged event reacted and the replicas hold no audit
// record back, or nothing moved for 30 s (3 minutes at most).
func (s *soak) drain(ctx context.Context) error {
	for _, p := range s.procs() {
		if err := p.cur().exited(); err != nil {
			return fmt.Errorf("after the faults: %w", err)
		}
	}
	last, moved := int64(-1), time.Now()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		lost, _ := s.ledger.lost()
		blost, _ := s.bledger.lost()
		pending := s.storePending()
		if lost+blost == 0 && pending == 0 {
			return nil
		}
		if r := s.ledger.reactedCount() + s.bledger.reactedCount() - pending; r != last {
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

// storePending is the audit records the replicas hold back (in memory
// or their spool), from their /metrics.
func (s *soak) storePending() int64 {
	var n int64
	for _, p := range s.reps {
		if m, err := p.cur().scrape(); err == nil {
			n += int64(m.value("reactord_store_pending_records"))
		}
	}
	return n
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
	if s.db != nil {
		defer s.db.stop()
	}
	if s.storeProxy != nil {
		defer s.storeProxy.Down()
	}
	if s.auditStore != nil {
		defer s.auditStore.Close()
	}
	if s.nc != nil {
		defer s.nc.Close()
	}
	if s.bridgedCC != nil {
		s.bridgedCC.Stop()
	}
	if s.bridge != nil {
		if c := s.bridge.cur(); c != nil {
			c.stop(15 * time.Second)
		}
	}
	if s.master != nil {
		s.master.close()
	}
	for _, p := range s.reps {
		if c := p.cur(); c != nil {
			c.stop(15 * time.Second)
		}
		for _, px := range p.proxies {
			px.Down()
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

// logPath is where a process's log goes: DIR/logs/NAME.log, every life
// of it appended (a failed run's cause is read there).
func (s *soak) logPath(name string) string {
	return filepath.Join(s.cfg.out, "logs", name+".log")
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
		p := &soakProc{name: fmt.Sprintf("n%d", i+1), log: s.logPath(fmt.Sprintf("n%d", i+1)), args: []string{"natsnode", "--name", fmt.Sprintf("n%d", i+1),
			"--listen", fmt.Sprintf("127.0.0.1:%d", clientPorts[i]), "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]),
			"--routes", strings.Join(routes, ","), "--data-dir", filepath.Join(s.dir, fmt.Sprintf("n%d", i+1)), "--http", "127.0.0.1:0",
			// A replica reaches the nodes only through its proxies, also
			// after a cut: the nodes do not tell it their own addresses.
			"--no-advertise"}, http: true}
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
		var proxies []*tcpproxy.Proxy
		var via []string
		for j := range s.urls {
			target := strings.TrimPrefix(s.urls[(i+j)%len(s.urls)], "nats://")
			px, err := tcpproxy.Listen(target)
			if err != nil {
				return err
			}
			proxies, via = append(proxies, px), append(via, "nats://"+px.Addr())
		}
		args := []string{"replica", "-c", s.conf, "--nats", strings.Join(via, ","), "--driver", "nats",
			"--exec-subject", fmt.Sprintf("soak.exec.r%d.", i+1), "--jetstream", "--partitions", strconv.Itoa(s.cfg.partitions),
			"--stream-replicas", strconv.Itoa(sr), "--ack-wait", "5s", "--no-loop-guard",
			"--data-dir", data, "--http", "127.0.0.1:0", "--pprof", "--keep-jobs", s.cfg.keepJobs.String()}
		if s.storeURL != "" {
			args = append(args, "--store", s.storeURL)
		}
		p := &soakProc{name: fmt.Sprintf("replica%d", i+1), log: s.logPath(fmt.Sprintf("replica%d", i+1)), args: args, proxies: proxies, http: true}
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
		minion, n, ok := soakReaction(m.Data())
		if !ok {
			return
		}
		at := time.Now()
		if md, err := m.Metadata(); err == nil {
			at = md.Timestamp
		}
		l := s.ledger
		if strings.HasPrefix(minion, "b") { // a bridged minion
			l = s.bledger
		}
		l.reacted(minion, n, at)
	})
	return err
}

// soakReaction reads a reaction the replicas stored: the minion it
// targets and the number of the event it reacts to (its one argument).
func soakReaction(data []byte) (minion string, n int, ok bool) {
	var v struct {
		Chunk struct {
			Tgt string `json:"tgt"`
			Arg []int  `json:"arg"`
		} `json:"chunk"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Chunk.Arg) != 1 {
		return "", 0, false
	}
	return v.Chunk.Tgt, v.Chunk.Arg[0], true
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
