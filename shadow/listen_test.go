package shadow

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/store"
)

// ledger collects a Listener's ledger entries.
type ledger struct {
	mu      sync.Mutex
	entries []store.LedgerEntry
}

func (l *ledger) Ledger(e store.LedgerEntry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
}

// TestListener plays the reactor's side through the Listener, as the
// recorder hands it decisions and events: a reaction run and one the loop
// guard held back, each paired with Salt's job, are counted, kept in the
// ledger (stage shadow) and, held back, logged; decisions that are not
// the pipeline's choice of a reaction (a failure, a retry) are not
// compared.
func TestListener(t *testing.T) {
	var logs bytes.Buffer
	led := &ledger{}
	verdicts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "v"}, []string{"verdict"})
	l := NewListener(ListenerOptions{Guard: guard.New(guard.Options{}), Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Ledger: led, Verdicts: verdicts, RunnerJobs: prometheus.NewCounter(prometheus.CounterOpts{Name: "r"})})
	stamp := func(d time.Duration) string { return at(d).Format("2006-01-02T15:04:05.000000") }
	ev := func(id string, s time.Duration) reactor.Event {
		return reactor.Event{ID: id, Tag: "salt/minion/web1/start", Minion: "web1", Received: at(s + lag),
			Data: map[string]any{"id": "web1", "_stamp": stamp(s)}}
	}
	job := func(jid string, s time.Duration) reactor.Event {
		var d map[string]any
		if err := json.Unmarshal([]byte(highstateJob(jid, "web1")), &d); err != nil {
			t.Fatal(err)
		}
		d["_stamp"] = stamp(s)
		raw, _ := json.Marshal(d)
		return reactor.Event{Tag: "salt/job/" + jid + "/new", Received: at(s + lag), Raw: raw}
	}
	decision := func(reason reactor.Reason, stage string, e reactor.Event) reactor.Decision {
		c := highstate()
		return reactor.Decision{Reason: reason, Stage: stage, Rule: "salt/minion/*/start", RuleID: "r1", Chunk: c, File: c.Str("__sls__"),
			Detail: "loop guard: an event of job j0, which this reaction started", Event: e}
	}
	l.Decided(decision(reactor.Failed, store.StageFailed, ev("ev0", 0)))
	l.Decided(decision(reactor.Retried, store.StageDispatched, ev("ev0", 0)))
	if d, j := l.c.Pending(); d != 0 || j != 0 {
		t.Fatalf("a failure and a retry left %d decisions and %d jobs pending, want none compared", d, j)
	}
	l.Decided(decision(reactor.Dispatched, store.StageDispatched, ev("ev1", 0)))
	l.Event(job("j1", time.Second))
	l.Decided(decision(reactor.LoopGuard+"job", store.StageSuppressed, ev("ev2", 2*time.Second)))
	l.Event(job("j2", 3*time.Second))
	l.Stop()

	for v, want := range map[string]float64{Agree: 1, HeldLoop: 1, Differ: 0} {
		if got := testutil.ToFloat64(verdicts.WithLabelValues(v)); got != want {
			t.Errorf("%s verdicts %v, want %v", v, got, want)
		}
	}
	got := map[string]string{}
	for _, e := range led.entries {
		if e.Stage != store.StageShadow {
			t.Errorf("ledger entry of stage %q", e.Stage)
		}
		var rec Record
		if err := json.Unmarshal([]byte(e.Detail), &rec); err != nil {
			t.Fatalf("detail %s: %v", e.Detail, err)
		}
		got[e.EventID+" "+e.JID] = rec.Verdict
	}
	if len(got) != 2 || got["ev1 j1"] != Agree || got["ev2 j2"] != HeldLoop {
		t.Errorf("ledger %v, want ev1 j1 agree and ev2 j2 held-loop", got)
	}
	if n := strings.Count(logs.String(), `msg="shadow: verdict" verdict=held-loop`); n != 1 {
		t.Errorf("%d held-loop lines, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "verdict=agree") || strings.Contains(logs.String(), msgAbandon) {
		t.Errorf("an agreement logged, or something left unpaired:\n%s", logs.String())
	}
}
