package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCheckEvents: check --events renders a recording's events and reports
// what only an event shows — an unknown reaction type, a template that
// breaks once filled in — once per problem, at its first line, with how
// many other events repeat it.
func TestCheckEvents(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'salt/minion/*/start': start.sls\n  - 'deploy/*': deploy.sls\n",
		// The type is printed from the event: only an event shows it.
		"start.sls": "highstate:\n  {{ .data.kind }}.state.apply:\n    - tgt: {{ .data.id }}\n",
		// Indentation printed from the event cannot change the structure
		// (event data never does): the line becomes a key, which check
		// reports for each event.
		"deploy.sls": "deploy:\n  local.state.apply:\n{{ .data.indent }}- tgt: {{ .data.id }}\n",
		"events.jsonl": `{"tag": "salt/minion/web1/start", "data": {"id": "web1", "kind": "local"}}
{"tag": "salt/minion/web2/start", "data": {"id": "web2", "kind": "lcoal"}}
{"tag": "salt/minion/web3/start", "data": {"id": "web3", "kind": "lcoal"}}
{"tag": "deploy/web1", "data": {"id": "web1", "indent": "    "}}
{"tag": "deploy/web2", "data": {"id": "web2", "indent": "  x"}}
`,
	})
	conf := filepath.Join(dir, "reactor.conf")
	code, out, errOut := runCmd(t, "", "check", "-c", conf)
	if code != exitOK {
		t.Fatalf("without events: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "check", "-c", conf, "--events", filepath.Join(dir, "events.jsonl"))
	if code != exitFound {
		t.Fatalf("with events: exit %d, want %d\n%s%s", code, exitFound, out, errOut)
	}
	for _, want := range []string{
		"events line 2 (salt/minion/web2/start): " + filepath.Join(dir, "start.sls") + ":1:1: reaction highstate: \"lcoal\" is not a reaction type",
		"[and 1 more event(s)]",
		"events line 4 (deploy/web1): " + filepath.Join(dir, "deploy.sls") + ":3:",
		"events line 5 (deploy/web2): ",
		"5 event(s) rendered",
		"3 problem(s) found",
	} {
		if !strings.Contains(errOut+out, want) {
			t.Errorf("output lacks %q\nstdout:\n%s\nstderr:\n%s", want, out, errOut)
		}
	}
	if strings.Contains(errOut, "events line 3") {
		t.Errorf("a repeated problem was printed twice:\n%s", errOut)
	}
}

// TestCheckNoRules: `reactors:` (a typo) loads no rule: check says both.
func TestCheckNoRules(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"master": "reactors:\n  - 'x/*': x.sls\n", "x.sls": "x:\n  local.test.ping:\n    - tgt: a\n"})
	code, out, errOut := runCmd(t, "", "check", "-c", filepath.Join(dir, "master"))
	if code != exitFound {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{`top-level key "reactors" is not read; did you mean "reactor"?`, "no reactor rules: nothing will react"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestDaemonLogsFilesThatDoNotLoad: a reaction file that does not load
// stops the start, positioned, with exit code 2; with --start-broken the
// daemon runs with what loads and logs, at start, every problem check
// would report.
func TestDaemonLogsFilesThatDoNotLoad(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*': missing.sls\n  - 'b/*': broken.sls\n  - 'c/*': ok.sls\n",
		"broken.sls":   "x:\n  local.test.ping:\n    - tgt: {{ .data.id \n",
		"ok.sls":       "z:\n  local.test.ping:\n    - tgt: web1\n",
	})
	srv, _ := natsServer(t)
	code, _, errOut := runCmd(t, "", "-c", filepath.Join(dir, "reactor.conf"), "--nats", srv.ClientURL(), "--driver", "null", "--store", "none")
	if code != exitUsage || !strings.Contains(errOut, filepath.Join(dir, "broken.sls")+":4:1: unclosed action") || !strings.Contains(errOut, "--start-broken") {
		t.Errorf("start with a broken file: exit %d\n%s", code, errOut)
	}
	p := launchDaemon(t, "-c", filepath.Join(dir, "reactor.conf"), "--nats", srv.ClientURL(), "--driver", "null", "--store", "none", "--start-broken")
	// Started, and /healthz says what does not load.
	checkFor(t, 20*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(p.logs(), "reactord ready") {
			return fmt.Errorf("healthz %d", code)
		}
		return nil
	})
	logs := p.logs()
	for _, want := range []string{"SLS missing.sls matches no file", filepath.Join(dir, "broken.sls") + ":4:1: unclosed action"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start logs lack %q:\n%s", want, logs)
		}
	}
}

// TestCheckLogsInToSaltAPI: with driver: saltapi configured, check logs in
// to salt-api (a real HTTP server here) and reports a refused login as a
// problem; --offline does not contact it.
func TestCheckLogsInToSaltAPI(t *testing.T) {
	t.Parallel()
	var logins atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			// rest_cherrypy's index, which answers without a token.
			fmt.Fprint(w, `{"return": "Welcome", "clients": ["local", "runner", "wheel"]}`)
			return
		}
		var creds map[string]string
		if r.URL.Path != "/login" || json.NewDecoder(r.Body).Decode(&creds) != nil {
			http.NotFound(w, r)
			return
		}
		logins.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if creds["password"] != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"status": 401, "return": "Could not authenticate using provided credentials"}`)
			return
		}
		fmt.Fprint(w, `{"return": [{"token": "t0k", "start": 1, "expire": 43201, "user": "reactord", "eauth": "pam"}]}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		password, flag string
		code           int
		want           string
		logins         int64
	}{
		{"s3cret", "", exitOK, "driver saltapi: " + srv.URL + " answers and the credentials log in", 1},
		{"wrong", "", exitFound, `driver saltapi: salt-api ` + srv.URL + `: login as "reactord" with eauth "pam" refused`, 1},
		{"wrong", "--offline", exitOK, "ok: 1 rule(s)", 0},
	} {
		logins.Store(0)
		dir := writeFiles(t, map[string]string{
			"reactor.conf": "reactor:\n  - 'x/*': x.sls\nreactord:\n  driver: saltapi\n  saltapi_url: " + srv.URL + "\n  saltapi_user: reactord\n  saltapi_eauth: pam\n  saltapi_password_file: pw\n",
			"x.sls":        "#!yaml\nx:\n  local.test.ping:\n    - tgt: a\n",
			"pw":           tc.password + "\n",
		})
		args := []string{"check", "-c", filepath.Join(dir, "reactor.conf")}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		code, out, errOut := runCmd(t, "", args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) || logins.Load() != tc.logins {
			t.Errorf("check (password %s %s): exit %d, %d login(s), want %d and %q\n%s%s", tc.password, tc.flag, code, logins.Load(), tc.code, tc.want, out, errOut)
		}
	}
}

// TestCheckAsksTheMasterEngine: with driver: master configured, check
// connects to reactord's Salt engine's socket in the master's sock_dir:
// a note when it listens, a warning (not a failure: runners then go the
// master's way) when it does not; --offline does not ask.
func TestCheckAsksTheMasterEngine(t *testing.T) {
	t.Parallel()
	sock, err := os.MkdirTemp("", "rde") // a Unix socket's path is short
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sock)
	dir := writeFiles(t, map[string]string{
		"reactor.conf":        "reactor:\n  - 'x/*': x.sls\nreactord:\n  driver: master\n  salt_config_dir: salt\n",
		"x.sls":               "#!yaml\nx:\n  runner.test.arg:\n    - a: 1\n",
		"salt/master":         "sock_dir: " + sock + "\n",
		"salt/master.d/.keep": "",
	})
	conf := filepath.Join(dir, "reactor.conf")
	path := filepath.Join(sock, "reactord.ipc")
	code, out, errOut := runCmd(t, "", "check", "-c", conf)
	if code != exitOK || !strings.Contains(errOut, "warning: driver master: the reactord Salt engine does not answer at "+path) {
		t.Errorf("check without the engine: exit %d\n%s%s", code, out, errOut)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	code, out, errOut = runCmd(t, "", "check", "-c", conf)
	if code != exitOK || !strings.Contains(out+errOut, "driver master: the reactord Salt engine answers at "+path) || strings.Contains(errOut, "warning") {
		t.Errorf("check with the engine: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "check", "-c", conf, "--offline")
	if code != exitOK || strings.Contains(out+errOut, "reactord Salt engine") {
		t.Errorf("check --offline: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckOutJSON: check --out json prints one object with how each file
// is read and each problem split into file, line, col and message.
func TestCheckOutJSON(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*': a.sls\n  - 'b/*': b.sls\n",
		"a.sls":        "r:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n",
		"b.sls":        "{% if data.x %}\nr: 1\n",
	})
	code, out, errOut := runCmd(t, "", "check", "-c", filepath.Join(dir, "reactor.conf"), "--out", "json", "--renderer", "auto")
	var got struct {
		OK     bool `json:"ok"`
		Loaded []struct {
			Path, Renderer string
		} `json:"loaded"`
		Problems []struct {
			File      string
			Line, Col int
			Message   string
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if code != exitFound || errOut != "" || got.OK || len(got.Loaded) != 1 || got.Loaded[0].Renderer != "jinja (Salt's default)" ||
		len(got.Problems) != 1 || got.Problems[0].File != filepath.Join(dir, "b.sls") || got.Problems[0].Line == 0 || !strings.Contains(got.Problems[0].Message, "endif") {
		t.Errorf("exit %d, %+v\nstderr: %s", code, got, errOut)
	}
	if code, out, _ := runCmd(t, "", "version", "--out", "json"); code != exitOK || !strings.Contains(out, `"go_version":"go1.`) {
		t.Errorf("version --out json: %d %s", code, out)
	}
}

// TestExplainRunsSaltCalls: with --saltapi-url, explain runs a Jinja
// file's allowed Salt calls through salt-api (a real HTTP server here,
// answering as rest_cherrypy's runner client does) and lists each call
// and its answer; --salt-calls off calls nothing.
func TestExplainRunsSaltCalls(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var low []map[string]any
		if r.Method != http.MethodPost || r.Header.Get("X-Auth-Token") != "t0k" || json.NewDecoder(r.Body).Decode(&low) != nil || len(low) != 1 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		posts.Add(1)
		args, _ := low[0]["arg"].([]any)
		if low[0]["client"] != "runner" || low[0]["fun"] != "salt.cmd" || len(args) != 2 || args[0] != "config.get" {
			http.Error(w, "unexpected lowstate", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"return": ["127.0.0.1"]}`)
	}))
	defer srv.Close()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'x/*': x.sls\n",
		"x.sls":        "{% set iface = salt['config.get']('interface') %}\nx:\n  local.test.arg:\n    - tgt: {{ data['id'] }}\n    - arg:\n      - {{ iface }}\n",
	})
	args := []string{"explain", "-c", filepath.Join(dir, "reactor.conf"), "--tag", "x/1", "--data", `{"id": "web1"}`, "--saltapi-url", srv.URL, "--saltapi-token", "t0k"}
	code, out, errOut := runCmd(t, "", args...)
	if code != exitOK || !strings.Contains(out, "salt calls (run on the master while rendering)") ||
		!strings.Contains(out, `x.sls: salt['config.get']("interface") -> "127.0.0.1"`) || !strings.Contains(out, `"arg":["127.0.0.1"]`) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if posts.Load() != 1 {
		t.Errorf("%d calls to salt-api, want 1", posts.Load())
	}
	code, out, _ = runCmd(t, "", append(args, "--salt-calls", "off")...)
	if code != exitFound || !strings.Contains(out, "no driver that reaches the master") || posts.Load() != 1 {
		t.Errorf("--salt-calls off: exit %d, %d calls\n%s", code, posts.Load(), out)
	}
}

// TestCheckWarnsOncePerMaster: check warns, without failing, about a
// Salt cluster member whose events would react once per member, and stops
// warning once the reactord: section dedupes the masters' copies.
func TestCheckWarnsOncePerMaster(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"master":    "cluster_id: prod\nreactor:\n  - 'salt/minion/*/start': start.sls\n",
		"deduped":   "cluster_id: prod\nreactord:\n  dedupe_masters: 1ms\nreactor:\n  - 'salt/minion/*/start': start.sls\n",
		"start.sls": "highstate:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
	})
	code, out, errOut := runCmd(t, "", "check", "--offline", "-c", filepath.Join(dir, "master"))
	if code != exitOK {
		t.Fatalf("exit %d, want %d (a warning is not a problem)\n%s%s", code, exitOK, out, errOut)
	}
	want := "warning: " + filepath.Join(dir, "master") + `:1:13: cluster_id "prod": this master is a member of a Salt master cluster`
	if !strings.Contains(errOut, want) || strings.Count(errOut, "warning: ") != 1 {
		t.Errorf("stderr lacks one %q:\n%s", want, errOut)
	}
	code, out, errOut = runCmd(t, "", "check", "--offline", "--out", "json", "-c", filepath.Join(dir, "master"))
	var res struct {
		OK       bool     `json:"ok"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || !res.OK || len(res.Warnings) != 1 {
		t.Errorf("--out json: exit %d, %+v, %v\n%s%s", code, res, err, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "check", "--offline", "-c", filepath.Join(dir, "deduped"))
	if code != exitOK || strings.Contains(errOut, "warning:") {
		t.Errorf("with dedupe_masters: exit %d\n%s%s", code, out, errOut)
	}
}
