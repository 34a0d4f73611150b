package main

import (
	"bufio"
	"encoding/json"
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
// replicas with every fault kind forced in turn (store-cut with
// REACTORD_TEST_MYSQL_URL, the replicas' store then; disk-full as root on
// Linux): no acknowledged event is
// lost, none reacts before an earlier event of its minion, and the
// timeline and the picture are written.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a 45 s soak of real processes")
	}
	seed := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 10)
	out := t.TempDir()
	kinds := faultKinds
	var store []string
	// With MariaDB, its store and the cut between it and the replicas.
	if u := os.Getenv("REACTORD_TEST_MYSQL_URL"); u != "" {
		kinds = append(slices.Clone(kinds), faultStoreCut)
		store = []string{"--store", u}
	}
	// As root on Linux, the replicas' data directories on tmpfs, filled.
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		kinds = append(slices.Clone(kinds), faultDiskFull)
		store = append(store, "--tmpfs")
	}
	args := append([]string{"soak", "--duration", "45s", "--rate", "40", "--minions", "100", "--fault-every", "2s", "--down", "1s",
		"--interval", "2s", "--faults", strings.Join(kinds, ","), "--seed", seed, "--out", out}, store...)
	cmd := exec.Command(binPath, args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	start := time.Now()
	stdout, err := cmd.Output()
	t.Logf("reactord-bench %s: %v\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), stdout)
	if err != nil {
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
	if sum.Acknowledged < 1000 || sum.Reacted < sum.Acknowledged {
		t.Errorf("seed %s: %d acknowledged, %d reacted: want more than 1,000, all reacted", seed, sum.Acknowledged, sum.Reacted)
	}
	if sum.Lost != 0 || sum.OutOfOrder != 0 {
		t.Errorf("seed %s: %d acknowledged events lost (%v), %d out of order\n%s", seed, sum.Lost, sum.LostSample, sum.OutOfOrder, errOut.String())
	}
	if sum.GoroutinesIn == 0 || sum.FDsIn == 0 || sum.P99ms <= 0 {
		t.Errorf("seed %s: goroutines %d, fds %d, p99 %v ms: not sampled", seed, sum.GoroutinesIn, sum.FDsIn, sum.P99ms)
	}
	f, err := os.Open(filepath.Join(out, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, faults := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Fault string `json:"fault"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("timeline: %v: %s", err, sc.Bytes())
		}
		if line.Fault == "" {
			samples++
			continue
		}
		faults++
		if line.Error != "" {
			t.Errorf("seed %s: fault %s failed: %s", seed, line.Fault, line.Error)
		}
	}
	if samples < 10 || faults < len(kinds) {
		t.Errorf("timeline: %d samples, %d faults", samples, faults)
	}
	if st, err := os.Stat(filepath.Join(out, "soak.png")); err != nil || st.Size() < 10_000 {
		t.Errorf("soak.png: %v", err)
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
