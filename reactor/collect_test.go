package reactor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectReactsOnce: minion starts gathered by collect react once,
// after the quiet period, with every event (a Go template's .events and a
// Jinja file's events); each event stays unacknowledged until then. Past
// max an event is left out, counted; the window ends a collection that
// never goes quiet; a stop gives the gathered events back for redelivery.
func TestCollectReactsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, `reactor:
  - 'salt/minion/*/start':
      sls: go.sls
      collect: {within: 30s, quiet: 10s, max: 4}
  - 'salt/minion/*/start':
      sls: jinja.sls
      collect: {within: 30s, quiet: 10s, max: 4}
`, map[string]string{
			"go.sls":    "#!gotmpl|yaml\norch_go:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.new\n      - pillar: {minions: \"{{ range $i, $e := .events }}{{ if $i }},{{ end }}{{ $e.data.id }}{{ end }}\", last: \"{{ .data.id }}\"}\n",
			"jinja.sls": "orch_jinja:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.new\n      - pillar: {minions: \"{% for e in events %}{{ e.data.id }}{% if not loop.last %},{% endif %}{% endfor %}\", n: {{ events|length }}}\n",
		})
		drv := &recDriver{}
		d, m := optionsReactor(t, eng, drv, 2)
		ctx := context.Background()
		var st settled
		start := func(id string) { minionStart(d, &st, id) }
		outcome := st.of

		for _, id := range []string{"web1", "web2", "web3"} {
			start(id)
			pass(time.Second)
		}
		pass(8 * time.Second)
		if n := len(drv.json()); n != 0 || outcome("web1") != 0 {
			t.Fatalf("before the quiet period ended: %d reactions, web1 settled %v", n, outcome("web1"))
		}
		pass(2 * time.Second)
		got := drv.json()
		want := []string{
			`"__id__":"orch_go","args":[{"mods":"orch.new"},{"pillar":{"minions":"web1,web2,web3","last":"web3"}}]`,
			`"__id__":"orch_jinja","args":[{"mods":"orch.new"},{"pillar":{"minions":"web1,web2,web3","n":3}}]`,
		}
		if len(got) != 2 {
			t.Fatalf("%d reactions after the quiet period, want one per rule: %v", len(got), got)
		}
		for i, w := range want {
			if !slices.ContainsFunc(got, func(c string) bool { return strings.Contains(c, w) }) {
				t.Errorf("reaction %d: none of %v holds %s", i, got, w)
			}
		}
		for _, id := range []string{"web1", "web2", "web3"} {
			if outcome(id) != Ack {
				t.Errorf("%s settled %v after the reaction, want Ack", id, outcome(id))
			}
		}

		// Never quiet: the window ends it, with max 4 of the 6 events.
		for i := range 6 {
			start("db" + string(rune('1'+i)))
			pass(5 * time.Second)
		}
		synctest.Wait()
		if n := len(drv.json()); n != 4 {
			t.Fatalf("%d reactions, want 2 more once the 30s window ended", n)
		}
		if v := testutil.ToFloat64(m.Suppressed.WithLabelValues("collect_full")); v != 4 {
			t.Errorf("collect_full = %v, want 4 (db5 and db6, for each rule)", v)
		}
		if outcome("db6") != Ack {
			t.Errorf("db6, left out, settled %v, want Ack", outcome("db6"))
		}
		// A stop gives a gathered event back.
		start("app1")
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if outcome("app1") != Retry {
			t.Errorf("app1 gathered at the stop settled %v, want Retry", outcome("app1"))
		}
	})
}
