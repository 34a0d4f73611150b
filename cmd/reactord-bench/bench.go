package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/reactor"
)

// benchResult is the line `reactord-bench` prints.
type benchResult struct {
	// Events is the number handled (as Handled), the field's former name.
	Events int64 `json:"events"`
	// Published, Handled, Dropped (by reactord_dropped_total's reason)
	// and NeverSeen (published, neither handled nor counted as dropped:
	// lost where nothing counts them, such as a NATS server cutting off a
	// slow client) account for every event offered.
	Published int64            `json:"published"`
	Handled   int64            `json:"handled"`
	Dropped   map[string]int64 `json:"dropped"`
	NeverSeen int64            `json:"never_seen"`
	// ArchiveDropped counts events handled but not archived (the audit
	// store's buffer and spool were full): reactord_archive_dropped_total.
	ArchiveDropped int64 `json:"archive_dropped"`
	// StoreRecordsDropped is reactord_store_records_dropped_total.
	StoreRecordsDropped int64 `json:"store_records_dropped"`
	// LogLines counts the lines the daemon logged during the run.
	LogLines     int64   `json:"log_lines"`
	EventsPerSec int64   `json:"events_per_sec"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	Maxms        float64 `json:"max_ms"`
	RSSMB        float64 `json:"rss_mb"`
	RSS10MB      float64 `json:"rss_mb_at_10pct"`
	RSS50MB      float64 `json:"rss_mb_at_50pct"`
	RSS75MB      float64 `json:"rss_mb_at_75pct"`
	RSSEndMB     float64 `json:"rss_mb_at_end"`
	// CPUms is the CPU time (user and system) the daemon's process —
	// the embedded NATS server's included, the publisher's not — spent
	// per 1,000 events handled: a figure that holds when other work
	// shares the machine, where events_per_sec does not.
	CPUms     float64 `json:"cpu_ms_per_1k"`
	Mode      string  `json:"mode"`
	Rate      int     `json:"rate"`
	Reactions int64   `json:"reactions"`
	// The configuration measured: the audit store ("none" or its URL's
	// scheme), the loop guard and the shared state.
	Store       string `json:"store"`
	LoopGuard   bool   `json:"loop_guard"`
	SharedState bool   `json:"shared_state"`
	// JetStreamSync is the embedded server's flush interval ("always":
	// each write); PublishBatches says whether events went in atomic
	// batches.
	JetStreamSync  string `json:"jetstream_sync,omitempty"`
	PublishBatches bool   `json:"publish_batches"`
}

// countingWriter counts the lines written through it and discards them.
// countingWriter counts the lines written to it and, with keep, writes
// them there too.
type countingWriter struct {
	lines atomic.Int64
	keep  io.Writer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	if w.keep != nil {
		_, _ = w.keep.Write(p)
	}
	return len(p), nil
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reactord-bench", "go run ./cmd/reactord-bench [--count N] [--rate R] [--jetstream] [--store URL|none] [--no-loop-guard] [-c CONF --events FILE] [--replicas N [--cluster N] [--partitions N] [--floor]] [--scale 1,2,3x0,1,3,6 [--plot F.png]]",
		`Starts an embedded NATS server and the daemon with a null driver, publishes
a workload and prints one JSON line: events published, handled, dropped (by
reason, from reactord_dropped_total), never_seen (published, neither handled
nor counted), archive_dropped, log_lines (lines the daemon logged),
events_per_sec (handled), p50_ms, p99_ms, max_ms (publish to dispatch),
rss_mb (peak resident memory) and cpu_ms_per_1k (the daemon process's CPU
time per 1,000 events). The daemon is configured as reactord's defaults
on its embedded server: the audit store on (SQLite in a temporary
directory), the loop guard on, shared state in the REACTORD_GUARD bucket,
JetStream delivery (the stream holds a burst; --jetstream=false: a core
queue group that drops events on full lanes), 1024 events queued per
lane; --store none --no-loop-guard strips the pipeline. The
default workload is the shared replay workload's shape: 60 rules and
realistic master traffic (job returns and publishes, auth, minion starts,
beacons, presence, custom tags).

--replicas N runs N daemons as processes of their own instead (reactord
run --driver null, each with its own --data-dir and SQLite store, its
--http on a free port), on the NATS server in this process or, with
--cluster N, on a cluster of N node processes with the stream on three of
them; --partitions is passed to the daemons. Its line adds up the
replicas' /metrics (p50/p90/p99 from the
reactord_event_sent_latency_seconds buckets) and the CPU time of the
replicas and NATS nodes from /proc, with per-replica figures. --floor runs
plain JetStream consumers in their place: the floor under the daemon.

--scale REPLICAS x PARTITIONS runs the floor, the daemons for each pair
and the floor again in one invocation, and prints a table of the CPU each
event costs against the floor (--plot draws it; --plot-from redraws a
saved run).`, stderr)
	n := fs.Int("count", 200000, "events to publish")
	rate := fs.Int("rate", 0, "events per second to offer (0: as fast as possible)")
	js := fs.Bool("jetstream", true, "JetStream mode (stream + durable consumer, ack after dispatch), the daemon's default on its embedded server; false: a core queue group")
	conf := fs.String("c", "", "configuration (default: the generated workload's)")
	var file string
	fs.Var(eventsOrCount{file: &file, count: n}, "events", "file of events to publish, cycled, one {\"tag\",\"data\"} JSON line each (default: generated); a number is the former spelling of --count")
	aliasFlag(fs, "file", "events")
	lanes := fs.Int("workers", 8, "ordered worker lanes (the daemon's default with the null driver)")
	traceFile := fs.String("trace", "", "write a runtime execution trace to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (the daemon's process) to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile of the daemon's process, taken when the last event was handled, to this file")
	separate := fs.Bool("separate-publisher", true, "publish from a child process, as a bridge would, instead of from inside the daemon's process")
	storeURL := fs.String("store", "", "audit store: sqlite:///path.db, mysql://..., postgres://..., or none (default: sqlite in the bench's temporary directory, as the daemon's default under --data-dir)")
	noGuard := fs.Bool("no-loop-guard", false, "turn the job-linked loop guard off, as the daemon's flag")
	sharedState := fs.Bool("shared-state", true, "keep the loop guard's state in the REACTORD_GUARD JetStream bucket, as the daemon's default; false: in memory")
	queue := fs.Int("queue", 1024, "events queued per lane (the daemon's default)")
	jsSync := fs.Duration("jetstream-sync", 0, "the embedded server's --jetstream-sync: 0 (the daemon's default) flushes each write before acknowledging it; 2m is NATS's own default")
	atomicBatches := fs.Bool("publish-batches", true, "publish in atomic batches, as the bridge does; false: one message at a time, several in flight (NATS's own way, the faster one with --jetstream-sync 2m, where a batch saves no flush)")
	replicas := fs.Int("replicas", 0, "run this many daemons as processes of their own (reactord run with the null driver, each with its own --data-dir and store), reading their /metrics; 0: the daemon in this process")
	cluster := fs.Int("cluster", 0, "with --replicas: run a NATS cluster of this many nodes, each a process, with the event stream on min(N, 3) of them (--stream-replicas); 0: one NATS server in this process")
	partitions := fs.Int("partitions", 0, "with --replicas: the daemons' --partitions")
	floor := fs.Bool("floor", false, "with --replicas: run plain JetStream consumers (the daemon's stream and shared consumer, each message acknowledged) in place of the daemons: the floor under reactord on the same server")
	scale := fs.String("scale", "", "run the JetStream floor, then the daemons for every REPLICAS x PARTITIONS (e.g. 1,2,3x0,1,3,6; partitions 0: the shared consumer), then the floor again, in this one invocation; prints each run's line and a table")
	logFile := fs.String("log", "", "write the daemon's log to this file (the daemon in this process; it is only counted otherwise)")
	plotFrom := fs.String("plot-from", "", "draw --plot (and print the table) from the saved output of a --scale run instead of running one")
	plotFile := fs.String("plot", "", "with --scale: draw the CPU per 1,000 events of each run to this PNG file")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *cluster > 0 && *replicas == 0 {
		*replicas = 1
	}
	switch {
	case *replicas < 0 || *cluster < 0 || *partitions < 0:
		fmt.Fprintln(stderr, "bench: --replicas, --cluster and --partitions must not be negative")
		return exitUsage
	case *floor && *replicas == 0:
		fmt.Fprintln(stderr, "bench: --floor needs --replicas")
		return exitUsage
	case *scale != "" && (*replicas > 0 || *cluster > 0 || *partitions > 0 || !*js):
		fmt.Fprintln(stderr, "bench: --scale chooses the replicas and partitions itself, on one NATS server, in JetStream mode")
		return exitUsage
	case *partitions > 0 && *replicas == 0:
		fmt.Fprintln(stderr, "bench: --partitions needs --replicas (the daemon in this process reads one consumer)")
		return exitUsage
	case *partitions > 0 && !*js:
		fmt.Fprintln(stderr, "bench: --partitions needs --jetstream")
		return exitUsage
	case *replicas > 0 && (*traceFile != "" || *cpuProfile != "" || *memProfile != "" || !*separate):
		fmt.Fprintln(stderr, "bench: --trace, --cpuprofile, --memprofile and --separate-publisher=false apply to the daemon in this process, not to --replicas")
		return exitUsage
	}
	dir, err := os.MkdirTemp("", "reactord-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	defer os.RemoveAll(dir)
	if *conf == "" {
		*conf, err = writeWorkloadConfig(dir, 60)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return exitUsage
		}
	}
	var lines [][]byte
	if file != "" {
		lines, err = readLines(file)
	} else {
		lines = workloadEvents(min(*n, 50000), 7)
	}
	if err != nil || len(lines) == 0 {
		fmt.Fprintf(stderr, "bench: no events: %v\n", err)
		return exitUsage
	}
	cfg, err := config.Load(*conf)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	if *plotFrom != "" {
		return replotScale(*plotFrom, *plotFile, stdout, stderr)
	}
	if *scale != "" {
		return runScale(ctx, replicasBench{total: int64(*n), rate: *rate, lanes: *lanes, queue: *queue, js: true, noGuard: *noGuard, sync: *jsSync, singles: !*atomicBatches,
			sharedState: *sharedState, store: *storeURL, conf: *conf, dir: dir, lines: lines}, *scale, *plotFile, stdout, stderr)
	}
	if *replicas > 0 {
		return runReplicasBench(ctx, replicasBench{replicas: *replicas, nodes: *cluster, partitions: *partitions, floor: *floor, sync: *jsSync, singles: !*atomicBatches, total: int64(*n), rate: *rate,
			lanes: *lanes, queue: *queue, js: *js, noGuard: *noGuard, sharedState: *sharedState, store: *storeURL, conf: *conf, dir: dir, lines: lines}, stdout, stderr)
	}
	// The daemon as reactord run builds it (daemon.New), on its embedded
	// server with a data directory of its own, the null driver and the
	// configuration's reactord: section; its log goes through a line
	// counter (nothing is printed).
	logLines := &countingWriter{}
	if *logFile != "" {
		lf, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return exitUsage
		}
		defer lf.Close()
		logLines.keep = lf
	}
	log := slog.New(slog.NewTextHandler(logLines, &slog.HandlerOptions{Level: cfg.Settings.SlogLevel()}))
	opts := daemon.Defaults()
	dfs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	opts.Flags(dfs)
	if _, err := daemon.Merge(&opts, dfs, cfg.Settings, func(string) string { return "" }); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	opts.Config, opts.Loaded, opts.Log = *conf, cfg, log
	opts.Listen, opts.DataDir, opts.NATS = "127.0.0.1:0", filepath.Join(dir, "daemon"), daemon.NATSOptions{}
	opts.Driver, opts.Workers, opts.Queue = "null", *lanes, *queue
	opts.JetStream = daemon.AutoBool{Given: true, Value: *js}
	opts.Store, opts.NoLoopGuard, opts.SharedState = *storeURL, *noGuard, *sharedState
	opts.JetStreamSync = *jsSync
	storeName := "none"
	if *storeURL != "none" {
		storeName = "sqlite" // the daemon's default: SQLite under its data directory
		if *storeURL != "" {
			storeName, _, _ = strings.Cut(*storeURL, "://")
		}
	}

	total := int64(*n)
	var done, reactions atomic.Int64
	// Latencies go into fixed 10µs buckets (up to 1s) so the bench's own
	// memory does not grow with the number of events.
	var lat latencyHist
	var latMu sync.Mutex
	finished := make(chan struct{})
	var peakRSS, rss10, rss50, rss75 atomic.Int64
	var firstSent atomic.Int64 // UnixNano of the earliest send seen
	var lastDone atomic.Int64  // UnixNano of the latest event handled
	opts.Hooks = daemon.Hooks{
		// The null driver executes nothing, so with the loop guard on no
		// job ever returns.
		OnDispatch: func(reactor.Delivery, actions.Action, actions.Result, error) { reactions.Add(1) },
		OnDone: func(dl reactor.Delivery) {
			if !dl.Sent.IsZero() {
				for ns := dl.Sent.UnixNano(); ; {
					cur := firstSent.Load()
					if (cur != 0 && cur <= ns) || firstSent.CompareAndSwap(cur, ns) {
						break
					}
				}
				l := time.Since(dl.Sent)
				latMu.Lock()
				lat.add(l)
				latMu.Unlock()
			}
			lastDone.Store(time.Now().UnixNano())
			switch done.Add(1) {
			case total / 10:
				rss10.Store(rssBytes())
			case total / 2:
				rss50.Store(rssBytes())
			case total / 4 * 3:
				rss75.Store(rssBytes())
			case total:
				close(finished)
			}
		},
	}
	d, err := daemon.New(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	reg := d.Registry()
	shared := d.SharedState()
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(runCtx) }()
	defer func() {
		cancel()
		<-runErr
	}()
	token, err := daemon.ReadSecretFile(natsbus.TokenFile(d.DataDir()))
	if err != nil {
		fmt.Fprintf(stderr, "bench: the embedded server's token: %v\n", err)
		return exitUsage
	}
	select {
	case <-d.Ready():
	case err := <-runErr:
		runErr <- err
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	url := d.NATSURL()
	pub, err := natsbus.Connect(natsbus.ConnOptions{URL: url, Name: "bench-publisher", Token: token})
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	defer pub.Close()

	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			peakRSS.Store(max(peakRSS.Load(), rssBytes()))
			select {
			case <-finished:
				return
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	if *traceFile != "" {
		tf, err := os.Create(*traceFile)
		if err == nil {
			defer tf.Close()
			if trace.Start(tf) == nil {
				defer trace.Stop()
			}
		}
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err == nil {
			defer pf.Close()
			if pprof.StartCPUProfile(pf) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	cpu0 := processCPU()
	start := time.Now()
	tags := make([]string, len(lines))
	for i, l := range lines {
		tags[i] = lineTag(l)
	}
	pubErr := make(chan error, 1)
	if *separate {
		// The publisher runs as a child process, as a bridge would: it does
		// not share this process's scheduler with the daemon.
		evFile := filepath.Join(dir, "events.jsonl")
		if err := os.WriteFile(evFile, joinLines(lines), 0o644); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return exitUsage
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return exitUsage
		}
		args := []string{"publish", "--nats", url, "--nats-token-file", natsbus.TokenFile(d.DataDir()), "--file", evFile, "--events", strconv.FormatInt(total, 10), "--rate", strconv.Itoa(*rate)}
		if *js {
			args = append(args, "--jetstream", "--publish-batches="+strconv.FormatBool(*atomicBatches))
		}
		child := exec.CommandContext(runCtx, self, args...)
		child.Stderr = stderr
		dieWithParent(child)
		go func() { pubErr <- child.Run() }()
	} else {
		go func() { pubErr <- publishWorkload(runCtx, pub, lines, tags, total, *rate, *js, *atomicBatches) }()
	}
	if err := <-pubErr; err != nil {
		fmt.Fprintf(stderr, "bench: publishing: %v\n", err)
		return exitUsage
	}
	// Wait until every event is handled or counted as dropped, or until
	// nothing moved for quiet (the rest were lost uncounted).
	const quiet = 5 * time.Second
	deadline := time.Now().Add(5 * time.Minute)
	lastSum, lastMove := int64(-1), time.Now()
wait:
	for {
		sum := done.Load() + sumDropped(gatherCounters(reg, "reactord_dropped_total"))
		switch {
		case sum >= total:
			break wait
		case sum != lastSum:
			lastSum, lastMove = sum, time.Now()
		case time.Since(lastMove) > quiet:
			break wait
		case time.Now().After(deadline):
			fmt.Fprintf(stderr, "bench: only %d of %d events handled or dropped after 5 minutes\n", sum, total)
			return exitFound
		}
		select {
		case <-finished:
			break wait
		case <-ctx.Done():
			return exitUsage
		case <-time.After(100 * time.Millisecond):
		}
	}
	handled := done.Load()
	elapsed := time.Since(start)
	if fs, ld := firstSent.Load(), lastDone.Load(); fs != 0 && ld > fs {
		elapsed = time.Duration(ld - fs) // from the first event published to the last handled
	}
	cpu := processCPU() - cpu0
	endRSS := rssBytes()
	if *memProfile != "" {
		if mf, err := os.Create(*memProfile); err == nil {
			_ = pprof.WriteHeapProfile(mf)
			mf.Close()
		}
	}
	peakRSS.Store(max(peakRSS.Load(), endRSS))
	pct := func(p float64) float64 { return lat.percentile(p) }
	mode := "core"
	if *js {
		mode = "jetstream"
	}
	dropped := gatherCounters(reg, "reactord_dropped_total")
	nd := sumDropped(dropped)
	res := benchResult{Events: handled, Published: total, Handled: handled, Dropped: dropped, NeverSeen: max(0, total-handled-nd),
		ArchiveDropped: gatherCounters(reg, "reactord_archive_dropped_total")[""], StoreRecordsDropped: gatherCounters(reg, "reactord_store_records_dropped_total")[""],
		LogLines: logLines.lines.Load(), Store: storeName, LoopGuard: !*noGuard, SharedState: shared,
		EventsPerSec: int64(float64(handled) / elapsed.Seconds()), P50ms: pct(0.5), P99ms: pct(0.99), Maxms: pct(1),
		RSSMB: float64(peakRSS.Load()/(1<<16)) / 16, RSS10MB: float64(rss10.Load()/(1<<16)) / 16, RSS50MB: float64(rss50.Load()/(1<<16)) / 16, RSS75MB: float64(rss75.Load()/(1<<16)) / 16, RSSEndMB: float64(endRSS/(1<<16)) / 16, Mode: mode, Rate: *rate, Reactions: reactions.Load()}
	if *js {
		res.JetStreamSync, res.PublishBatches = "always", *atomicBatches
		if *jsSync > 0 {
			res.JetStreamSync = jsSync.String()
		}
	}
	if handled > 0 {
		res.CPUms = math.Round(float64(cpu.Microseconds())/float64(handled)*1000) / 1000
	}
	out, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}

// gatherCounters returns the counters of the family name in reg, by
// their label's value ("" for an unlabelled counter).
func gatherCounters(reg *prometheus.Registry, name string) map[string]int64 {
	out := map[string]int64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				label = l.GetValue()
			}
			out[label] = int64(m.GetCounter().GetValue())
		}
	}
	return out
}

func sumDropped(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func lineTag(l []byte) string {
	var ev struct {
		Tag string `json:"tag"`
	}
	_ = json.Unmarshal(l, &ev)
	return ev.Tag
}

// eventsOrCount is bench's --events: a file of events, as --events is
// everywhere, or a number, the former spelling of --count.
type eventsOrCount struct {
	file  *string
	count *int
}

func (v eventsOrCount) String() string {
	if v.file == nil {
		return ""
	}
	return *v.file
}

func (v eventsOrCount) Set(s string) error {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		*v.file = s
	case n < 0:
		return fmt.Errorf("must not be negative")
	default:
		*v.count = n
	}
	return nil
}

func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, []byte(l))
		}
	}
	return out, sc.Err()
}

// rssBytes reads this process's resident memory from /proc.
func rssBytes() int64 { return statmRSS("/proc/self/statm") }

// statmRSS reads the resident memory from a /proc/<pid>/statm file (0
// when it cannot).
func statmRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// workloadEvents generates master traffic with the shared replay
// workload's mix.
func workloadEvents(n int, seed uint64) [][]byte {
	rnd := rand.New(rand.NewPCG(seed, seed))
	var minions []string
	for i := 1; i <= 300; i++ {
		minions = append(minions, "web"+strconv.Itoa(i))
	}
	for i := 1; i <= 100; i++ {
		minions = append(minions, "db"+strconv.Itoa(i))
	}
	funs := []string{"test.ping", "state.apply", "cmd.run", "grains.items", "pkg.upgrade", "saltutil.find_job"}
	sample := func(k int) []any {
		out := make([]any, k)
		for i := range out {
			out[i] = minions[rnd.IntN(len(minions))]
		}
		return out
	}
	out := make([][]byte, 0, n)
	for k := 0; k < n; k++ {
		r := rnd.Float64()
		mid := minions[rnd.IntN(len(minions))]
		jid := fmt.Sprintf("2026112201%06d%06d", k%1000000, rnd.IntN(1000000))
		stamp := fmt.Sprintf("2026-11-22T01:%02d:%02d.%06d", (k/60)%60, k%60, rnd.IntN(1000000))
		var tag string
		var data map[string]any
		switch {
		case r < 0.40:
			ok := rnd.Float64() > 0.05
			rc := 0
			if !ok {
				rc = 1
			}
			tag = "salt/job/" + jid + "/ret/" + mid
			data = map[string]any{"fun_args": []any{}, "jid": jid, "return": ok, "retcode": rc, "success": ok, "cmd": "_return", "_stamp": stamp, "fun": funs[rnd.IntN(len(funs))], "id": mid}
		case r < 0.55:
			tag = "salt/job/" + jid + "/new"
			data = map[string]any{"tgt_type": "glob", "jid": jid, "tgt": "*", "_stamp": stamp, "user": "root", "arg": []any{}, "fun": funs[rnd.IntN(len(funs))], "minions": sample(5)}
		case r < 0.65:
			tag = jid
			data = map[string]any{"_stamp": stamp, "minions": sample(3)}
		case r < 0.75:
			acts := []string{"accept", "accept", "pend", "reject"}
			tag = "salt/auth"
			data = map[string]any{"_stamp": stamp, "act": acts[rnd.IntN(4)], "id": mid, "pub": "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg...\n-----END PUBLIC KEY-----", "result": true}
		case r < 0.80:
			tag = "salt/minion/" + mid + "/start"
			data = map[string]any{"_stamp": stamp, "cmd": "_minion_event", "data": "Minion " + mid + " started at Sat Nov 22 01:00:00 2026", "id": mid, "pretag": nil, "tag": tag}
		case r < 0.85:
			tag = "salt/beacon/" + mid + "/inotify//etc/important_file"
			data = map[string]any{"_stamp": stamp, "change": "IN_MODIFY", "id": mid, "path": "/etc/important_file"}
		case r < 0.90:
			tag = "salt/beacon/" + mid + "/diskusage/"
			data = map[string]any{"_stamp": stamp, "id": mid, "/": "91%", "/var": "95%"}
		case r < 0.95:
			tag = "salt/presence/change"
			data = map[string]any{"_stamp": stamp, "new": []any{}, "lost": sample(rnd.IntN(3))}
		default:
			nn := rnd.IntN(39) + 1
			kind := rnd.Float64()
			switch {
			case kind < 0.5:
				tag = fmt.Sprintf("myco/app%d/%s/event", nn, mid)
			case kind < 0.7:
				tag = "myco/deploy/" + mid + "/done"
			default:
				tag = "myco/other/" + mid + "/noise"
			}
			data = map[string]any{"_stamp": stamp, "id": mid, "cmd": "_minion_event", "data": map[string]any{"n": nn, "app": "shop", "version": fmt.Sprintf("1.%d.0", nn)}}
		}
		b, _ := json.Marshal(map[string]any{"tag": tag, "data": data})
		out = append(out, b)
	}
	return out
}

// workloadReactions are the shared workload's reaction files, in Go
// template form.
var workloadReactions = map[string]string{
	"highstate": "highstate_on_start:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
	"revert":    "revert-file:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n    - arg:\n      - maintain_important_file\n    - kwarg:\n        saltenv: central\n",
	"auth":      "{{ if and (eq .data.act \"pend\") (hasPrefix \"web\" .data.id) }}\naccept_key:\n  wheel.key.accept:\n    - args:\n      - match: {{ .data.id }}\n{{ end }}\n",
	"jobfail": "{{ if and (not (dig \"success\" true .data)) (ne (dig \"fun\" \"\" .data) \"saltutil.find_job\") }}\nnotify_failure:\n  runner.event.send:\n    - args:\n" +
		"      - tag: myco/alert/job_failed\n      - data:\n          minion: {{ .data.id }}\n          jid: '{{ .data.jid }}'\n          fun: {{ .data.fun }}\n          retcode: {{ dig \"retcode\" 1 .data }}\n{{ end }}\n",
	"disk":     "{{ range $i, $m := (omit .data \"id\" \"_stamp\" | keys | sortAlpha) }}\nclean_{{ add1 $i }}:\n  local.cmd.run:\n    - tgt: {{ $.data.id }}\n    - arg:\n      - 'find {{ $m }}/tmp -mtime +7 -delete'\n{{ end }}\n",
	"presence": "{{ range (dig \"lost\" (list) .data) }}\nmark_lost_{{ . }}:\n  runner.cloud.query:\n    - args:\n      - query_type: list_nodes\n{{ end }}\n",
	"deploy":   "deploy_app:\n  runner.state.orchestrate:\n    - args:\n      - mods: orchestrate.deploy_app\n      - pillar:\n          event_tag: {{ .tag }}\n          app: {{ .data.data.app }}\n          version: '{{ .data.data.version }}'\n",
	"custom":   "custom_{{ .data.data.n }}:\n  local.test.echo:\n    - tgt: {{ .data.id }}\n    - arg:\n      - {{ .tag }}\n",
}

// writeWorkloadConfig writes the workload's reactor.conf and reaction files.
func writeWorkloadConfig(dir string, rules int) (string, error) {
	for name, src := range workloadReactions {
		if err := os.WriteFile(filepath.Join(dir, name+".sls"), []byte(src), 0o644); err != nil {
			return "", err
		}
	}
	core := [][2]string{
		{"salt/minion/*/start", "highstate"}, {"salt/beacon/*/inotify//etc/important_file", "revert"}, {"salt/auth", "auth"},
		{"salt/job/*/ret/*", "jobfail"}, {"salt/beacon/*/diskusage/*", "disk"}, {"salt/presence/change", "presence"}, {"myco/deploy/*/done", "deploy"},
	}
	var b strings.Builder
	b.WriteString("reactor:\n")
	count := 0
	for _, c := range core {
		fmt.Fprintf(&b, "  - '%s':\n    - %s.sls\n", c[0], c[1])
		count++
	}
	for i := 1; count < rules; i++ {
		fmt.Fprintf(&b, "  - 'myco/app%d/*/event':\n    - custom.sls\n", i)
		count++
		if count < rules {
			fmt.Fprintf(&b, "  - 'myco/svc%d/[ab]*/alert?':\n    - custom.sls\n", i)
			count++
		}
	}
	p := filepath.Join(dir, "reactor.conf")
	return p, os.WriteFile(p, []byte(b.String()), 0o644)
}

// publishWorkload publishes total events from lines at rate per second (0:
// flat out), stamping each with its send time. To JetStream it publishes
// as the bridge does: through a natsbus.Publisher (atomic batches where
// the server has them), each event with its id, and waits for every
// acknowledgement; with atomicBatches false, one message at a time. With
// core NATS it publishes fire-and-forget and flushes at the end.
func publishWorkload(ctx context.Context, pub *natsbus.Conn, lines [][]byte, tags []string, total int64, rate int, js, atomicBatches bool) error {
	start := time.Now()
	const batch = 5
	var bp *natsbus.Publisher
	if js {
		var err error
		o := natsbus.PublisherOptions{}
		if !atomicBatches {
			o.MinAtomic = math.MaxInt
		}
		if bp, err = pub.NewPublisher(ctx, o); err != nil {
			return err
		}
	}
	for i := int64(0); i < total; i++ {
		if rate > 0 && i%batch == 0 {
			due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
			if w := time.Until(due); w > 0 {
				time.Sleep(w)
			}
		}
		k := int(i) % len(lines)
		m := natsbus.Msg{Tag: tags[k], Body: lines[k], Meta: natsbus.Meta{Sent: time.Now()}}
		var err error
		if js {
			m.Meta.MsgID = strconv.FormatInt(i, 10)
			err = bp.Publish(ctx, m, nil)
		} else {
			err = pub.Publish(ctx, m, natsbus.Core)
		}
		if err != nil {
			return err
		}
	}
	if js {
		bp.Close(ctx)
		if st := bp.Stats(); st.Failed > 0 {
			return fmt.Errorf("%d of %d events not acknowledged: %w", st.Failed, total, st.Errors[0])
		}
	}
	return pub.Flush(ctx)
}

func joinLines(lines [][]byte) []byte {
	var out []byte
	for _, l := range lines {
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// cmdBenchPublish is the bench's publisher process.
func cmdBenchPublish(ctx context.Context, args []string, stderr io.Writer) int {
	fs := newFlags("publish", "reactord-bench publish --nats URL [--nats-token-file F] --file F --events N --rate R [--jetstream [--publish-batches=false]]", "The publisher process of reactord-bench.", stderr)
	url := fs.String("nats", "", "NATS URL")
	tokenFile := fs.String("nats-token-file", "", "file holding the NATS token")
	file := fs.String("file", "", "events")
	n := fs.Int64("events", 0, "events to publish")
	rate := fs.Int("rate", 0, "events per second")
	js := fs.Bool("jetstream", false, "publish to JetStream")
	atomicBatches := fs.Bool("publish-batches", true, "with --jetstream: publish in atomic batches; false: one message at a time")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	lines, err := readLines(*file)
	if err != nil || len(lines) == 0 {
		fmt.Fprintf(stderr, "publish: %v\n", err)
		return exitUsage
	}
	tags := make([]string, len(lines))
	for i, l := range lines {
		tags[i] = lineTag(l)
	}
	var token string
	if *tokenFile != "" {
		if token, err = daemon.ReadSecretFile(*tokenFile); err != nil {
			fmt.Fprintf(stderr, "publish: %v\n", err)
			return exitUsage
		}
	}
	pub, err := natsbus.Connect(natsbus.ConnOptions{URL: *url, Name: "bench-publisher", Token: token})
	if err != nil {
		fmt.Fprintf(stderr, "publish: %v\n", err)
		return exitUsage
	}
	defer pub.Close()
	if err := publishWorkload(ctx, pub, lines, tags, *n, *rate, *js, *atomicBatches); err != nil {
		fmt.Fprintf(stderr, "publish: %v\n", err)
		return exitFound
	}
	return exitOK
}

// latencyHist counts latencies in 10µs buckets up to 1s, then in 10ms
// buckets up to 100s (beyond: the last bucket), and keeps the maximum.
type latencyHist struct {
	buckets [100000]int64
	coarse  [10000]int64
	n       int64
	max     time.Duration
}

func (h *latencyHist) add(d time.Duration) {
	switch i := int(d / (10 * time.Microsecond)); {
	case i < 0:
		h.buckets[0]++
	case i < len(h.buckets):
		h.buckets[i]++
	default:
		h.coarse[min(int((d-time.Second)/(10*time.Millisecond)), len(h.coarse)-1)]++
	}
	h.n++
	h.max = max(h.max, d)
}

// percentile returns the p-quantile in milliseconds (the bucket's upper
// bound, at most the maximum), or the maximum for p == 1.
func (h *latencyHist) percentile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	maxMS := float64(h.max.Microseconds()) / 1000
	if p >= 1 {
		return maxMS
	}
	want := int64(p * float64(h.n-1))
	var seen int64
	for i, c := range h.buckets {
		seen += c
		if seen > want {
			return min(float64((i+1)*10)/1000, maxMS)
		}
	}
	for i, c := range h.coarse {
		seen += c
		if seen > want {
			return min(1000+float64((i+1)*10), maxMS)
		}
	}
	return maxMS
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
