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

// TestConcurrencyQueuesInOrder: a rule with concurrency 2 (one key for the
// whole estate) runs two highstates at once; the other starts wait,
// unacknowledged, and react in the order they came as jobs return or
// time out; at a stop the events still queued go back for redelivery.
func TestConcurrencyQueuesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/minion/*/start':\n      sls: hs.sls\n      concurrency: 2\n      key: '\"estate\"'\n",
			map[string]string{"hs.sls": "#!gotmpl|yaml\nhs_{{ .data.id }}:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"})
		drv := &jidDriver{}
		m := NewMetrics(prometheus.NewRegistry())
		d, err := New(eng, Options{Driver: drv, Lanes: 2, Block: true, Metrics: m, Guard: guard.New(guard.Options{Settle: time.Second, JobTimeout: time.Minute})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.Start(ctx)
		var mu sync.Mutex
		outcomes := map[string]Outcome{}
		submit := func(id string) {
			d.Submit(ctx, Delivery{Body: []byte(`{"tag": "salt/minion/` + id + `/start", "data": {"id": "` + id + `"}}`), Redelivers: true,
				Settle: func(o Outcome) { mu.Lock(); outcomes[id] = o; mu.Unlock() }})
			synctest.Wait()
		}
		ret := func(jid, id string) {
			d.Submit(ctx, Delivery{Body: jobRet(jid, id)})
			synctest.Wait()
		}
		dispatched := func() string {
			var ids []string
			for _, c := range drv.snapshot() {
				ids = append(ids, c[len(c)-4:])
			}
			return fmt.Sprint(ids)
		}
		settled := func(id string) Outcome { mu.Lock(); defer mu.Unlock(); return outcomes[id] }

		for i := 1; i <= 5; i++ {
			submit(fmt.Sprintf("web%d", i))
		}
		if got := dispatched(); got != "[web1 web2]" {
			t.Fatalf("dispatched %s, want web1 and web2 only", got)
		}
		if v := testutil.ToFloat64(m.ConcurrencyQueued); v != 3 {
			t.Errorf("reactord_concurrency_queued = %v, want 3", v)
		}
		if settled("web3") != 0 || settled("web1") != Ack {
			t.Errorf("web3 settled %v (want held), web1 %v (want Ack)", settled("web3"), settled("web1"))
		}
		ret("2026"+fmt.Sprintf("%016d", 2), "web2") // web2's job returns first
		if got := dispatched(); got != "[web1 web2 web3]" {
			t.Fatalf("after web2 returned: dispatched %s, want web3 next", got)
		}
		ret("2026"+fmt.Sprintf("%016d", 1), "web1")
		if got := dispatched(); got != "[web1 web2 web3 web4]" {
			t.Fatalf("after web1 returned: dispatched %s, want web4 next", got)
		}
		// web3's and web4's jobs never return: after the job timeout their
		// slots go to web5 (and the next).
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if got := dispatched(); got != "[web1 web2 web3 web4 web5]" {
			t.Fatalf("after the job timeout: dispatched %s, want web5", got)
		}
		if settled("web5") != Ack || testutil.ToFloat64(m.ConcurrencyQueued) != 0 {
			t.Errorf("web5 settled %v, queued %v", settled("web5"), testutil.ToFloat64(m.ConcurrencyQueued))
		}
		// Two more while two are in flight wait; a stop leaves them for
		// redelivery.
		submit("web6")
		submit("web7")
		submit("web8")
		if got := dispatched(); got != "[web1 web2 web3 web4 web5 web6]" {
			t.Fatalf("dispatched %s, want web6 (one slot was free)", got)
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if settled("web7") != Retry || settled("web8") != Retry {
			t.Errorf("queued at the stop: web7 %v, web8 %v, want Retry", settled("web7"), settled("web8"))
		}
	})
}
