package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// shadowStamp is the master's _stamp of an event or job of TestShadowMode,
// sec seconds after a fixed time: the comparer pairs by these stamps, so
// each case has its own second, far enough from the others' (more than
// the window and the skew) that none pairs across cases.
func shadowStamp(sec float64) string {
	return shadowBase.Add(time.Duration(sec * float64(time.Second))).Format(stampLayout)
}

var shadowBase = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

const stampLayout = "2006-01-02T15:04:05.000000"

// Salt's jobs in TestShadowMode.
const (
	jidWeb1      = "20261128120000000001" // the highstate of web1's start (agree)
	jidAccept    = "20261128120050000002" // key.accept of web9 (agree)
	jidWeb3      = "20261128120010000003" // web3's start: Salt ran another highstate (differ)
	jidOrch      = "20261128120030000004" // an orchestration nothing accounts for (salt-only)
	jidUptime    = "20261128120040000005" // a local job of root nothing accounts for (ambiguous)
	jidAlice     = "20261128120040000006" // a job of another user (never Salt's reactor's)
	jidDeploy1   = "20261128120100000007" // web5's first deploy (agree)
	jidDeploy2   = "20261128120101000008" // web5's second deploy, throttled (held-throttle)
	jidLoop1     = "20261128120110000009" // loop1's highstate (agree; reactord adopts it)
	jidLoop2     = "20261128120112000010" // loop1's highstate again as it restarts (held-loop)
	shadowWindow = "1s"
)

// shadowPublisher publishes events as the bridge does (natsbus.Event, its
// message id made of the tag and the master's stamp).
type shadowPublisher struct {
	t *testing.T
	c *natsbus.Conn
}

func (p shadowPublisher) event(tag, data string) {
	p.t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		p.t.Fatalf("%s: %v", tag, err)
	}
	body := []byte(`{"tag": "` + tag + `", "data": ` + data + `}`)
	if err := p.c.Publish(context.Background(), natsbus.Msg{Tag: tag, Body: body, Meta: natsbus.Meta{MsgID: tag + "@" + d["_stamp"].(string)}}, natsbus.Event); err != nil {
		p.t.Fatal(err)
	}
}

// start is a minion's start event.
func (p shadowPublisher) start(minion string, sec float64) {
	p.t.Helper()
	p.event("salt/minion/"+minion+"/start", fmt.Sprintf(`{"id": %q, "cmd": "_minion_event", "data": "Minion %s started", "_stamp": %q}`, minion, minion, shadowStamp(sec)))
}

// local is the salt/job/<jid>/new event of a local job of user on minion.
func (p shadowPublisher) local(jid, user, minion, fun, arg string, sec float64) {
	p.t.Helper()
	p.event("salt/job/"+jid+"/new", fmt.Sprintf(`{"jid": %q, "tgt_type": "glob", "tgt": %q, "user": %q, "fun": %q, "arg": %s, "minions": [%q], "missing": [], "_stamp": %q}`,
		jid, minion, user, fun, arg, minion, shadowStamp(sec)))
}

// shadowVerdicts returns reactord_shadow_total by verdict, every verdict
// included.
func shadowVerdicts(t *testing.T, p *proc) map[string]string {
	t.Helper()
	m := scrape(t, p)
	out := map[string]string{}
	for _, v := range shadow.Verdicts {
		out[v] = metricValue(t, m, `reactord_shadow_total{verdict="`+v+`"}`)
	}
	return out
}

// waitVerdicts waits until reactord_shadow_total is want (verdicts not
// named: 0).
func waitVerdicts(t *testing.T, p *proc, want map[string]int) {
	t.Helper()
	checkFor(t, 20*time.Second, func() error {
		got := shadowVerdicts(t, p)
		for _, v := range shadow.Verdicts {
			if got[v] != fmt.Sprint(want[v]) {
				return fmt.Errorf("reactord_shadow_total %v, want %v", got, want)
			}
		}
		return nil
	})
}

// eventsHandled reads reactord_events_total: the events the daemon took
// up (each one's time is taken as it is).
func eventsHandled(t *testing.T, p *proc) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^reactord_events_total (\S+)$`).FindStringSubmatch(scrape(t, p))
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return int(n)
}

// waitAgreements waits until reactord_shadow_total{verdict="agree"} is n:
// a pair made at once, before the next step of a case.
func waitAgreements(t *testing.T, p *proc, n int) {
	t.Helper()
	checkFor(t, 10*time.Second, func() error {
		if got := shadowVerdicts(t, p)[shadow.Agree]; got != fmt.Sprint(n) {
			return fmt.Errorf("%s agreements, want %d", got, n)
		}
		return nil
	})
}

// TestShadowMode runs `reactord shadow` beside a stand-in for Salt's
// reactor: the test publishes, as the bridge does, the events and the job
// events Salt's reactor publishes for them, and reads each verdict on
// /metrics and in the audit store's ledger; nothing is dispatched.
func TestShadowMode(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, err := filepath.Abs("testdata/shadow/reactor.conf")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := startDaemon(t, "shadow", "-c", conf, "--nats", srv.ClientURL(), "--shadow-window", shadowWindow, "--data-dir", dataDir)
	checkFor(t, 10*time.Second, func() error {
		for _, want := range []string{`msg="reactord ready"`, "driver=shadow", `msg="shadow mode: dispatching nothing, comparing with Salt's reactor"`, "window=" + shadowWindow, "salt_user=root"} {
			if !strings.Contains(p.logs(), want) {
				return fmt.Errorf("no %q in the log", want)
			}
		}
		return nil
	})
	pub := shadowPublisher{t, c}

	// The cases that wait out the window (Window+Grace), first.
	// web3's start: Salt's reactor ran the highstate with other arguments.
	pub.start("web3", 10)
	pub.local(jidWeb3, "root", "web3", "state.apply", `["webserver"]`, 10.02)
	// lonely's start: Salt's reactor ran nothing.
	pub.start("lonely", 20)
	// A local job of the master's user no event accounts for: Salt's
	// reactor's, or someone's as root. It is handled (its time taken)
	// before the orchestration below starts: a local job that starts
	// while a runner of Salt's reactor runs is the runner's own.
	handled := eventsHandled(t, p)
	pub.local(jidUptime, "root", "db1", "cmd.run", `["uptime"]`, 40)
	checkFor(t, 10*time.Second, func() error {
		if n := eventsHandled(t, p); n <= handled {
			return fmt.Errorf("%d events handled", n)
		}
		return nil
	})
	// An orchestration of Salt's reactor (user Reactor) no event of
	// reactord's accounts for, and its return.
	pub.event("salt/run/"+jidOrch+"/new", fmt.Sprintf(`{"jid": %q, "fun": "runner.state.orchestrate", "fun_args": ["orch.cleanup"], "user": "Reactor", "_stamp": %q}`, jidOrch, shadowStamp(30)))
	pub.event("salt/run/"+jidOrch+"/ret", fmt.Sprintf(`{"jid": %q, "fun": "runner.state.orchestrate", "return": {}, "success": true, "user": "Reactor", "_stamp": %q}`, jidOrch, shadowStamp(31)))
	// A job of another user is never Salt's reactor's: no verdict.
	pub.local(jidAlice, "alice", "db1", "test.ping", `[]`, 40.5)

	// The pairs made at once, one after the other.
	pub.start("web1", 0)
	pub.local(jidWeb1, "root", "web1", "state.apply", `[]`, 0.02)
	pub.event("salt/auth", fmt.Sprintf(`{"result": true, "act": "pend", "id": "web9", "pub": "-----BEGIN PUBLIC KEY-----\n...", "_stamp": %q}`, shadowStamp(50)))
	pub.event("salt/wheel/"+jidAccept+"/new", fmt.Sprintf(`{"jid": %q, "fun": "wheel.key.accept", "fun_args": ["web9", false, false], "user": "Reactor", "_stamp": %q}`, jidAccept, shadowStamp(50.03)))
	waitAgreements(t, p, 2)
	// Two deploys of web5 within the throttle's minute: Salt's reactor
	// runs both, reactord the first.
	deploy := func(sec float64) string {
		return fmt.Sprintf(`{"id": "web5", "version": "1.2", "_stamp": %q}`, shadowStamp(sec))
	}
	pub.event("myco/deploy/web5", deploy(60))
	pub.local(jidDeploy1, "root", "web5", "state.sls", `[{"mods": "deploy", "__kwarg__": true}]`, 60.02)
	waitAgreements(t, p, 3)
	pub.event("myco/deploy/web5", deploy(61))
	pub.local(jidDeploy2, "root", "web5", "state.sls", `[{"mods": "deploy", "__kwarg__": true}]`, 61.02)
	// The loop guard follows a job of Salt's reactor paired with a
	// reaction of reactord's (adopted) as its own: loop1 starting again
	// while it has not returned is the job's doing (it restarted the
	// minion), and Salt's reactor runs the highstate again.
	pub.start("loop1", 70)
	pub.local(jidLoop1, "root", "loop1", "state.apply", `[]`, 70.02)
	waitAgreements(t, p, 4)
	pub.start("loop1", 72)
	pub.local(jidLoop2, "root", "loop1", "state.apply", `[]`, 72.02)

	want := map[string]int{shadow.Agree: 4, shadow.Differ: 1, shadow.ReactordOnly: 1, shadow.SaltOnly: 1, shadow.Ambiguous: 1,
		shadow.HeldThrottle: 1, shadow.HeldLoop: 1}
	waitVerdicts(t, p, want)

	// Nothing was dispatched: every reaction went to the shadow driver.
	metrics := scrape(t, p)
	actions := regexp.MustCompile(`(?m)^reactord_actions_total\{(.*)\} (\S+)$`).FindAllStringSubmatch(metrics, -1)
	if len(actions) == 0 {
		t.Error("no reactord_actions_total series")
	}
	for _, a := range actions {
		if a[1] != `driver="shadow",state="dispatched"` || a[2] != "6" {
			t.Errorf("reactord_actions_total{%s} %s, want only {driver=\"shadow\",state=\"dispatched\"} 6", a[1], a[2])
		}
	}
	for reason, n := range map[string]string{"throttle": "1", "loop_guard_minion_start": "1"} {
		if got := metricValue(t, metrics, `reactord_suppressed_total{reason="`+reason+`"}`); got != n {
			t.Errorf("reactord_suppressed_total{reason=%q} %s, want %s", reason, got, n)
		}
	}

	p.terminate()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("reactord shadow: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reactord shadow did not stop")
	}
	if strings.Contains(p.logs(), "still within their pairing window") {
		t.Errorf("decisions or jobs left unpaired at the stop:\n%s", p.logs())
	}

	rows, dispatched := shadowLedger(t, "sqlite://"+filepath.Join(dataDir, "reactord.db"),
		jidWeb1, jidAccept, jidWeb3, jidOrch, jidUptime, jidAlice, jidDeploy1, jidDeploy2, jidLoop1, jidLoop2)
	for _, d := range dispatched {
		if !strings.HasPrefix(d.Detail, "shadow ") {
			t.Errorf("a dispatched ledger entry not of the shadow driver: %+v", d)
		}
	}
	if len(dispatched) != 6 {
		t.Errorf("%d dispatched ledger entries, want 6", len(dispatched))
	}

	// Each verdict's row: the event (tag and its stamp's second) and
	// Salt's job it names, and what its record keeps: the verdict alone
	// for an agreement; else reactord's chunk when it rendered one, and
	// Salt's job when Salt ran one.
	type row struct {
		verdict, event, jid string
		chunk, salt         bool
	}
	wantRows := []row{
		{shadow.Agree, "myco/deploy/web5@60", jidDeploy1, false, false},
		{shadow.Agree, "salt/auth@50", jidAccept, false, false},
		{shadow.Agree, "salt/minion/loop1/start@70", jidLoop1, false, false},
		{shadow.Agree, "salt/minion/web1/start@00", jidWeb1, false, false},
		{shadow.Differ, "salt/minion/web3/start@10", jidWeb3, true, true},
		{shadow.ReactordOnly, "salt/minion/lonely/start@20", "", true, false},
		{shadow.SaltOnly, "", jidOrch, false, true},
		{shadow.Ambiguous, "", jidUptime, false, true},
		{shadow.HeldLoop, "salt/minion/loop1/start@72", jidLoop2, true, true},
		{shadow.HeldThrottle, "myco/deploy/web5@61", jidDeploy2, false, true},
	}
	var gotRows []row
	for _, r := range rows {
		gotRows = append(gotRows, row{r.rec.Verdict, r.event, r.JID, len(r.rec.Chunk) > 0, r.rec.Salt != nil})
		if r.rec.Salt != nil && r.rec.Salt.JID != r.JID {
			t.Errorf("%s row of jid %s: its record's Salt job is %s", r.rec.Verdict, r.JID, r.rec.Salt.JID)
		}
		if r.rec.Verdict != shadow.Agree && r.rec.Reason == "" {
			t.Errorf("%s row of %s %s: no reason", r.rec.Verdict, r.event, r.JID)
		}
	}
	if !slices.Equal(gotRows, wantRows) {
		t.Errorf("shadow ledger rows:\n got %v\nwant %v", gotRows, wantRows)
	}

	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.golden)
	}
	golden := filepath.Join("testdata", "shadow", "ledger.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(golden); err != nil {
		t.Fatal(err)
	} else if b.String() != string(want) {
		t.Errorf("the shadow ledger differs from %s (go test -run TestShadowMode -update writes it):\n%s", golden, b.String())
	}
}

// shadowRow is a ledger entry of stage shadow, with its record, the event
// it names (tag@second of its stamp) and its text in ledger.golden.
type shadowRow struct {
	store.LedgerEntry
	rec    shadow.Record
	event  string
	golden string
}

// shadowLedger reads the ledger entries of stage shadow, and those of
// stage dispatched, of every event the store at url archived and of jids,
// in the order of shadow.Verdicts, then by event and jid.
func shadowLedger(t *testing.T, url string, jids ...string) (rows []shadowRow, dispatched []store.LedgerEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.Events(ctx, time.Time{}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	// An event is named by its tag and its stamp's second (two deploys
	// of web5 share the tag).
	names := map[string]string{}
	ids := slices.Clone(jids)
	for _, e := range evs {
		if e.ID == "" {
			continue // an event the ledger has nothing about
		}
		var d struct {
			Stamp string `json:"_stamp"`
		}
		_ = json.Unmarshal(e.Data, &d)
		at, err := time.Parse(stampLayout, d.Stamp)
		if err != nil {
			t.Fatalf("archived event %s: _stamp: %v", e.Tag, err)
		}
		names[e.ID] = fmt.Sprintf("%s@%02d", e.Tag, int(at.Sub(shadowBase).Seconds()))
		ids = append(ids, e.ID)
	}
	seen := map[store.LedgerEntry]bool{}
	for _, id := range ids {
		entries, err := s.Trace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if seen[e] {
				continue
			}
			seen[e] = true
			switch e.Stage {
			case store.StageDispatched:
				dispatched = append(dispatched, e)
			case store.StageShadow:
				rows = append(rows, shadowRow{LedgerEntry: e})
			}
		}
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "shadow"))
	// The event ids in a reason, longest first (an id may begin another).
	byLength := slices.Collect(maps.Keys(names))
	slices.SortFunc(byLength, func(a, b string) int { return len(b) - len(a) })
	for i := range rows {
		r := &rows[i]
		if err := json.Unmarshal([]byte(r.Detail), &r.rec); err != nil {
			t.Fatalf("shadow ledger entry %+v: detail: %v", r.LedgerEntry, err)
		}
		if r.EventID != "" {
			r.event = names[r.EventID]
			if r.event == "" {
				t.Errorf("shadow ledger entry %+v: event %s not archived", r.LedgerEntry, r.EventID)
			}
		}
		detail := strings.ReplaceAll(r.Detail, dir, "testdata/shadow")
		for _, id := range byLength {
			detail = strings.ReplaceAll(detail, id, "<"+names[id]+">")
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, []byte(detail), "  ", "  "); err != nil {
			t.Fatalf("shadow ledger entry %+v: detail %s: %v", r.LedgerEntry, detail, err)
		}
		r.golden = fmt.Sprintf("%s event=%s tag=%s rule=%s file=%s reaction=%s jid=%s minion=%s\n  %s\n",
			r.rec.Verdict, orDash(r.event), r.Tag, orDash(r.Rule), orDash(strings.ReplaceAll(r.File, dir, "testdata/shadow")),
			orDash(r.ReactionID), orDash(r.JID), orDash(r.Minion), ind.String())
	}
	slices.SortFunc(rows, func(a, b shadowRow) int {
		if c := slices.Index(shadow.Verdicts, a.rec.Verdict) - slices.Index(shadow.Verdicts, b.rec.Verdict); c != 0 {
			return c
		}
		if c := strings.Compare(a.event, b.event); c != 0 {
			return c
		}
		return strings.Compare(a.JID, b.JID)
	})
	return rows, dispatched
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// TestShadowRefusals: reactord shadow refuses what makes no sense in
// shadow mode with one line saying why, before it starts anything.
func TestShadowRefusals(t *testing.T) {
	t.Parallel()
	conf, err := filepath.Abs("testdata/shadow/reactor.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"dry-run", []string{"shadow", "-c", conf, "--dry-run"},
			"reactord: reactord shadow dispatches nothing already: drop --dry-run (--driver serves the reaction files' read-only Salt calls)\n"},
		{"no window", []string{"shadow", "-c", conf, "--shadow-window", "0s"},
			"reactord: --shadow-window 0s: want a positive duration\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, "", append(tc.args, "--data-dir", t.TempDir())...)
			if code != exitUsage || out != "" || errOut != tc.want {
				t.Errorf("reactord %s: exit %d, stdout %q, stderr %q; want exit %d and stderr %q", strings.Join(tc.args[3:], " "), code, out, errOut, exitUsage, tc.want)
			}
		})
	}
}
