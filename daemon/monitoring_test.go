package daemon

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

const (
	alertRules = "../examples/monitoring/reactord-alerts.yml"
	dashboard  = "../examples/monitoring/reactord-dashboard.json"
)

// exported returns the names of the metrics reg describes (vectors with
// no series yet included).
func exported(reg *prometheus.Registry) []string {
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// runningDaemon starts a daemon with o until the test ends and returns
// its metric names.
func runningDaemon(t *testing.T, o Options) []string {
	t.Helper()
	d, _ := runDaemon(t, o)
	return exported(d.Registry())
}

// runDaemon builds a daemon with o and runs it until it is ready; stop
// ends Run and returns its error (at the end of the test if not before).
func runDaemon(t *testing.T, o Options) (d *Daemon, stop func() error) {
	t.Helper()
	d, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	t.Cleanup(func() { _ = stop() })
	select {
	case <-d.Ready():
	case err := <-done:
		once.Do(func() { cancel(); runErr = err }) // Run has returned: nothing to wait for
		t.Fatalf("Run: %v", err)
	}
	return d, stop
}

// TestMonitoringNamesExportedMetrics: every metric the shipped alerting
// rules and Grafana dashboard name is one the daemon (shared consumer or
// partitions) or the bridge exports, so neither silently watches nothing.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	have := map[string]bool{}
	for _, n := range runningDaemon(t, testOptions(t)) {
		have[n] = true
	}
	po := testOptions(t)
	po.Partitions = 2
	for _, n := range runningDaemon(t, po) {
		have[n] = true
	}
	bo := bridgeOptions(t)
	bo.Registry = prometheus.NewRegistry()
	b, err := NewBridge(context.Background(), bo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	for _, n := range exported(bo.Registry) {
		have[n] = true
	}

	var exprs []string
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Alert+": "+r.Expr)
		}
	}
	raw, err = os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, p.Title+": "+tg.Expr)
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions read from the rules and the dashboard", len(exprs))
	}
	metric := regexp.MustCompile(`\breactord_[a-z0-9_]+`)
	var missing []string
	for _, e := range exprs {
		for _, name := range metric.FindAllString(e, -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && have[b] {
					base = b
				}
			}
			if !have[base] {
				missing = append(missing, name+" (in "+e+")")
			}
		}
	}
	slices.Sort(missing)
	for _, m := range slices.Compact(missing) {
		t.Errorf("not exported: %s", m)
	}
}

// TestDashboardLayout: the shipped dashboard's panels have ids of their
// own (Grafana keys a panel's state by it) and do not overlap on its
// 24-column grid.
func TestDashboardLayout(t *testing.T) {
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	type grid struct{ H, W, X, Y int }
	var dash struct {
		Panels []struct {
			ID      int
			Title   string
			GridPos grid
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	for i, p := range dash.Panels {
		if p.ID <= 0 {
			t.Errorf("panel %q: id %d", p.Title, p.ID)
		}
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q: both id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		for _, q := range dash.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, o, p.Title, g)
			}
		}
	}
}
