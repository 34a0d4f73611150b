package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/natsdriver"
	"github.com/reactord/reactord/reactor"
)

// TestMetricsCarryRuntime: the daemon's /metrics has the Go runtime's and
// the process's metrics beside reactord's (the live heap among them), and
// the split of the former reactord_overflow_total (events dropped
// unreacted, events reacted to but not archived); Go's profiles are not
// served without --pprof.
func TestMetricsCarryRuntime(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
	m := scrape(t, p)
	if v, err := strconv.ParseFloat(metricValue(t, m, "go_gc_heap_live_bytes"), 64); err != nil || v < 1<<20 {
		t.Errorf("go_gc_heap_live_bytes %v (%v), want the live heap, over a MiB", v, err)
	}
	if code := healthCode(p, "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/heap without --pprof: %d, want 404", code)
	}
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

// TestPprof: with --pprof the daemon serves Go's heap profile and
// goroutine dump on --http.
func TestPprof(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none", "--pprof")
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get("http://" + p.http + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d (%v)", path, resp.StatusCode, err)
		}
		return b
	}
	// A profile is gzipped protobuf.
	if heap := get("/debug/pprof/heap"); len(heap) < 100 || heap[0] != 0x1f || heap[1] != 0x8b {
		t.Errorf("/debug/pprof/heap: %d bytes %x..., want a gzipped profile", len(heap), heap[:min(4, len(heap))])
	}
	// Not the command line: it may hold a password given as a flag.
	if resp, err := http.Get("http://" + p.http + "/debug/pprof/cmdline"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/cmdline: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	// A dump of every goroutine's stack; the daemon runs in this test's
	// process, so its consumer's goroutines are among them.
	if g := string(get("/debug/pprof/goroutine?debug=2")); !strings.Contains(g, "[running]:") || !strings.Contains(g, "github.com/reactord/reactord/natsbus/consume.") {
		t.Errorf("/debug/pprof/goroutine?debug=2 is no dump of the daemon's goroutines:\n%.2000s", g)
	}
}

// TestDriverMetrics: the nats driver exports its unconfirmed reactions;
// a driver that counts none adds nothing.
func TestDriverMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reactor.RegisterDriverMetrics(reg, actions.Null{})
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("null driver: %d series (%v)", n, err)
	}
	_, c := natsServer(t)
	reactor.RegisterDriverMetrics(reg, natsdriver.New(c, "", "test"))
	want := `# HELP reactord_driver_unconfirmed_total Reactions published but not confirmed by the server (the connection failed or the confirming flush timed out): they may not have reached executors, and are not resent.
# TYPE reactord_driver_unconfirmed_total counter
reactord_driver_unconfirmed_total{driver="nats"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
