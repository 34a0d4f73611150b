package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// reactord-bench --replicas runs the daemons as processes, on one NATS
// server or on a cluster of node processes, and accounts for every event
// published from the replicas' /metrics.
func TestBenchReplicas(t *testing.T) {
	for _, args := range [][]string{
		{"--replicas", "2"},
		{"--replicas", "2", "--cluster", "3", "--partitions", "2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(binPath, append([]string{"--count", "2000"}, args...)...)
			var errOut strings.Builder
			cmd.Stderr = &errOut
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v\n%s%s", err, out, errOut.String())
			}
			var r benchReplicasResult
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if r.Published != 2000 || r.Handled != r.Published || r.NeverSeen != 0 || sumDropped(r.Dropped) != 0 {
				t.Errorf("events not accounted for: %s\nthe replicas' warnings:\n%s", out, errOut.String())
			}
			if len(r.PerReplica) != 2 {
				t.Fatalf("%d replicas reported, want 2: %s", len(r.PerReplica), out)
			}
			var handled int64
			partitions := 0
			for _, p := range r.PerReplica {
				handled += p.Handled
				partitions += p.Partitions
			}
			if handled != r.Handled || r.P99ms <= 0 || r.ReplicasCPUms <= 0 {
				t.Errorf("per-replica handled %d of %d, p99 %v ms, replicas' CPU %v ms per 1k: %s", handled, r.Handled, r.P99ms, r.ReplicasCPUms, out)
			}
			if r.Partitions > 0 && partitions != r.Partitions {
				t.Errorf("replicas hold %d partitions, want %d: %s", partitions, r.Partitions, out)
			}
			if strings.Contains(strings.Join(args, " "), "--cluster") && (r.NATSNodes != 3 || r.StreamReplicas != 3 || len(r.PerNode) != 3) {
				t.Errorf("NATS nodes %d, stream replicas %d, nodes reported %d; want 3: %s", r.NATSNodes, r.StreamReplicas, len(r.PerNode), out)
			}
			t.Logf("%s", out)
		})
	}
}
