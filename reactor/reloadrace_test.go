package reactor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/guard"
)

// TestReloadBetweenMatchAndGate: a reload that inserts a rule lands
// between an event's match and its gates. The gates apply the options of
// the rule the event matched (its throttle, its id), not those of the rule
// now at the same position in the new configuration, which has none:
// before match, gates and render were separate stages, the gate looked
// the rule's position up in the live engine, and the second event below
// escaped the throttle (two dispatches of a.sls).
func TestReloadBetweenMatchAndGate(t *testing.T) {
	files := map[string]string{
		"a.sls":   "a:\n  runner.test.arg:\n    - args: [a]\n",
		"new.sls": "new:\n  runner.test.arg:\n    - args: [new]\n",
	}
	for _, tc := range []struct {
		name, option string
		// want are the dispatches once both events were handled (the
		// second after the reload, with the rule it matched).
		want string
	}{
		// The first event's a, then the third's new: a is throttled for
		// the second and third.
		{"throttle", "throttle: {count: 1, per: 1h}", "[thr/x a thr/x new]"},
		// The third event's new, then a once the quiet period passed.
		{"debounce", "debounce: 2s", "[thr/x new thr/x a]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				before := engineWith(t, "reactor:\n  - 'thr/*':\n      sls: a.sls\n      "+tc.option+"\n", files)
				// The new rule comes first, at the old rule's position,
				// and has no option.
				after := engineWith(t, "reactor:\n  - 'thr/*': new.sls\n  - 'thr/*':\n      sls: a.sls\n      "+tc.option+"\n", files)
				drv := &jidDriver{}
				m := NewMetrics(prometheus.NewRegistry())
				d, err := New(before, Options{Driver: drv, Lanes: 1, Block: true, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
				if err != nil {
					t.Fatal(err)
				}
				var once sync.Once
				ctx := context.Background()
				d.Start(ctx)
				send := func() {
					d.Submit(ctx, Delivery{Body: []byte(`{"tag": "thr/x", "data": {"id": "web1"}}`)})
					synctest.Wait()
				}
				if tc.name == "throttle" {
					send() // uses the throttle's one reaction an hour
				}
				d.hookMatched = func() {
					once.Do(func() {
						if err := d.Reload(after); err != nil {
							t.Error(err)
						}
					})
				}
				send()
				send() // after the reload: both rules match
				synctest.Wait()
				if tc.name == "debounce" {
					// The quiet period passes: the held event reacts once,
					// for a.sls.
					pass(3 * time.Second)
				}
				got := fmt.Sprint(drv.snapshot())
				if tc.name == "throttle" {
					if n := testutil.ToFloat64(m.Suppressed.WithLabelValues("throttle")); n != 2 {
						t.Errorf("%v events throttled, want 2 (the second and third event's a.sls)", n)
					}
				}
				if got != tc.want {
					t.Errorf("dispatched %s, want %s", got, tc.want)
				}
				if err := d.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestHeldEventMeetsTheRuleAsReloaded: an event a debounce held reacts,
// when let go, under its rule as the configuration has it then: a reload
// that gave the rule (same id) a when that refuses the event stops it,
// and one that changed its glob drops it, counted.
func TestHeldEventMeetsTheRuleAsReloaded(t *testing.T) {
	files := map[string]string{"a.sls": "a:\n  runner.test.arg:\n    - args: [a]\n"}
	rule := func(glob, extra string) string {
		return "reactor:\n  - '" + glob + "':\n      id: deb\n      sls: a.sls\n      debounce: 2s\n" + extra
	}
	for _, tc := range []struct {
		name, after, reason string
	}{
		{"when refuses", rule("deb/*", "      when: 'false'\n"), ""},
		{"glob no longer matches", rule("other/*", ""), "rule_removed"},
		{"unchanged", rule("deb/*", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &jidDriver{}
				m := NewMetrics(prometheus.NewRegistry())
				d, err := New(engineWith(t, rule("deb/*", ""), files), Options{Driver: drv, Lanes: 1, Block: true, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				d.Start(ctx)
				d.Submit(ctx, Delivery{Body: []byte(`{"tag": "deb/x", "data": {"id": "web1"}}`)})
				synctest.Wait()
				if err := d.Reload(engineWith(t, tc.after, files)); err != nil {
					t.Fatal(err)
				}
				pass(3 * time.Second)
				want := "[]"
				if tc.name == "unchanged" {
					want = "[deb/x a]"
				}
				if got := fmt.Sprint(drv.snapshot()); got != want {
					t.Errorf("dispatched %s, want %s", got, want)
				}
				if tc.reason != "" {
					if n := testutil.ToFloat64(m.Suppressed.WithLabelValues(tc.reason)); n != 1 {
						t.Errorf("reactord_suppressed_total{reason=%q} = %v, want 1", tc.reason, n)
					}
				}
				if err := d.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
