package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registerRuntimeMetrics registers the Go runtime's metrics (go_goroutines,
// go_memstats_*, go_gc_duration_seconds, ...) and the process's
// (process_resident_memory_bytes, process_cpu_seconds_total,
// process_open_fds, ...) on reg: the daemon's and the bridge's /metrics.
// They are the process's, so the process's owner registers them, not the
// reactor (whose metrics tests and the benchmark make many of).
func registerRuntimeMetrics(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
