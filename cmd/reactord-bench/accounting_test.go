package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The bench measures the daemon's defaults (audit store, loop guard,
// shared state) unless stripped, and accounts for every event published:
// handled, dropped by reason, or never seen.
func TestBenchAccounting(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		store       string
		guard, kept bool
	}{
		{nil, "sqlite", true, true},
		{[]string{"--store", "none", "--no-loop-guard", "--shared-state=false", "--jetstream"}, "none", false, false},
	} {
		args := append([]string{"--separate-publisher=false", "--count", "3000"}, tc.args...)
		code, out, errOut := runCmd(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		var r benchResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		if r.Published != 3000 || r.Handled+sumDropped(r.Dropped)+r.NeverSeen != r.Published || r.Events != r.Handled {
			t.Errorf("%v: events not accounted for: %s", args, out)
		}
		if _, ok := r.Dropped["lane_full"]; !ok {
			t.Errorf("%v: no lane_full count: %s", args, out)
		}
		if _, ok := r.Dropped["slow_consumer"]; !ok {
			t.Errorf("%v: no slow_consumer count: %s", args, out)
		}
		if r.Store != tc.store || r.LoopGuard != tc.guard || r.SharedState != tc.kept {
			t.Errorf("%v: configuration store=%s guard=%v shared=%v, want %s %v %v", args, r.Store, r.LoopGuard, r.SharedState, tc.store, tc.guard, tc.kept)
		}
		if r.Reactions > 0 && r.LogLines == 0 {
			t.Errorf("%v: %d reactions and no log line counted", args, r.Reactions)
		}
	}
}

// Latencies beyond a second are reported as they are, not as 1000 ms.
func TestBenchLatencyBeyondASecond(t *testing.T) {
	var h latencyHist
	for _, d := range []time.Duration{5 * time.Millisecond, 2500 * time.Millisecond, 2500 * time.Millisecond, 3 * time.Second} {
		h.add(d)
	}
	if p50, p99, mx := h.percentile(0.5), h.percentile(0.99), h.percentile(1); p50 != 2510 || p99 != 2510 || mx != 3000 {
		t.Errorf("p50 %v p99 %v max %v, want 2510 2510 3000", p50, p99, mx)
	}
	h = latencyHist{}
	h.add(15 * time.Microsecond)
	if p := h.percentile(0.5); p != 0.015 {
		t.Errorf("p50 of one 15µs latency = %v, want 0.015 (the maximum)", p)
	}
}
