package reactor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/testfiles"
	"github.com/reactord/reactord/store"
)

// logLines collects a JSON slog handler's lines.
type logLines struct{ syncbuf.Buffer }

func (l *logLines) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level}))
}

// lines returns the records logged, decoded.
func (l *logLines) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(l.String())), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// failDriver fails the reactions of events tagged ev/fail*.
type failDriver struct{ gateDriver }

func (*failDriver) Close(context.Context) error { return nil }

func (f *failDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	if strings.HasPrefix(a.Tag, "ev/fail") {
		return actions.Result{}, errors.New("minion unreachable")
	}
	return f.gateDriver.Do(ctx, a)
}

// engineWith writes reactor.conf (conf) and the files, and loads them.
func engineWith(t testing.TB, conf string, files map[string]string) *engine.Engine {
	t.Helper()
	files["reactor.conf"] = conf
	dir := testfiles.Tree(t, files)
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return engine.MustNew(cfg, engine.Options{})
}

var eventIDPattern = regexp.MustCompile(`^[0-9a-z]+-[0-9]+$`)

// TestReactorEventIDWithoutStore: with no Archive (--store none) every event
// still gets an id, and every line about an event carries it: dispatches,
// failures, suppressions and dropped files, from the daemon and from the
// engine.
func TestReactorEventIDWithoutStore(t *testing.T) {
	var logs logLines
	drv := &failDriver{}
	eng := engineWith(t, "reactor:\n  - 'ev/*': r.sls\n  - 'drop/*': missing.sls\n",
		map[string]string{"r.sls": "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"})
	eng = engine.MustNew(eng.Config(), engine.Options{Log: logs.logger(slog.LevelInfo)})
	d, err := New(eng, Options{Driver: drv, Lanes: 2, Block: true, MaxHops: 3, Log: logs.logger(slog.LevelInfo),
		Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("ev/ok", "web1")})
	d.Submit(ctx, Delivery{Body: body("ev/fail", "web2")})
	d.Submit(ctx, Delivery{Body: body("ev/loop", "web3"), Hop: 4})
	d.Submit(ctx, Delivery{Body: body("drop/x", "web4")})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	msgs := map[string]bool{}
	for _, l := range logs.lines(t) {
		msg, _ := l["msg"].(string)
		id, _ := l["event_id"].(string)
		if !eventIDPattern.MatchString(id) {
			t.Errorf("line without an event_id: %v", l)
			continue
		}
		tag, _ := l["tag"].(string)
		if prev, ok := ids[tag]; ok && prev != id {
			t.Errorf("event %s logged with ids %s and %s", tag, prev, id)
		}
		ids[tag] = id
		msgs[msg] = true
	}
	for _, want := range []string{"reaction dispatched", "reaction failed", "event suppressed: hop limit reached", "reaction file dropped"} {
		if !msgs[want] {
			t.Errorf("no line %q; got %v", want, msgs)
		}
	}
	if len(ids) != 4 {
		t.Errorf("ids by tag: %v, want 4 events", ids)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %s given to two events: %v", id, ids)
		}
		seen[id] = true
	}
}

// TestReactorDebugDecisions: at debug level (-v) each decision of the
// pipeline is logged, with the event's id.
func TestReactorDebugDecisions(t *testing.T) {
	var logs logLines
	d, err := New(daemonEngine(t), Options{Driver: &gateDriver{}, Lanes: 1, Log: logs.logger(slog.LevelDebug),
		Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("ev/1", "web1")})
	d.Submit(ctx, Delivery{Body: body("other/1", "web1")})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	ids := map[string]string{}
	for _, l := range logs.lines(t) {
		tag, _ := l["tag"].(string)
		id, _ := l["event_id"].(string)
		if prev, ok := ids[tag]; ok && prev != id || id == "" {
			t.Errorf("event %s: line %v, id %q before", tag, l, prev)
		}
		ids[tag] = id
		got[tag] = append(got[tag], l["level"].(string)+" "+l["msg"].(string))
	}
	want := map[string][]string{
		"ev/1":    {"DEBUG event received", "DEBUG rule matched", "DEBUG reaction file rendered", "DEBUG reactions to dispatch", "INFO reaction dispatched"},
		"other/1": {"DEBUG event received", "DEBUG no rule matched"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lines by event:\n got %q\nwant %q", got, want)
	}
	if ids["ev/1"] == ids["other/1"] {
		t.Errorf("both events have id %s", ids["ev/1"])
	}

	// At info level none of the debug lines go out.
	var quiet logLines
	d, err = New(daemonEngine(t), Options{Driver: &gateDriver{}, Lanes: 1, Log: quiet.logger(slog.LevelInfo),
		Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("other/1", "web1")})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if l := quiet.lines(t); len(l) != 0 {
		t.Errorf("info level logged %v", l)
	}
}

// TestReactorRefusesInvalidUTF8: an event with a string that is not UTF-8,
// in its tag or its data, is malformed: counted, acknowledged, not
// dispatched, and one line stands for many.
func TestReactorRefusesInvalidUTF8(t *testing.T) {
	var logs logLines
	drv := &gateDriver{}
	m := NewMetrics(prometheus.NewRegistry())
	d, err := New(daemonEngine(t), Options{Driver: drv, Lanes: 2, Metrics: m, Log: logs.logger(slog.LevelInfo),
		Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"{\"tag\": \"ev/web\xff\xfe\", \"data\": {\"id\": \"web1\"}}",
		"{\"tag\": \"ev/1\", \"data\": {\"id\": \"web\xc3\"}}",
		"{\"tag\": \"ev/1\", \"data\": {\"nested\": [{\"k\xff\": 1}], \"id\": \"web1\"}}",
		`{"tag": "ev/1", "data": {"id": "web\udc80"}}`,
	}
	ctx := context.Background()
	d.Start(ctx)
	var done sync.WaitGroup
	const rounds = 50
	for range rounds {
		for _, b := range bad {
			done.Add(1)
			if !d.Submit(ctx, Delivery{Body: []byte(b), Settle: func(Outcome) { done.Done() }}) {
				t.Fatalf("Submit refused %q", b)
			}
		}
	}
	d.Submit(ctx, Delivery{Body: body("ev/good", "web1")})
	done.Wait()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(drv.order) != 1 || drv.order[0] != "ev/good" {
		t.Errorf("dispatched %q, want only ev/good", drv.order)
	}
	if v := testutil.ToFloat64(m.Malformed); v != rounds*float64(len(bad)) {
		t.Errorf("malformed = %v, want %d", v, rounds*len(bad))
	}
	var lines []map[string]any
	for _, l := range logs.lines(t) {
		if strings.HasPrefix(l["msg"].(string), "malformed event dropped") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d malformed lines for %d events, want 1: %v", len(lines), rounds*len(bad), lines)
	}
	if e, _ := lines[0]["err"].(string); !strings.Contains(e, "invalid UTF-8") || lines[0]["event_id"] == nil {
		t.Errorf("line %v: want the UTF-8 error and an event_id", lines[0])
	}
}

// TestRuleMatchesMetric: reactord_rule_matches_total counts, by glob, the
// events each rule matched, whether or not its reactions ran.
func TestRuleMatchesMetric(t *testing.T) {
	eng := engineWith(t, "reactor:\n  - 'ev/*': r.sls\n  - 'ev/web*': r.sls\n  - 'never/*': r.sls\n",
		map[string]string{"r.sls": "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	d, err := New(eng, Options{Driver: &gateDriver{}, Lanes: 1, Metrics: m, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.Start(ctx)
	for _, tag := range []string{"ev/web1", "ev/web2", "ev/db1", "other/x"} {
		d.Submit(ctx, Delivery{Body: body(tag, "a")})
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for glob, want := range map[string]float64{"ev/*": 3, "ev/web*": 2} {
		if v := testutil.ToFloat64(m.RuleMatches.WithLabelValues(glob)); v != want {
			t.Errorf("rule %s: %v matches, want %v", glob, v, want)
		}
	}
	if n := testutil.CollectAndCount(m.RuleMatches); n != 2 {
		t.Errorf("%d series, want 2 (a rule that never matched has none)", n)
	}
}

// TestReactorLedger: the ledger entries of an event, by stage, as the
// daemon writes them with an Archive.
func TestReactorLedger(t *testing.T) {
	var logs logLines
	ctx := context.Background()
	s := &memStore{}
	w := store.NewWriter(s, store.WriterOptions{})
	eng := engineWith(t, "reactor:\n  - 'ev/*': [r.sls, missing.sls]\n  - 'ev/fail':\n      sls: r.sls\n      when: 'false'\n",
		map[string]string{"r.sls": "r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"})
	d, err := New(eng, Options{Driver: &failDriver{}, Lanes: 1, MaxHops: 3, Log: logs.logger(slog.LevelInfo),
		Archive: &Archive{W: w, MasterID: "m"}, Guard: guard.New(guard.Options{Disabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(ctx)
	d.Submit(ctx, Delivery{Body: body("ev/ok", "web1")})
	d.Submit(ctx, Delivery{Body: body("ev/fail", "web2")})
	d.Submit(ctx, Delivery{Body: body("ev/loop", "web3"), Hop: 4})
	d.Submit(ctx, Delivery{Body: body("quiet/x", "web4")})
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	evs := s.batch.Events
	ids := map[string]string{}
	for _, e := range evs {
		ids[e.Tag] = e.ID
	}
	// Every event is archived; only those the ledger has something about
	// carry an id (nothing matched quiet/x).
	if id, ok := ids["quiet/x"]; !ok || id != "" || len(evs) != 4 {
		t.Errorf("archived events %+v: want 4, quiet/x without an id", evs)
	}
	want := map[string][]string{
		"ev/ok": {
			"failed ev/* - - - web1 reactor.conf:2:21: can not render SLS missing.sls for tag ev/ok: file missing or not found",
			"dispatched ev/* r.sls r 1 web1 gate local test.ping",
		},
		"ev/fail": {
			"suppressed ev/fail - - - web2 when: `false` is false",
			"failed ev/* - - - web2 reactor.conf:2:21: can not render SLS missing.sls for tag ev/fail: file missing or not found",
			"failed ev/* r.sls r - web2 gate: minion unreachable",
		},
		"ev/loop": {"suppressed - - - - web3 hop limit: 4 hops > 3"},
	}
	for tag, stages := range want {
		id := ids[tag]
		if id == "" {
			t.Fatalf("no event id logged for %s", tag)
		}
		var got []string
		for _, e := range s.trace(id) {
			if e.EventID != id || e.Tag != tag {
				t.Errorf("entry %+v: want event %s %s", e, id, tag)
			}
			f := func(s string) string {
				if s == "" {
					return "-"
				}
				return s
			}
			detail := confPath.ReplaceAllString(e.Detail, "reactor.conf")
			got = append(got, strings.Join([]string{e.Stage, f(e.Rule), f(strings.TrimPrefix(e.File, filepath.Dir(e.File)+"/")), f(e.ReactionID), f(e.JID), f(e.Minion), detail}, " "))
		}
		if len(got) != len(stages) {
			t.Errorf("%s: ledger\n%s\nwant\n%s", tag, strings.Join(got, "\n"), strings.Join(stages, "\n"))
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], stages[i]) {
				t.Errorf("%s entry %d: %q, want it to begin %q", tag, i, got[i], stages[i])
			}
		}
	}
}

// memStore keeps what the writer gives it in memory: the records the
// reactor archived, as the writer batched them (reactor's tests link no
// SQL driver; store/sqlstore tests the databases).
type memStore struct {
	mu    sync.Mutex
	batch store.Batch
}

func (m *memStore) Write(_ context.Context, b store.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batch.Events = append(m.batch.Events, b.Events...)
	m.batch.Jobs = append(m.batch.Jobs, b.Jobs...)
	m.batch.Returns = append(m.batch.Returns, b.Returns...)
	m.batch.Ledger = append(m.batch.Ledger, b.Ledger...)
	return nil
}

// trace is the ledger of one event, in the order written.
func (m *memStore) trace(id string) []store.LedgerEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.LedgerEntry
	for _, e := range m.batch.Ledger {
		if e.EventID == id {
			out = append(out, e)
		}
	}
	return out
}

func (m *memStore) Jobs(context.Context, time.Time, int) ([]store.Job, error) { return nil, nil }
func (m *memStore) Lookup(context.Context, string) ([]store.Return, error)    { return nil, nil }
func (m *memStore) Events(context.Context, time.Time, string, int) ([]store.Event, error) {
	return nil, nil
}
func (m *memStore) Trace(context.Context, string) ([]store.LedgerEntry, error) { return nil, nil }
func (m *memStore) Ledger(context.Context, store.LedgerQuery) ([]store.LedgerEntry, error) {
	return nil, nil
}
func (m *memStore) Purge(context.Context, time.Time) (int64, error) { return 0, nil }
func (m *memStore) Close() error                                    { return nil }

var confPath = regexp.MustCompile(`\S*/reactor\.conf`)
