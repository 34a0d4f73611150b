package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// update rewrites the golden files of the package's tests
// (testdata/shadow-report, testdata/shadow/ledger.golden).
var update = flag.Bool("update", false, "rewrite the golden files (testdata/shadow-report, testdata/shadow/ledger.golden)")

// shadowAt is a time of the shadow report's fixture.
func shadowAt(sec, milli int) time.Time {
	return time.Date(2025, 3, 1, 10, 0, sec, milli*int(time.Millisecond), time.UTC)
}

// shadowDetail is r as the daemon writes it into a ledger entry's detail.
func shadowDetail(t *testing.T, r shadow.Record) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shadowStore writes entries into a new SQLite store and returns its URL.
func shadowStore(t *testing.T, entries []store.LedgerEntry) string {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "audit.db")
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Write(ctx, store.Batch{Ledger: entries}); err != nil {
		t.Fatal(err)
	}
	return url
}

// shadowFixture is a shadow mode's ledger: each verdict the daemon
// writes, an entry whose detail is not a record, and an entry of another
// stage.
func shadowFixture(t *testing.T) []store.LedgerEntry {
	const (
		start  = "salt/minion/*/start"
		auth   = "salt/auth"
		deploy = "custom/deploy/*"
		loop   = "salt/beacon/*/inotify/*"
	)
	stamp := func(sec int) string { return shadowAt(sec, 0).Add(-50 * time.Millisecond).Format(time.RFC3339Nano) }
	job := func(jid, kind, fun, user string, tgt any, arg ...any) *shadow.Job {
		j := &shadow.Job{JID: jid, Kind: kind, Fun: fun, Arg: arg, User: user, Stamp: shadowAt(0, 0)}
		if kind == "local" {
			j.Tgt, j.TgtType = tgt, "glob"
			if s, ok := tgt.(string); ok && s != "*" {
				j.Minions = []string{s}
			}
		}
		return j
	}
	agree := shadowDetail(t, shadow.Record{Verdict: shadow.Agree})
	return []store.LedgerEntry{
		{EventID: "ev-0", Tag: "salt/minion/web1/start", Stage: store.StageShadow, Rule: start, File: "/srv/reactor/start.sls",
			ReactionID: "highstate", JID: "20250301100000100000", Minion: "web1", Detail: agree, Time: shadowAt(0, 0)},
		{EventID: "ev-1", Tag: "salt/minion/web2/start", Stage: store.StageShadow, Rule: start, File: "/srv/reactor/start.sls",
			ReactionID: "highstate", JID: "20250301100005100000", Minion: "web2", Detail: agree, Time: shadowAt(5, 0)},
		{EventID: "ev-2", Tag: "salt/auth", Stage: store.StageShadow, Rule: auth, File: "/srv/reactor/auth.sls",
			ReactionID: "accept", JID: "20250301100010100000", Minion: "web3", Detail: agree, Time: shadowAt(10, 0)},
		{EventID: "ev-3", Tag: "salt/minion/web3/start", Stage: store.StageShadow, Rule: start, File: "/srv/reactor/start.sls",
			ReactionID: "highstate", JID: "20250301100020100000", Minion: "web3", Time: shadowAt(20, 250),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.Differ, EventStamp: stamp(20),
				Reason: `Salt's reactor ran local state.apply on glob "web3" with ["base"] (job 20250301100020100000); reactord would run local state.apply on glob "web3" with ["web"]`,
				Chunk:  json.RawMessage(`{"__id__":"highstate","state":"local","fun":"state.apply","tgt":"web3","arg":["web"]}`),
				Salt:   job("20250301100020100000", "local", "state.apply", "root", "web3", "base")})},
		{EventID: "ev-4", Tag: "custom/deploy/app1", Stage: store.StageShadow, Rule: deploy, File: "/srv/reactor/deploy.sls",
			ReactionID: "orchestrate", Minion: "web4", Time: shadowAt(30, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.ReactordOnly, EventStamp: stamp(30),
				Reason: `reactord would run runner state.orchestrate with ["orch.deploy"] (rule "custom/deploy/*", file /srv/reactor/deploy.sls): Salt's reactor started no such job within 10s of the event`,
				Chunk:  json.RawMessage(`{"__id__":"orchestrate","state":"runner","fun":"state.orchestrate","arg":["orch.deploy"]}`)})},
		{Tag: "salt/run/20250301100040100000/new", Stage: store.StageShadow, JID: "20250301100040100000", Time: shadowAt(40, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.SaltOnly,
				Reason: `Salt's reactor ran runner state.orchestrate with ["orch.cleanup",12345678901234567890] (job 20250301100040100000); reactord would not: no reaction of reactord's accounts for it: no rule reacted to an event in the 10s before it`,
				// A number no float64 holds: the JSON output keeps it.
				Salt: job("20250301100040100000", "runner", "state.orchestrate", "Reactor", nil, "orch.cleanup", json.Number("12345678901234567890"))})},
		{Tag: "salt/job/20250301100050100000/new", Stage: store.StageShadow, JID: "20250301100050100000", Time: shadowAt(50, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.Ambiguous,
				Reason: `local job 20250301100050100000 (local cmd.run on glob "*" with ["uptime"]) of the master's user "root": Salt's reactor, or someone as "root", started it; no reaction of reactord's accounts for it: no rule reacted to an event in the 10s before it`,
				Salt:   job("20250301100050100000", "local", "cmd.run", "root", "*", "uptime")})},
		{EventID: "ev-7", Tag: "salt/beacon/web1/inotify//etc/motd", Stage: store.StageShadow, Rule: loop, File: "/srv/reactor/revert.sls",
			ReactionID: "revert", JID: "20250301100100100000", Minion: "web1", Time: shadowAt(60, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.HeldLoop, EventStamp: stamp(60),
				Reason: "loop guard: the event is the consequence of job 20250301100000100000 (state.apply by this rule); Salt's reactor ran it (job 20250301100100100000)",
				Chunk:  json.RawMessage(`{"__id__":"revert","state":"local","fun":"state.apply","tgt":"web1","arg":["motd"]}`),
				Salt:   job("20250301100100100000", "local", "state.apply", "root", "web1", "motd")})},
		{EventID: "ev-8", Tag: "custom/deploy/app1", Stage: store.StageShadow, Rule: deploy, JID: "20250301100110100000", Minion: "web5", Time: shadowAt(70, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.HeldForged, EventStamp: stamp(70),
				Reason: `Salt's reactor ran runner state.orchestrate with ["orch.deploy"] (job 20250301100110100000); reactord would not: rule "custom/deploy/*" did not react to custom/deploy/app1 (event ev-8): forged event: minion web5 may not send custom/deploy/app1`,
				Salt:   job("20250301100110100000", "runner", "state.orchestrate", "Reactor", nil, "orch.deploy")})},
		{EventID: "ev-9", Tag: "salt/auth", Stage: store.StageShadow, Rule: auth, File: "/srv/reactor/auth.sls", Minion: "web6",
			Detail: "verdict=agree", Time: shadowAt(80, 0)},
		{EventID: "ev-10", Tag: "salt/auth", Stage: store.StageShadow, Rule: auth, File: "/srv/reactor/auth.sls",
			ReactionID: "accept", JID: "20250301100130100000", Minion: "web7", Detail: agree, Time: shadowAt(90, 0)},
		{EventID: "ev-11", Tag: "salt/minion/web8/start", Stage: store.StageDispatched, Rule: start, File: "/srv/reactor/start.sls",
			ReactionID: "highstate", JID: "20250301100135100000", Minion: "web8", Time: shadowAt(95, 0)},
		{EventID: "ev-12", Tag: "salt/minion/web9/start", Stage: store.StageShadow, Rule: start, File: "/srv/reactor/start.sls",
			ReactionID: "highstate", JID: "20250301100140100000", Minion: "web9", Time: shadowAt(100, 0),
			Detail: shadowDetail(t, shadow.Record{Verdict: shadow.Differ, EventStamp: stamp(100),
				Reason: "Salt's reactor ran local state.apply on glob \"web9\" with [\"line one\\nline two\"] (job 20250301100140100000);\n\treactord would run local state.apply on glob \"web9\" with []",
				Salt:   job("20250301100140100000", "local", "state.apply", "root", "web9", "line one\nline two")})},
	}
}

// TestShadowReportGolden reads the fixture back through
// reactord shadow report, as tables and as JSON, against
// testdata/shadow-report/*.golden (go test -run ShadowReport -update
// rewrites them).
func TestShadowReportGolden(t *testing.T) {
	t.Parallel()
	url := shadowStore(t, shadowFixture(t))
	const unreadableLine = "shadow report: 1 ledger entry whose detail is not a shadow record, counted as \"unreadable\" (the first: at 2025-03-01T10:01:20Z, event ev-9: invalid character 'v' looking for beginning of value)\n"
	window := []string{"--since", "2025-03-01T10:00:20Z", "--until", "2025-03-01T10:01:40Z", "--rule", "salt/minion/*/start"}
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"table", nil, unreadableLine},
		{"json", []string{"--out", "json"}, unreadableLine},
		// --until leaves out the entry at 10:01:40; the newest listed
		// is the differ at 10:00:20.25, the only one of its rule there.
		{"window", window, ""},
		{"window-json", append([]string{"--out", "json"}, window...), ""},
		{"limit", []string{"--limit", "2", "--since", "2025-03-01T10:00:30Z"}, unreadableLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"--store", url}, tc.args...)
			if code := shadowReport(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			if stderr.String() != tc.stderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tc.stderr)
			}
			golden := filepath.Join("testdata", "shadow-report", tc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run ShadowReport -update writes it)", err)
			}
			if stdout.String() != string(want) {
				t.Errorf("stdout differs from %s:\n%s", golden, stdout.String())
			}
			if strings.HasSuffix(tc.name, "json") && !json.Valid(stdout.Bytes()) {
				t.Errorf("--out json wrote no valid JSON:\n%s", stdout.String())
			}
		})
	}
}

// TestShadowReportEmpty: a store with no shadow entries reads as nothing
// recorded, exit 0, in both outputs.
func TestShadowReportEmpty(t *testing.T) {
	t.Parallel()
	url := shadowStore(t, []store.LedgerEntry{{EventID: "ev-1", Stage: store.StageDispatched, Rule: "salt/auth", Time: shadowAt(0, 0)}})
	var stdout, stderr bytes.Buffer
	if code := shadowReport([]string{"--store", url}, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	want := "shadow verdicts from the oldest entry kept until now: 0 entries read\nnothing recorded: shadow mode (reactord shadow) writes one entry per verdict\n"
	if stdout.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := shadowReport([]string{"--store", url, "--out", "json"}, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{"since": nil, "until": nil, "total": 0.0, "verdicts": map[string]any{}, "rules": []any{}, "disagreements": []any{}}
	if b, _ := json.Marshal(got); string(b) != mustJSON(t, wantJSON) {
		t.Errorf("json: %s, want %s", stdout.String(), mustJSON(t, wantJSON))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShadowReportUsage: bad flags and a missing store exit 2 with a
// message; --help exits 0.
func TestShadowReportUsage(t *testing.T) {
	t.Parallel()
	url := shadowStore(t, nil)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--store", url, "--out", "yaml"}, exitUsage, `--out "yaml": want table or json`},
		{[]string{"--store", url, "--since", "yesterday"}, exitUsage, `--since "yesterday": want a duration`},
		{[]string{"--store", url, "--until", "soon"}, exitUsage, `--until "soon": want a duration`},
		{[]string{"--store", url, "--since", "2025-03-01T10:00:00Z", "--until", "2025-03-01T09:00:00Z"}, exitUsage, "--until (2025-03-01T09:00:00Z) is not after --since (2025-03-01T10:00:00Z)"},
		{[]string{"--store", url, "--limit", "-1"}, exitUsage, "limit"},
		{[]string{"--store", url, "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"--data-dir", t.TempDir()}, exitUsage, "no audit store at"},
		{[]string{"--store", "nosuch://x"}, exitUsage, "shadow report:"},
		{[]string{"--help"}, exitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := shadowReport(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
		if tc.code == exitOK && !strings.Contains(stdout.String(), "--limit") {
			t.Errorf("%q: no flags in the help:\n%s", tc.args, stdout.String())
		}
	}
}

// shadowReport runs reactord shadow report with args.
func shadowReport(args []string, stdout, stderr *bytes.Buffer) int {
	return run(context.Background(), append([]string{"shadow", "report"}, args...), strings.NewReader(""), stdout, stderr)
}
