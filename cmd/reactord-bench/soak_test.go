package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak runs reactord-bench soak for 45 s on three NATS nodes and three
// replicas, a fifth of the traffic through a bridge, with every fault kind
// forced in turn, two at most at once (store-cut and db-restart with a
// private MariaDB server when mariadbd is installed, else store-cut with
// REACTORD_TEST_MYSQL_URL, the replicas' store then; disk-full as root on
// Linux): no acknowledged event, published or bridged, is lost, none
// reacts before an earlier event of its minion, the audit records held
// back arrive, and the timeline (each fault's start and end) and the
// picture are written. The CI's soak step (.ci/run) runs the same for
// three minutes; this test stays short as it runs twice there (plain and
// -race).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a 45 s soak of real processes")
	}
	seed := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 10)
	out := t.TempDir()
	kinds := append(slices.Clone(faultKinds), faultBridgeKill)
	var store []string
	// With MariaDB, a server of the soak's own, killed and started again,
	// and the cut between it and the replicas.
	if _, _, err := dbServerBins("mariadb"); err == nil {
		kinds = append(kinds, faultStoreCut, faultDBRestart)
		store = []string{"--store-server", "mariadb"}
	} else if u := os.Getenv("REACTORD_TEST_MYSQL_URL"); u != "" {
		t.Logf("no db-restart: %v", err)
		kinds = append(kinds, faultStoreCut)
		store = []string{"--store", u}
	} else {
		t.Logf("no db-restart, no store-cut: %v, and REACTORD_TEST_MYSQL_URL is unset", err)
	}
	// As root on Linux, the replicas' data directories on tmpfs, filled.
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		kinds = append(slices.Clone(kinds), faultDiskFull)
		store = append(store, "--tmpfs")
	}
	args := append([]string{"soak", "--duration", "45s", "--rate", "40", "--minions", "100", "--fault-every", "2s", "--down", "1s",
		"--overlap", "2", "--interval", "2s", "--faults", strings.Join(kinds, ","), "--seed", seed, "--out", out}, store...)
	cmd := exec.Command(binPath, args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	start := time.Now()
	stdout, err := cmd.Output()
	t.Logf("reactord-bench %s: %v\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), stdout)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == exitFound {
		t.Errorf("seed %s: exit 1: events lost or out of order", seed) // the summary says which
	} else if err != nil {
		t.Fatalf("seed %s: %v\n%s", seed, err, errOut.String())
	}
	var sum soakSummary
	if err := json.Unmarshal(stdout, &sum); err != nil {
		t.Fatalf("seed %s: %v: %s", seed, err, stdout)
	}
	for _, k := range kinds {
		if sum.Faults[k] == 0 {
			t.Errorf("seed %s: no %s fault in the run: %v", seed, k, sum.Faults)
		}
	}
	// The direct share of 40 events/s for 45 s is 1,440 at most; the
	// publisher waits out each fault, and a loaded machine (CI's, beside
	// the other packages' tests) got 940 through: 500 says traffic ran.
	if sum.Acknowledged < 500 || sum.Reacted < sum.Acknowledged {
		t.Errorf("seed %s: %d acknowledged, %d reacted: want more than 500, all reacted", seed, sum.Acknowledged, sum.Reacted)
	}
	if sum.Lost != 0 || sum.OutOfOrder != 0 {
		t.Errorf("seed %s: %d acknowledged events lost (%v), %d out of order\n%s", seed, sum.Lost, sum.LostSample, sum.OutOfOrder, errOut.String())
	}
	if b := sum.Bridged; b == nil || b.Acknowledged < 100 || b.Lost != 0 || b.OutOfOrder != 0 || b.Emitted != b.Unread+b.Unconfirmed+b.Acknowledged {
		t.Errorf("seed %s: bridged events: %+v; want over 100 acknowledged, none lost or out of order, each emitted one of unread, unconfirmed, acknowledged", seed, b)
	}
	if len(store) > 0 && store[0] == "--store-server" && sum.AuditRowsMax < sum.Acknowledged { // a database of the run's own
		t.Errorf("seed %s: at most %d audit rows counted for %d acknowledged events", seed, sum.AuditRowsMax, sum.Acknowledged)
	}
	if sum.StorePendingEnd != 0 {
		t.Errorf("seed %s: %d audit records still held back by the replicas after the drain", seed, sum.StorePendingEnd)
	}
	if sum.GoroutinesIn == 0 || sum.FDsIn == 0 || sum.P99ms <= 0 {
		t.Errorf("seed %s: goroutines %d, fds %d, p99 %v ms: not sampled", seed, sum.GoroutinesIn, sum.FDsIn, sum.P99ms)
	}
	f, err := os.Open(filepath.Join(out, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, faults, starts := 0, 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line soakFault
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("timeline: %v: %s", err, sc.Bytes())
		}
		if line.Fault == "" {
			samples++
			continue
		}
		if line.Phase == "start" {
			starts++
			continue
		}
		faults++
		if line.Err != "" {
			t.Errorf("seed %s: fault %s failed: %s", seed, line.Fault, line.Err)
		}
	}
	if samples < 10 || faults < len(kinds) || starts != faults {
		t.Errorf("timeline: %d samples, %d faults started, %d ended", samples, starts, faults)
	}
	if st, err := os.Stat(filepath.Join(out, "soak.png")); err != nil || st.Size() < 10_000 {
		t.Errorf("soak.png: %v", err)
	}
	// The heap profiles at the end, after a garbage collection: a replica's,
	// a node's and the bridge's, each gzipped.
	ends, _ := filepath.Glob(filepath.Join(out, "heap", "*-end.pb.gz"))
	kindsSaved := map[string]bool{}
	for _, e := range ends {
		if b, err := os.ReadFile(e); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes (%v), want a gzipped profile", e, len(b), err)
		}
		kindsSaved[strings.TrimRight(strings.SplitN(filepath.Base(e), "-", 2)[0], "0123456789")] = true
	}
	if !kindsSaved["replica"] || !kindsSaved["n"] || !kindsSaved["bridge"] {
		t.Errorf("heap profiles at the end: %v, want a replica's, a NATS node's and the bridge's", ends)
	}
}

// The ledger counts what the summary reports: an acknowledged event
// without a reaction is lost, a number seen twice a duplicate, one seen
// before an earlier number of its minion out of order.
func TestSoakLedger(t *testing.T) {
	l := newSoakLedger()
	at := time.Now()
	for _, e := range []struct {
		m string
		n int
	}{{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}, {"b", 1}} {
		l.sent(e.m, e.n, at)
	}
	l.ack("a", 2)
	l.ack("b", 0) // b/1 published, never acknowledged: not lost
	for _, r := range []struct {
		m string
		n int
	}{{"a", 0}, {"a", 2}, {"a", 1}, {"a", 2}} {
		l.reacted(r.m, r.n, at)
	}
	if p, a := l.published, l.acked; p != 5 || a != 4 {
		t.Errorf("published %d, acknowledged %d; want 5, 4", p, a)
	}
	s := &soak{ledger: l, faults: map[string]int{}}
	sum := s.summary(at)
	if sum.Lost != 1 || len(sum.LostSample) != 1 || sum.LostSample[0] != "b/0" || sum.Reacted != 3 || sum.OutOfOrder != 1 || sum.Duplicates != 2 {
		t.Errorf("lost %d %v, reacted %d, out of order %d, duplicates %d; want 1 [b/0], 3, 1, 2", sum.Lost, sum.LostSample, sum.Reacted, sum.OutOfOrder, sum.Duplicates)
	}
}

// The bridged events' account: an event the stream never stored is no
// loss, a stored one without a reaction is; a gap is not out of order, a
// reaction after a later event's is, and so is a store after a later
// event's.
func TestSoakBridgedLedger(t *testing.T) {
	l := newSoakLedger()
	at := time.Now()
	for n := range 6 {
		l.sent("b0", n, at)
	}
	l.unreadOne() // b0/1: no bridge read it
	for _, n := range []int{0, 2, 4, 3} {
		l.stored("b0", n, false)
	}
	l.stored("b0", 2, true) // a redelivery: counted once
	for _, n := range []int{0, 2, 4, 3, 4} {
		l.reacted("b0", n, at)
	}
	lost, some := l.lost()
	dups, ooo, oooSome := l.gapOrder()
	if l.acked != 4 || l.storedOOO != 1 || lost != 0 || dups != 1 || ooo != 1 || len(some) != 0 || len(oooSome) != 1 || oooSome[0] != "b0/3 after 4" {
		t.Errorf("acknowledged %d, stored out of order %d, lost %d %v, duplicates %d, out of order %d %v; want 4, 1, 0, 1, 1 [b0/3 after 4]",
			l.acked, l.storedOOO, lost, some, dups, ooo, oooSome)
	}
	l.stored("b0", 5, false) // stored, never reacted: lost
	if lost, some := l.lost(); lost != 1 || some[0] != "b0/5" {
		t.Errorf("lost %d %v; want 1 [b0/5]", lost, some)
	}
}

// saltFrame packs a soak event as a master's publisher does: the bridge's
// reader gives back its tag and its data, numbers as integers, with the
// master's _stamp.
func TestSoakSaltFrame(t *testing.T) {
	_, body := soakEvent(rand.New(rand.NewPCG(1, 1)), "b0007", 12)
	frame, err := saltFrame(body, time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Tag  string         `json:"tag"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(frame, []byte(env.Tag+"\n\n")) || !bytes.Contains(frame, []byte("b0007")) ||
		!bytes.Contains(frame, []byte("2026-01-02T03:04:05.000006")) || !bytes.Contains(frame, []byte{0xa1, 'n', 12}) {
		t.Errorf("frame %q: want the tag, the minion, the stamp and n packed as the integer 12", frame)
	}
}

// TestRSSGrowthWarmsUpEachLife: a process restarted during the run is
// judged after a warm-up of its own, so its caches refilling after the
// restart are not taken for growth; one that grows after its warm-up is.
func TestRSSGrowthWarmsUpEachLife(t *testing.T) {
	proc := func(name string, pid int, mb float64) soakProcSample {
		return soakProcSample{Name: name, PID: pid, RSSMB: mb}
	}
	var flat, growing []soakSample
	for i := range 121 { // two hours, a sample a minute, warm-up 20 min
		tm := float64(i * 60)
		p := proc("n1", 1, 100)
		if i >= 60 { // restarted at 60 min: 40 MB, refilling 2 MB a minute for 20 min, then flat
			p = proc("n1", 2, 40+2*float64(min(i-60, 20)))
		}
		flat = append(flat, soakSample{T: tm, Procs: []soakProcSample{p}})
		growing = append(growing, soakSample{T: tm, Procs: []soakProcSample{proc("r1", 3, 50+float64(i)/20)}})
	}
	if g, who := largest(growthByProcess(flat, 1200, rssOf)); g != 0 {
		t.Errorf("a restarted node flat after its own warm-up: growth %.2f MB/h (%s), want 0", g, who)
	}
	if g, who := largest(growthByProcess(growing, 1200, rssOf)); g < 2.9 || g > 3.1 || who != "r1" {
		t.Errorf("a process growing 3 MB/h: growth %.2f MB/h (%s)", g, who)
	}
}

// TestGrowthByProcessTellsAnonFromFile: each process gets its own slope,
// and a process whose RSS grows only by the file pages it maps (its
// binary's code) shows no anonymous growth, while one whose anonymous
// memory grows shows it in both.
func TestGrowthByProcessTellsAnonFromFile(t *testing.T) {
	var samples []soakSample
	for i := range 61 { // one hour, a sample a minute
		h := float64(i) / 60
		samples = append(samples, soakSample{T: float64(i * 60), Procs: []soakProcSample{
			{Name: "replica1", PID: 1, RSSMB: 50 + 4*h, AnonMB: 30},       // file pages only
			{Name: "replica2", PID: 2, RSSMB: 50 + 2*h, AnonMB: 30 + 2*h}, // a leak
			{Name: "n1", PID: 3, RSSMB: 100, AnonMB: 80},
			{Name: "bridge", PID: 4, RSSMB: 20, AnonMB: 10},
		}})
		if i < 2 { // a process with too few samples after the warm-up is left out
			samples[i].Procs = append(samples[i].Procs, soakProcSample{Name: "short", PID: 5, RSSMB: 1, AnonMB: 1})
		}
	}
	rss := growthByProcess(samples, 0, rssOf)
	anon := growthByProcess(samples, 0, anonOf)
	want := map[string][2]float64{"replica1": {4, 0}, "replica2": {2, 2}, "n1": {0, 0}, "bridge": {0, 0}}
	if len(rss) != len(want) || len(anon) != len(want) {
		t.Fatalf("processes: rss %v, anon %v; want those of %v", rss, anon, want)
	}
	for name, w := range want {
		if math.Abs(rss[name]-w[0]) > 0.01 || math.Abs(anon[name]-w[1]) > 0.01 {
			t.Errorf("%s: rss %.2f, anon %.2f MB/h; want %.0f and %.0f", name, rss[name], anon[name], w[0], w[1])
		}
	}
	if g, who := largest(anon); who != "replica2" || math.Abs(g-2) > 0.01 {
		t.Errorf("largest anonymous growth %.2f (%s), want 2 (replica2)", g, who)
	}
	if g, who := largest(nil); g != 0 || who != "" {
		t.Errorf("largest of none: %.2f %q", g, who)
	}
}

// TestFloorGrowthLooksPastBursts: a process whose RSS jumps by 30 MB for
// a few minutes at each fault, more often late in the run, shows growth
// in its plain slope but none in its floor; one that leaks 3 MB/h under
// the same bursts shows the leak in its floor.
func TestFloorGrowthLooksPastBursts(t *testing.T) {
	var samples []soakSample
	for i := range 721 { // two hours, a sample every 10 s
		tm := float64(i * 10)
		burst := 0.0
		if m := int(tm / 60); (m%12 < 3 && m < 60) || (m%6 < 3 && m >= 60) { // 3 min of each 12, then of each 6
			burst = 30
		}
		samples = append(samples, soakSample{T: tm, Procs: []soakProcSample{
			{Name: "flat", PID: 1, RSSMB: 50 + burst},
			{Name: "leak", PID: 2, RSSMB: 50 + burst + 3*tm/3600},
		}})
	}
	plain := growthByProcess(samples, 1440, rssOf)
	floor := floorGrowthByProcess(samples, 1440, rssOf)
	if plain["flat"] < 2 {
		t.Errorf("the bursts' plain slope %.2f MB/h: want the bursts to show (over 2)", plain["flat"])
	}
	if math.Abs(floor["flat"]) > 0.1 || math.Abs(floor["leak"]-3) > 0.2 {
		t.Errorf("floor slopes: flat %.2f, leak %.2f MB/h; want 0 and 3", floor["flat"], floor["leak"])
	}
	// 25 minutes: two whole windows and a third cut short, too few.
	if short := floorGrowthByProcess(samples[:150], 0, rssOf); len(short) != 0 {
		t.Errorf("25 minutes: floor slopes %v, want none", short)
	}
}

// TestGrowthOfTimeline: --growth-of reads a run's timeline back, passing
// over the faults' lines, and names the line it cannot read.
func TestGrowthOfTimeline(t *testing.T) {
	var b strings.Builder
	for i := range 61 { // one hour, a sample a minute, 2 MB/h
		// The live heap grows 1 MB/h; every seventh scrape failed (no
		// live heap in the sample). n1 exports none.
		live := 10 + float64(i)/60
		if i%7 == 3 {
			live = 0
		}
		sm := soakSample{T: float64(i * 60), Procs: []soakProcSample{{Name: "replica1", PID: 7, RSSMB: 40 + 2*float64(i)/60, AnonMB: 20 + float64(i)/120, LiveMB: live},
			{Name: "n1", PID: 8, RSSMB: 100, AnonMB: 90}}}
		line, _ := json.Marshal(sm)
		b.Write(append(line, '\n'))
		if i == 30 {
			line, _ = json.Marshal(soakFault{T: 1800, Fault: faultReload, Phase: "start"})
			b.Write(append(line, '\n'))
		}
	}
	path := filepath.Join(t.TempDir(), "timeline.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := growthOfTimeline(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.WarmupS != 720 || math.Abs(g.RSSGrowthBy["replica1"]-2) > 0.01 || math.Abs(g.AnonGrowthBy["replica1"]-0.5) > 0.01 || math.Abs(g.FloorGrowthBy["replica1"]-2) > 0.1 ||
		math.Abs(g.AnonFloorGrowthBy["replica1"]-0.5) > 0.1 || g.AnonFloorGrowthBy["n1"] != 0 {
		t.Errorf("growth %+v: want a warm-up of 720 s, RSS and floor 2 MB/h, anon and its floor 0.5, n1's anon floor 0", g)
	}
	if _, ok := g.LiveGrowthBy["n1"]; ok || math.Abs(g.LiveGrowthBy["replica1"]-1) > 0.01 || math.Abs(g.LiveFloorGrowthBy["replica1"]-1) > 0.1 {
		t.Errorf("live heap growth %v, floor %v: want replica1's 1 MB/h, the failed scrapes passed over, and no n1", g.LiveGrowthBy, g.LiveFloorGrowthBy)
	}
	if err := os.WriteFile(path, []byte(b.String()+"{broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := growthOfTimeline(path, 0); err == nil || !strings.Contains(err.Error(), "timeline.jsonl:63:") {
		t.Errorf("a broken line: %v, want its number", err)
	}
}
