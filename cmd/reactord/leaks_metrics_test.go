package main

import (
	"strings"
	"testing"
)

// TestMetricsCarryRuntime: the daemon's /metrics has the Go runtime's and
// the process's metrics beside reactord's, and the split of the former
// reactord_overflow_total (events dropped unreacted, events reacted to but
// not archived).
func TestMetricsCarryRuntime(t *testing.T) {
	srv, _ := natsServer(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
	m := scrape(t, p)
	for _, want := range []string{"\ngo_goroutines ", "\ngo_memstats_heap_alloc_bytes ", "\nprocess_resident_memory_bytes ", "\nprocess_cpu_seconds_total ",
		"\nreactord_dropped_total{reason=\"lane_full\"} 0\n", "\nreactord_archive_dropped_total 0\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if v := metricValue(t, m, "process_resident_memory_bytes"); v == "0" {
		t.Errorf("process_resident_memory_bytes %s", v)
	}
}
