package daemon

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterRuntimeMetrics registers the Go runtime's metrics (go_goroutines,
// go_memstats_*, go_gc_duration_seconds, ...) and the process's
// (process_resident_memory_bytes, process_cpu_seconds_total,
// process_open_fds, ...) on reg: the daemon's and the bridge's /metrics.
// Beside the defaults it exports go_gc_heap_live_bytes, the heap the last
// garbage collection found reachable: unlike go_memstats_heap_alloc_bytes
// it does not move with the time since that collection, so a leak shows
// as its steady rise. They are the process's, so the process's owner
// registers them (the daemon, the bridge, a NATS node of
// reactord-bench), not the reactor (whose metrics tests and the benchmark
// make many of).
func RegisterRuntimeMetrics(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
