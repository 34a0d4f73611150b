package reactor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/reactord/reactord/actions"
)

func jobRetOK(jid, id string, ok bool) []byte {
	rc := 0
	if !ok {
		rc = 2
	}
	return []byte(fmt.Sprintf(`{"tag": "salt/job/%s/ret/%s", "data": {"id": "%s", "jid": "%s", "fun": "state.apply", "success": %v, "retcode": %d}}`, jid, id, id, jid, ok, rc))
}

// TestRetryFailedMinions: a job that fails on one of its two minions runs
// again there alone after the backoff, doubled for the next attempt; a
// minion that does not return counts with on: [no_return]; after the
// last attempt the reaction gives up, and only then is the event
// acknowledged. A retry that succeeds ends it early.
func TestRetryFailedMinions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'myco/deploy':\n      sls: d.sls\n      retry: {attempts: 2, backoff: 10s, on: [failed, no_return]}\n",
			map[string]string{"d.sls": "#!yaml\ndeploy:\n  local.state.apply:\n    - tgt: web1,web2\n    - tgt_type: list\n"})
		drv := &recDriver{}
		d, m := optionsReactor(t, eng, drv, 1)
		ctx := context.Background()
		var mu sync.Mutex
		var outcome Outcome
		submit := func(b []byte, settle func(Outcome)) {
			d.Submit(ctx, Delivery{Body: b, Redelivers: true, Settle: settle})
			synctest.Wait()
		}
		jid := func(n int) string { return fmt.Sprintf("2026%016d", n) }

		submit([]byte(`{"tag": "myco/deploy", "data": {}}`), func(o Outcome) { mu.Lock(); outcome = o; mu.Unlock() })
		submit(jobRetOK(jid(1), "web1", true), nil)
		submit(jobRetOK(jid(1), "web2", false), nil)
		pass(9 * time.Second)
		if got := drv.targets(); got != "[state.apply list:web1,web2]" {
			t.Fatalf("before the backoff: %s", got)
		}
		pass(2 * time.Second)
		if got := drv.targets(); got != "[state.apply list:web1,web2 state.apply list:web2]" {
			t.Fatalf("after the backoff: %s, want web2 alone again", got)
		}
		submit(jobRetOK(jid(2), "web2", false), nil) // fails again: next in 20s
		pass(19 * time.Second)
		if n := testutil.ToFloat64(m.Retries.WithLabelValues("retried")); n != 1 {
			t.Fatalf("retried %v before the doubled backoff, want 1", n)
		}
		pass(2 * time.Second)
		if got := drv.targets(); got != "[state.apply list:web1,web2 state.apply list:web2 state.apply list:web2]" {
			t.Fatalf("second retry: %s", got)
		}
		mu.Lock()
		if outcome != 0 {
			t.Errorf("the event was settled (%v) while its retries ran", outcome)
		}
		mu.Unlock()
		// The last retry never returns: no_return, and no attempt left.
		pass(62 * time.Second)
		if n := testutil.ToFloat64(m.Retries.WithLabelValues("gave_up")); n != 1 {
			t.Errorf("gave_up = %v, want 1", n)
		}
		mu.Lock()
		if outcome != Ack {
			t.Errorf("the event settled %v after the reaction gave up, want Ack", outcome)
		}
		mu.Unlock()

		// A retry that succeeds ends it.
		submit([]byte(`{"tag": "myco/deploy", "data": {}}`), nil)
		submit(jobRetOK(jid(4), "web1", false), nil)
		submit(jobRetOK(jid(4), "web2", true), nil)
		pass(11 * time.Second)
		submit(jobRetOK(jid(5), "web1", true), nil)
		if n := testutil.ToFloat64(m.Retries.WithLabelValues("succeeded")); n != 1 {
			t.Errorf("succeeded = %v, want 1 (calls %s)", n, drv.targets())
		}
		if err := d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetryKeepsConcurrencyPlace: with concurrency 1, a reaction whose job
// failed keeps its place through its retry: the next event waits until the
// retry's job returned.
func TestRetryKeepsConcurrencyPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'salt/minion/*/start':\n      sls: hs.sls\n      concurrency: 1\n      key: '\"all\"'\n      retry: {attempts: 1, backoff: 10s}\n",
			map[string]string{"hs.sls": "#!gotmpl|yaml\nhs_{{ .data.id }}:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n"})
		drv := &recDriver{}
		d, _ := optionsReactor(t, eng, drv, 2)
		var st settled
		ret := func(n int, id string, ok bool) {
			d.Submit(context.Background(), Delivery{Body: jobRetOK(fmt.Sprintf("2026%016d", n), id, ok)})
			synctest.Wait()
		}
		minionStart(d, &st, "web1")
		minionStart(d, &st, "web2") // queued behind web1
		ret(1, "web1", false)       // fails: a retry in 10s keeps the place
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1]" {
			t.Fatalf("after web1 failed: %s, want web2 still waiting for web1's retry", got)
		}
		pass(11 * time.Second)
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web1]" {
			t.Fatalf("after the backoff: %s, want web1's retry alone", got)
		}
		ret(2, "web1", true)
		if got := fmt.Sprint(drv.field("tgt")); got != "[web1 web1 web2]" {
			t.Fatalf("after the retry returned: %s, want web2 now", got)
		}
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReturnFailed: what counts as a failed job return.
func TestReturnFailed(t *testing.T) {
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"success": true, "retcode": 0}`, false},
		{`{"success": false, "retcode": 0}`, true},
		{`{"success": true, "retcode": 2}`, true},
		{`{"retcode": 1.0}`, true},
		{`{"return": {"retcode": 5}}`, false},
		{`{"success": true, "retcode": "x"}`, false},
		{`{}`, false},
		{`[1]`, true},
		{`{"success": `, true},
	} {
		if got := returnFailed([]byte(c.data)); got != c.want {
			t.Errorf("returnFailed(%s) = %v, want %v", c.data, got, c.want)
		}
	}
}

// blockingDriver records calls and holds each one after the first until
// release is closed.
type blockingDriver struct {
	recDriver
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (b *blockingDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	if b.calls.Add(1) > 1 {
		close(b.entered)
		<-b.release
	}
	return b.recDriver.Do(ctx, a)
}

// TestStopWaitsForARetryUnderWay: a retry whose timer fired is running
// its job when the reactor stops; Stop returns only once it is done, so
// that the daemon does not close the driver or the store under it.
func TestStopWaitsForARetryUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engineWith(t, "reactor:\n  - 'myco/deploy':\n      sls: d.sls\n      retry: {attempts: 2, backoff: 10s, on: [failed]}\n",
			map[string]string{"d.sls": "#!yaml\ndeploy:\n  local.state.apply:\n    - tgt: web1\n"})
		drv := &blockingDriver{entered: make(chan struct{}), release: make(chan struct{})}
		d, _ := optionsReactor(t, eng, drv, 1)
		ctx := context.Background()
		d.Submit(ctx, Delivery{Body: []byte(`{"tag": "myco/deploy", "data": {}}`), Redelivers: true})
		synctest.Wait()
		d.Submit(ctx, Delivery{Body: jobRetOK("20260000000000000001", "web1", false), Redelivers: true})
		pass(11 * time.Second)
		<-drv.entered // the retry is in the driver
		var stopped atomic.Bool
		go func() {
			if err := d.Stop(ctx); err != nil {
				t.Error(err)
			}
			stopped.Store(true)
		}()
		synctest.Wait()
		if stopped.Load() {
			t.Fatal("Stop returned while a retry was in the driver")
		}
		close(drv.release)
		synctest.Wait()
		if !stopped.Load() {
			t.Fatal("Stop did not return once the retry was done")
		}
	})
}
