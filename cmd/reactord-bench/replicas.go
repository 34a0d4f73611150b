package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// replicasBench is reactord-bench --replicas: the daemons run as
// processes of their own on one NATS server (embedded in the bench's
// process) or on a cluster of NATS nodes (each a process).
type replicasBench struct {
	replicas, nodes, partitions int
	total                       int64
	rate, lanes, queue          int
	js, noGuard, sharedState    bool
	// floor runs plain JetStream consumers (reactord-bench floor) in
	// place of the daemons: the floor under them, on the same server.
	floor bool
	// sync is the embedded server's SyncInterval (0: each write flushed,
	// the daemon's default); not for --cluster.
	sync time.Duration
	// singles publishes one message at a time (--publish-batches=false).
	singles   bool
	store     string // "": the daemon's default (SQLite under its --data-dir)
	conf, dir string
	lines     [][]byte
}

// benchReplicasResult is the line reactord-bench --replicas prints: the
// fields bench prints for one process where they can be read from the
// replicas' /metrics, and the replicas' own figures.
type benchReplicasResult struct {
	Published int64            `json:"published"`
	Handled   int64            `json:"handled"`
	Dropped   map[string]int64 `json:"dropped"`
	NeverSeen int64            `json:"never_seen"`
	// Received is reactord_events_total summed: handled events plus any
	// delivered twice (redelivered, or moved with a partition).
	Received int64 `json:"received"`
	// PartitionChanges is reactord_partition_changes_total summed over the
	// replicas, by change (acquired, released, lost, resync, drained): a
	// lost lease or a resync tells why events were handled twice.
	PartitionChanges    map[string]int64 `json:"partition_changes,omitempty"`
	ArchiveDropped      int64            `json:"archive_dropped"`
	StoreRecordsDropped int64            `json:"store_records_dropped"`
	LogLines            int64            `json:"log_lines"`
	EventsPerSec        int64            `json:"events_per_sec"`
	ElapsedS            float64          `json:"elapsed_s"`
	P50ms               float64          `json:"p50_ms"`
	P90ms               float64          `json:"p90_ms"`
	P99ms               float64          `json:"p99_ms"`
	// Latency says where the percentiles come from: the replicas'
	// reactord_event_sent_latency_seconds buckets, added up and
	// interpolated within a bucket (as PromQL's histogram_quantile).
	Latency string `json:"latency"`
	// CPUms is the CPU time of the replicas and the NATS servers per
	// 1,000 events handled (the publisher's not), then each part.
	CPUms         float64 `json:"cpu_ms_per_1k"`
	ReplicasCPUms float64 `json:"replicas_cpu_ms_per_1k"`
	// ReplicasEventCPUms is ReplicasCPUms less what the replicas spent
	// idle over the run's time (their idle_cpu_ms_per_s): the cost of
	// the events alone.
	ReplicasEventCPUms float64 `json:"replicas_event_cpu_ms_per_1k"`
	NATSCPUms          float64 `json:"nats_cpu_ms_per_1k"`
	PublisherCPUms     float64 `json:"publisher_cpu_ms_per_1k"`
	Mode               string  `json:"mode"`
	Rate               int     `json:"rate"`
	Reactions          int64   `json:"reactions"`
	Store              string  `json:"store"`
	LoopGuard          bool    `json:"loop_guard"`
	SharedState        bool    `json:"shared_state"`
	Replicas           int     `json:"replicas"`
	// NATSNodes is 1 for the server embedded in the bench's process, else
	// the cluster's nodes, each a process.
	NATSNodes      int           `json:"nats_nodes"`
	StreamReplicas int           `json:"stream_replicas"`
	Partitions     int           `json:"partitions"`
	PerReplica     []replicaFigs `json:"per_replica"`
	PerNode        []nodeFigs    `json:"per_node,omitempty"`
}

// replicaFigs are one replica's figures for the run.
type replicaFigs struct {
	Handled  int64 `json:"handled"`
	Received int64 `json:"received"`
	// IdleCPUms is the CPU time the replica used per second before any
	// event was published (its fixed cost: leases, heartbeats, timers).
	IdleCPUms  float64 `json:"idle_cpu_ms_per_s"`
	CPUms      int64   `json:"cpu_ms"`
	RSSMB      float64 `json:"rss_mb"`
	Partitions int     `json:"partitions,omitempty"`
}

// nodeFigs are one NATS node's figures for the run.
type nodeFigs struct {
	CPUms int64   `json:"cpu_ms"`
	RSSMB float64 `json:"rss_mb"`
}

// child is a process the bench started: a NATS node or a replica.
type child struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error // set before done closes
	lines atomic.Int64
	mu    sync.Mutex
	tail  []string // the last lines of its stderr
	warns []string // its first warnings and errors (maxWarns)
	addr  string   // a replica's --http address, from its log
	// reloads counts a daemon's "configuration reloaded" lines (soak's
	// reload fault waits for them).
	reloads atomic.Int64
	scrp    *http.Client
	// log, when set, receives every line of its stderr (the soak's
	// DIR/logs/NAME.log); closed when the child ends.
	log io.WriteCloser
}

// start runs the child with its stderr read line by line.
func (c *child) start() error {
	r, err := c.cmd.StderrPipe()
	if err != nil {
		return err
	}
	dieWithParent(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	c.done = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			c.lines.Add(1)
			if c.log != nil {
				_, _ = io.WriteString(c.log, l+"\n")
			}
			if strings.Contains(l, `msg="configuration reloaded"`) {
				c.reloads.Add(1)
			}
			c.mu.Lock()
			if c.addr == "" && strings.Contains(l, `msg="serving metrics"`) {
				if _, a, ok := strings.Cut(l, " addr="); ok {
					c.addr, _, _ = strings.Cut(a, " ")
				}
			}
			if len(c.warns) < maxWarns && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
				c.warns = append(c.warns, l)
			}
			if c.tail = append(c.tail, l); len(c.tail) > 20 {
				c.tail = c.tail[1:]
			}
			c.mu.Unlock()
		}
		c.err = c.cmd.Wait()
		if c.log != nil {
			_, _ = fmt.Fprintf(c.log, "== %s (pid %d) ended: %v\n", c.name, c.cmd.Process.Pid, c.err)
			_ = c.log.Close()
		}
		close(c.done)
	}()
	return nil
}

// maxWarns bounds the warnings and errors a child keeps.
const maxWarns = 40

// warnings returns the first warnings and errors the child logged.
func (c *child) warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.warns)
}

// logs returns the last lines the child logged.
func (c *child) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

func (c *child) httpAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// stop sends SIGTERM, waits up to grace, then kills. It is safe on a child
// that never started or already ended.
func (c *child) stop(grace time.Duration) {
	if c.done == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited: %v\n%s", c.name, c.err, c.logs())
	default:
		return nil
	}
}

// waitFor polls fn every 50ms until it succeeds, a child exits or timeout.
func waitFor(ctx context.Context, timeout time.Duration, children []*child, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		for _, c := range children {
			if e := c.exited(); e != nil {
				return e
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// idleWindow is how long idleCPU watches the replicas before any event.
const idleWindow = 3 * time.Second

// idleCPU measures what the replicas spend with no event (lease renewals,
// heartbeats, timers) over idleWindow: a cost per replica per second,
// which the run's figures hold on top of what the events cost. It returns
// each replica's CPU time over the window and at its end.
func idleCPU(ctx context.Context, reps []*child) (idle, now []time.Duration, err error) {
	start := make([]time.Duration, len(reps))
	for i, r := range reps {
		start[i], _ = procCPU(r.cmd.Process.Pid)
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(idleWindow):
	}
	idle, now = make([]time.Duration, len(reps)), make([]time.Duration, len(reps))
	for i, r := range reps {
		now[i], _ = procCPU(r.cmd.Process.Pid)
		idle[i] = now[i] - start[i]
	}
	return idle, now, nil
}

// scrapeEvery is how often the bench reads the replicas' /metrics while
// they work.
const scrapeEvery = 250 * time.Millisecond

// freePort returns a TCP port nothing listens on at the moment.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runReplicasBench runs the daemons as processes, publishes the workload
// and prints one JSON line.
func runReplicasBench(ctx context.Context, b replicasBench, stdout, stderr io.Writer) int {
	res, err := measureReplicas(ctx, b, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	out, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}

// measureReplicas runs the daemons (or, with b.floor, plain JetStream
// consumers) as processes on a NATS server or cluster of their own,
// publishes the workload and returns the figures.
func measureReplicas(ctx context.Context, b replicasBench, stderr io.Writer) (benchReplicasResult, error) {
	fail := func(format string, a ...any) (benchReplicasResult, error) {
		return benchReplicasResult{}, fmt.Errorf(format, a...)
	}
	self, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	// NATS: one server in this process, or a cluster of node processes.
	var urls []string
	var nodes []*child
	natsCPU := processCPU
	if b.nodes == 0 {
		srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: filepath.Join(b.dir, "js"), SyncInterval: b.sync})
		if err != nil {
			return fail("%v", err)
		}
		stops = append(stops, srv.Shutdown)
		urls = []string{srv.ClientURL()}
	} else {
		var routes []string
		var clientPorts, routePorts []int
		for range b.nodes {
			cp, err1 := freePort()
			rp, err2 := freePort()
			if err := errors.Join(err1, err2); err != nil {
				return fail("%v", err)
			}
			clientPorts, routePorts = append(clientPorts, cp), append(routePorts, rp)
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", rp))
			urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", cp))
		}
		for i := range b.nodes {
			c := &child{name: fmt.Sprintf("NATS node n%d", i+1), cmd: exec.Command(self, "natsnode", "--name", fmt.Sprintf("n%d", i+1),
				"--listen", fmt.Sprintf("127.0.0.1:%d", clientPorts[i]), "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]),
				"--routes", strings.Join(routes, ","), "--data-dir", filepath.Join(b.dir, fmt.Sprintf("n%d", i+1)))}
			if err := c.start(); err != nil {
				return fail("%v", err)
			}
			stops = append(stops, func() { c.stop(10 * time.Second) })
			nodes = append(nodes, c)
		}
		natsCPU = func() time.Duration {
			var sum time.Duration
			for _, n := range nodes {
				cpu, _ := procCPU(n.cmd.Process.Pid)
				sum += cpu
			}
			return sum
		}
	}
	natsURL := strings.Join(urls, ",")
	var conn *natsbus.Conn
	if err := waitFor(ctx, 30*time.Second, nodes, func() (err error) {
		conn, err = natsbus.Connect(natsbus.ConnOptions{URL: natsURL, Name: "bench"})
		return err
	}); err != nil {
		return fail("NATS: %v", err)
	}
	stops = append(stops, conn.Close)
	streamReplicas := min(b.nodes, 3)
	if err := waitFor(ctx, 30*time.Second, nodes, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return conn.JetStreamReady(cctx, streamReplicas)
	}); err != nil {
		return fail("NATS: %v", err)
	}
	// The replicas.
	var reps []*child
	for i := range b.replicas {
		args := []string{"-c", b.conf, "--nats", natsURL, "--driver", "null", "--data-dir", filepath.Join(b.dir, fmt.Sprintf("replica%d", i+1)),
			"--http", "127.0.0.1:0", "--workers", strconv.Itoa(b.lanes), "--queue", strconv.Itoa(b.queue), "--jetstream=" + strconv.FormatBool(b.js)}
		if streamReplicas > 1 {
			args = append(args, "--stream-replicas", strconv.Itoa(streamReplicas))
		}
		if b.partitions > 0 {
			args = append(args, "--partitions", strconv.Itoa(b.partitions))
		}
		if b.store != "" {
			args = append(args, "--store", b.store)
		}
		if b.noGuard {
			args = append(args, "--no-loop-guard")
		}
		if !b.sharedState {
			args = append(args, "--shared-state=false")
		}
		cmd := exec.Command(self, append([]string{"replica"}, args...)...)
		if b.floor {
			cmd = exec.Command(self, "floor", "--nats", natsURL)
		}
		// Uncompressed: gzipping /metrics at every poll would be counted
		// in the replicas' CPU.
		c := &child{name: fmt.Sprintf("replica %d", i+1), cmd: cmd, scrp: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}}
		if err := c.start(); err != nil {
			return fail("%v", err)
		}
		stops = append(stops, func() { c.stop(20 * time.Second) })
		reps = append(reps, c)
		// One at a time: the first creates the stream and the buckets.
		if err := waitFor(ctx, 60*time.Second, append(slices.Clone(nodes), c), func() error { return c.healthy() }); err != nil {
			return fail("%s: %v", c.name, err)
		}
	}
	if b.partitions > 0 && !b.floor {
		// The replicas balance the partitions among themselves.
		share := (b.partitions + b.replicas - 1) / b.replicas
		if err := waitFor(ctx, 60*time.Second, append(slices.Clone(nodes), reps...), func() error {
			sum, most := 0, 0
			for _, r := range reps {
				m, err := r.scrape()
				if err != nil {
					return err
				}
				n := int(m.value("reactord_partitions_owned"))
				sum, most = sum+n, max(most, n)
			}
			if sum != b.partitions || most > share {
				return fmt.Errorf("partitions held %d of %d, at most %d by one replica (want %d)", sum, b.partitions, most, share)
			}
			return nil
		}); err != nil {
			return fail("%v", err)
		}
	}
	evFile := filepath.Join(b.dir, "events.jsonl")
	if err := os.WriteFile(evFile, joinLines(b.lines), 0o644); err != nil {
		return fail("%v", err)
	}
	idle, cpu0, err := idleCPU(ctx, reps)
	if err != nil {
		return benchReplicasResult{}, err
	}
	nats0 := natsCPU()
	pargs := []string{"publish", "--nats", natsURL, "--file", evFile, "--events", strconv.FormatInt(b.total, 10), "--rate", strconv.Itoa(b.rate)}
	if b.js {
		pargs = append(pargs, "--jetstream")
		if b.singles {
			pargs = append(pargs, "--publish-batches=false")
		}
	}
	pub := exec.CommandContext(ctx, self, pargs...)
	pub.Stderr = stderr
	dieWithParent(pub)
	start := time.Now()
	if err := pub.Start(); err != nil {
		return fail("publisher: %v", err)
	}
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.Wait() }()
	// Poll the replicas until every event is handled (every scrapeEvery:
	// a scrape costs each replica CPU, which the figures include) or counted as
	// dropped, or until nothing moved for quiet.
	const quiet = 10 * time.Second
	deadline := time.Now().Add(10 * time.Minute)
	lastSum, lastMove := int64(-1), time.Now()
	var end time.Time
	var final []promText
	published := false
	for {
		ms := make([]promText, len(reps))
		var sum int64
		for i, r := range reps {
			m, err := r.scrape()
			if err != nil {
				if e := r.exited(); e != nil {
					return fail("%v", e)
				}
				continue
			}
			ms[i] = m
			sum += int64(m.value("reactord_event_sent_latency_seconds_count")) + int64(m.sum("reactord_dropped_total"))
		}
		now := time.Now()
		if !published {
			select {
			case err := <-pubErr:
				if err != nil {
					return fail("publishing: %v", err)
				}
				published, lastMove = true, now
			default:
			}
		}
		if sum >= b.total {
			end, final = now, ms
			break
		}
		if sum != lastSum {
			lastSum, lastMove = sum, now
		}
		if published && now.Sub(lastMove) > quiet {
			end, final = lastMove, ms
			break
		}
		if now.After(deadline) {
			return fail("only %d of %d events handled or dropped after 10 minutes", sum, b.total)
		}
		select {
		case <-ctx.Done():
			return benchReplicasResult{}, ctx.Err()
		case <-time.After(scrapeEvery):
		}
	}
	natsUsed := natsCPU() - nats0
	res := benchReplicasResult{Published: b.total, Dropped: map[string]int64{}, Rate: b.rate, LoopGuard: !b.noGuard, SharedState: b.sharedState,
		Replicas: b.replicas, NATSNodes: max(b.nodes, 1), StreamReplicas: max(streamReplicas, 1), Partitions: b.partitions,
		Latency: "reactord_event_sent_latency_seconds buckets of the replicas, added up, interpolated within a bucket"}
	res.Mode = "core"
	switch {
	case b.floor:
		res.Mode = "jetstream-floor"
	case b.js:
		res.Mode = "jetstream"
	}
	res.Store = "sqlite"
	if b.store != "" {
		res.Store, _, _ = strings.Cut(b.store, "://")
	}
	var hist map[float64]float64
	var repCPU time.Duration
	for i, r := range reps {
		m := final[i]
		cpu, _ := procCPU(r.cmd.Process.Pid)
		cpu -= cpu0[i]
		repCPU += cpu
		f := replicaFigs{Handled: int64(m.value("reactord_event_sent_latency_seconds_count")), Received: int64(m.value("reactord_events_total")),
			IdleCPUms: math.Round(float64(idle[i].Microseconds())/idleWindow.Seconds()) / 1000,
			CPUms:     cpu.Milliseconds(), RSSMB: math.Round(m.value("process_resident_memory_bytes")/(1<<20)*10) / 10, Partitions: int(m.value("reactord_partitions_owned"))}
		res.PerReplica = append(res.PerReplica, f)
		res.Handled += f.Handled
		res.Received += f.Received
		for k, v := range m.byLabel("reactord_dropped_total", "reason") {
			res.Dropped[k] += int64(v)
		}
		for k, v := range m.byLabel("reactord_partition_changes_total", "change") {
			if v > 0 {
				if res.PartitionChanges == nil {
					res.PartitionChanges = map[string]int64{}
				}
				res.PartitionChanges[k] += int64(v)
			}
		}
		res.ArchiveDropped += int64(m.value("reactord_archive_dropped_total"))
		res.StoreRecordsDropped += int64(m.value("reactord_store_records_dropped_total"))
		res.Reactions += int64(m.sum("reactord_actions_total"))
		res.LogLines += r.lines.Load()
		for le, n := range m.byLabelFloat("reactord_event_sent_latency_seconds_bucket", "le") {
			if hist == nil {
				hist = map[float64]float64{}
			}
			hist[le] += n
		}
	}
	for _, n := range nodes {
		cpu, _ := procCPU(n.cmd.Process.Pid)
		res.PerNode = append(res.PerNode, nodeFigs{CPUms: cpu.Milliseconds(), RSSMB: math.Round(float64(procRSS(n.cmd.Process.Pid))/(1<<20)*10) / 10})
	}
	res.NeverSeen = max(0, b.total-res.Handled-sumDropped(res.Dropped))
	if res.Handled != b.total {
		// Events handled twice or never: what the replicas warned of
		// (a lost lease, an unconfirmed acknowledgement) says why.
		for _, r := range reps {
			for _, l := range r.warnings() {
				fmt.Fprintf(stderr, "%s: %s\n", r.name, l)
			}
		}
	}
	elapsed := end.Sub(start)
	res.ElapsedS = math.Round(elapsed.Seconds()*1000) / 1000
	res.EventsPerSec = int64(float64(res.Handled) / elapsed.Seconds())
	res.P50ms, res.P90ms, res.P99ms = histQuantileMS(hist, 0.5), histQuantileMS(hist, 0.9), histQuantileMS(hist, 0.99)
	if !published {
		if err := <-pubErr; err != nil {
			return fail("publishing: %v", err)
		}
	}
	var pubCPU time.Duration
	if ru, ok := pub.ProcessState.SysUsage().(*syscall.Rusage); ok {
		pubCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if res.Handled > 0 {
		per1k := func(d time.Duration) float64 {
			return math.Round(float64(d.Microseconds())/float64(res.Handled)*1000) / 1000
		}
		res.CPUms, res.ReplicasCPUms, res.NATSCPUms, res.PublisherCPUms = per1k(repCPU+natsUsed), per1k(repCPU), per1k(natsUsed), per1k(pubCPU)
		var idleUsed time.Duration
		for _, d := range idle {
			idleUsed += time.Duration(float64(d) / idleWindow.Seconds() * elapsed.Seconds())
		}
		res.ReplicasEventCPUms = per1k(max(repCPU-idleUsed, 0))
	}
	return res, nil
}

// healthy asks a replica's /healthz.
func (c *child) healthy() error {
	addr := c.httpAddr()
	if addr == "" {
		return errors.New("no metrics address logged yet")
	}
	resp, err := c.scrp.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/healthz: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// scrape reads a replica's /metrics.
func (c *child) scrape() (promText, error) {
	resp, err := c.scrp.Get("http://" + c.httpAddr() + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parsePromText(resp.Body)
}

// promText holds the samples of a Prometheus text exposition: each
// sample's value by its metric name, then its labels as written.
type promText map[string]map[string]float64

func parsePromText(r io.Reader) (promText, error) {
	out := promText{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels := l[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = name[:j], name[j:]
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][labels] = v
	}
	return out, sc.Err()
}

// value is the unlabelled sample of name (0 when absent).
func (p promText) value(name string) float64 { return p[name][""] }

// sum adds up every sample of name.
func (p promText) sum(name string) float64 {
	var s float64
	for _, v := range p[name] {
		s += v
	}
	return s
}

// byLabel returns name's samples by the value of their label key.
func (p promText) byLabel(name, key string) map[string]float64 {
	out := map[string]float64{}
	for labels, v := range p[name] {
		_, rest, ok := strings.Cut(labels, key+`="`)
		if !ok {
			continue
		}
		val, _, _ := strings.Cut(rest, `"`)
		out[val] += v
	}
	return out
}

// byLabelFloat is byLabel for a numeric label (a bucket's le).
func (p promText) byLabelFloat(name, key string) map[float64]float64 {
	out := map[float64]float64{}
	for k, v := range p.byLabel(name, key) {
		f, err := strconv.ParseFloat(k, 64)
		if err != nil {
			continue
		}
		out[f] += v
	}
	return out
}

// histQuantileMS returns the q-quantile, in milliseconds, of a cumulative
// histogram given as counts by upper bound, interpolating linearly within
// the bucket it falls in (as PromQL's histogram_quantile); in the +Inf
// bucket it is the highest finite bound.
func histQuantileMS(h map[float64]float64, q float64) float64 {
	if len(h) == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h))
	for b := range h {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := h[bounds[len(bounds)-1]]
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		if c := h[b]; c >= rank {
			if math.IsInf(b, 1) {
				return lower * 1000
			}
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return math.Round((lower+(b-lower)*frac)*1e6) / 1000
		}
		lower, below = b, h[b]
	}
	return lower * 1000
}

// procCPU reads the CPU time (user and system) of process pid from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// Linux reports clock ticks of USER_HZ, 100 per second.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procRSS reads the resident memory of process pid from /proc.
func procRSS(pid int) int64 { return statmRSS(fmt.Sprintf("/proc/%d/statm", pid)) }

// procAnon reads the anonymous part of process pid's resident memory
// (RssAnon in /proc/<pid>/status), 0 when it cannot be read.
func procAnon(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			f := strings.Fields(rest) // "1234 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// cmdBenchNATSNode runs one node of the bench's NATS cluster until SIGTERM
// (reactord bench --cluster; not a user command).
func cmdBenchNATSNode(ctx context.Context, args []string, stderr io.Writer) int {
	fs := newFlags("natsnode", "reactord-bench natsnode --name N --listen ADDR --cluster-listen ADDR --routes URLS --data-dir DIR [--http ADDR] [--no-advertise]", "One NATS node of reactord-bench --cluster.", stderr)
	name := fs.String("name", "n1", "server name")
	listen := fs.String("listen", "127.0.0.1:0", "client address")
	clusterListen := fs.String("cluster-listen", "", "route address")
	routes := fs.String("routes", "", "comma-separated nats-route:// URLs of the cluster's nodes")
	dataDir := fs.String("data-dir", "", "JetStream storage")
	httpAddr := fs.String("http", "", "serve the node's Go runtime metrics (/metrics), /healthz and Go's profiles (/debug/pprof/) on this address")
	noAdvertise := fs.Bool("no-advertise", false, "do not tell clients the other nodes' addresses (they reconnect only to the URLs they were given)")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	srv, err := embedded.Start(embedded.Options{Listen: *listen, DataDir: *dataDir, Name: *name,
		Cluster: &embedded.ClusterOptions{Name: "reactord-bench", Listen: *clusterListen, Routes: strings.Split(*routes, ","), NoAdvertise: *noAdvertise}})
	if err != nil {
		fmt.Fprintf(stderr, "natsnode: %v\n", err)
		return exitUsage
	}
	defer srv.Shutdown()
	if *httpAddr != "" {
		reg := prometheus.NewRegistry()
		daemon.RegisterRuntimeMetrics(reg)
		hs, err := serveBenchHTTP(*httpAddr, reg, slog.New(slog.NewTextHandler(stderr, nil)), daemon.ServePprof)
		if err != nil {
			fmt.Fprintf(stderr, "natsnode: --http %s: %v\n", *httpAddr, err)
			return exitUsage
		}
		defer hs.Close()
	}
	<-ctx.Done()
	return exitOK
}

// serveBenchHTTP serves reg's /metrics, /healthz and whatever more adds
// on addr for a helper process of the bench (a NATS node, the floor
// consumer), and logs the address as a replica does: the line the bench
// reads it from. The caller closes or shuts down the server.
func serveBenchHTTP(addr string, reg *prometheus.Registry, log *slog.Logger, more func(*http.ServeMux)) (*http.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	if more != nil {
		more(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	log.Info("serving metrics", "addr", l.Addr().String())
	return srv, nil
}

// saveHeapProfile writes the child's heap profile, taken after a garbage
// collection (/debug/pprof/heap?gc=1; a replica with --pprof, a NATS
// node), to path.
func (c *child) saveHeapProfile(path string) error {
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + c.httpAddr() + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
