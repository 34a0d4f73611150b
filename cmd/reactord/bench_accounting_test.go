package main

import (
	"encoding/json"
	"strings"
	"testing"
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
		args := append([]string{"bench", "--separate-publisher=false", "--count", "3000"}, tc.args...)
		code, out, errOut := runCmd(t, "", args...)
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
