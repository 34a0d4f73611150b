package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckEvents: check --events renders a recording's events and reports
// what only an event shows — an unknown reaction type, a template that
// breaks once filled in — once per problem, at its first line, with how
// many other events repeat it.
func TestCheckEvents(t *testing.T) {
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

// TestDaemonLogsFilesThatDoNotLoad: the daemon runs with what loads and
// logs, at start, every problem check would report.
func TestDaemonLogsFilesThatDoNotLoad(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*': missing.sls\n  - 'b/*': broken.sls\n  - 'c/*': ok.sls\n",
		"broken.sls":   "x:\n  local.test.ping:\n    - tgt: {{ .data.id \n",
		"ok.sls":       "z:\n  local.test.ping:\n    - tgt: web1\n",
	})
	srv, _ := natsServer(t)
	p := startDaemon(t, "-c", filepath.Join(dir, "reactor.conf"), "--nats", srv.ClientURL(), "--driver", "null", "--store", "none")
	logs := p.logs()
	for _, want := range []string{"SLS missing.sls matches no file", filepath.Join(dir, "broken.sls") + ":4:1: unclosed action"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start logs lack %q:\n%s", want, logs)
		}
	}
}
