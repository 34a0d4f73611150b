package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestConvertCLI checks reactord convert: stdout without -w; -w rewrites
// the file keeping FILE.orig; a refused file is not written and exits 1
// with its positioned problems; usage errors exit 2.
func TestConvertCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sls")
	bad := filepath.Join(dir, "bad.sls")
	goodSrc := "#!jinja|yaml\n{% if data['act'] == 'accept' %}\naccept:\n  wheel.key.accept:\n    - match: {{ data['id'] }}\n{% endif %}\n"
	badSrc := "{{ salt['pillar.get']('x') }}\n{{ grains.id }}\n"
	for p, s := range map[string]string{good: goodSrc, bad: badSrc} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := "#!gotmpl|yaml\n{{ if (pyEq .data.act \"accept\") }}\naccept:\n  wheel.key.accept:\n    - match: {{ .data.id | pyValue }}\n{{ end }}\n"

	code, out, errOut := runCmd(t, "", "convert", good)
	if code != 0 || out != want || !strings.Contains(errOut, "good.sls: converted") {
		t.Errorf("convert FILE: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, _, errOut = runCmd(t, "", "convert", "-w", dir)
	if code != 1 {
		t.Errorf("convert -w DIR: code %d, want 1 (one file refused); stderr %s", code, errOut)
	}
	for _, w := range []string{"bad.sls: refused: 2 problem(s)", "bad.sls:1:4: salt['pillar.get'](...)", "bad.sls:2:4: grains.id", "good.sls: converted"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if b, _ := os.ReadFile(good); string(b) != want {
		t.Errorf("good.sls after -w:\n%s", b)
	}
	if b, _ := os.ReadFile(good + ".orig"); string(b) != goodSrc {
		t.Errorf("good.sls.orig:\n%s", b)
	}
	if b, _ := os.ReadFile(bad); string(b) != badSrc {
		t.Errorf("refused bad.sls was rewritten:\n%s", b)
	}
	if _, err := os.Stat(bad + ".orig"); err == nil {
		t.Error("refused bad.sls got a .orig")
	}

	// A file that is not Jinja prints as it is: convert FILE > NEW never
	// leaves NEW empty.
	plain := filepath.Join(t.TempDir(), "plain.sls")
	plainSrc := "#!yaml\nr:\n  local.test.ping:\n    - tgt: '*'\n"
	if err := os.WriteFile(plain, []byte(plainSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCmd(t, "", "convert", plain); code != 0 || out != plainSrc || !strings.Contains(errOut, "not a Jinja file: printed as it is") {
		t.Errorf("convert of a #!yaml file: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	if code, _, _ := runCmd(t, "", "convert"); code != 2 {
		t.Errorf("convert without files: code %d, want 2", code)
	}
	if code, _, _ := runCmd(t, "", "convert", filepath.Join(dir, "missing.sls")); code != 2 {
		t.Errorf("convert of a missing file: code %d, want 2", code)
	}
}

// TestRendererFlag checks --renderer (and --jinja) on check, render,
// replay and explain: Salt's Jinja files load as they are by default and
// with --jinja, check says how it read each file, and with --renderer
// gotmpl the same configuration fails with one line per file naming the
// setting and convert.
func TestRendererFlag(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'salt/auth':\n    - accept.sls\n  - 'salt/minion/*/start':\n    - start.sls\n",
		"accept.sls":   "{% if data['act'] == 'pend' and data['id'].startswith('web') %}\naccept_{{ data['id'] }}:\n  wheel.key.accept:\n    - match: {{ data['id'] }}\n{% endif %}\n",
		"start.sls":    "#!gotmpl|yaml\nstart:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
		"ev.json":      `{"tag": "salt/auth", "data": {"act": "pend", "id": "web4"}}`,
		"evs.jsonl":    "{\"tag\": \"salt/auth\", \"data\": {\"act\": \"pend\", \"id\": \"web4\"}}\n{\"tag\": \"salt/auth\", \"data\": {\"act\": \"pend\", \"id\": \"db1\"}}\n{\"tag\": \"salt/minion/m1/start\", \"data\": {\"id\": \"m1\"}}\n",
	})
	conf := filepath.Join(dir, "reactor.conf")
	ev := filepath.Join(dir, "ev.json")
	accept := filepath.Join(dir, "accept.sls")

	code, out, errOut := runCmd(t, "", "check", "--jinja", "-c", conf)
	if code != exitOK || !strings.Contains(out, accept+": jinja (renderer: jinja)\n") || !strings.Contains(out, "start.sls: gotmpl (#!gotmpl|yaml)\n") {
		t.Errorf("check --jinja: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "check", "-c", conf)
	if code != exitOK || !strings.Contains(out, accept+": jinja (Salt's default)\n") {
		t.Errorf("check: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "render", "-c", conf, "--event", ev)
	if code != exitOK || !strings.Contains(out, `"match": "web4"`) {
		t.Errorf("render: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "render", "--jinja", "-c", conf, "--event", ev)
	if code != exitOK || !strings.Contains(out, `"__id__": "accept_web4"`) || !strings.Contains(out, `"match": "web4"`) {
		t.Errorf("render --jinja: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "replay", "--jinja", "-c", conf, "--events", filepath.Join(dir, "evs.jsonl"))
	if code != exitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, "accept_web4") || !strings.Contains(out, `"tgt":"m1"`) {
		t.Errorf("replay --jinja: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "", "explain", "--jinja", "-c", conf, "--event", ev)
	if code != exitOK || !strings.Contains(out, "1. wheel key.accept") {
		t.Errorf("explain --jinja: %d\n%s%s", code, out, errOut)
	}

	// With --renderer gotmpl: one line, positioned, naming the setting
	// and convert.
	for _, args := range [][]string{{"check", "--renderer", "gotmpl", "-c", conf}, {"render", "--renderer", "gotmpl", "-c", conf, "--event", ev}} {
		code, _, errOut = runCmd(t, "", args...)
		want := accept + ":1:1: this looks like a Salt Jinja reaction file (a {% if %} tag)"
		if code != exitFound || strings.Count(errOut, want) != 1 || !strings.Contains(errOut, "renderer: gotmpl") || !strings.Contains(errOut, "reactord convert -w "+accept) {
			t.Errorf("%s --renderer gotmpl: %d\n%s", args[0], code, errOut)
		}
	}
	if code, _, errOut = runCmd(t, "", "check", "--renderer", "mako", "-c", conf); code != exitUsage || !strings.Contains(errOut, "want one of auto, jinja, gotmpl") {
		t.Errorf("check --renderer mako: %d\n%s", code, errOut)
	}

	// renderer: gotmpl in the reactord: section does what the flag does,
	// and jinja: true what --jinja does.
	for section, want := range map[string]int{"renderer: gotmpl": exitFound, "jinja: true": exitOK} {
		if err := os.WriteFile(conf, []byte("reactor:\n  - 'salt/auth':\n    - accept.sls\nreactord:\n  "+section+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut = runCmd(t, "", "render", "-c", conf, "--event", ev); code != want {
			t.Errorf("render with %s: %d\n%s%s", section, code, out, errOut)
		}
	}
}

// TestDaemonJinja runs the daemon with --jinja on a Jinja reaction file: it
// reacts, and after a reload (SIGHUP) the file is still read as Jinja.
func TestDaemonJinja(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'salt/minion/*/start':\n    - start.sls\n",
		"start.sls":    "{% set id = data['id'] %}\nstart_{{ id }}:\n  local.state.apply:\n    - tgt: {{ id }}\n",
	})
	p := startProcess(t, "-c", filepath.Join(dir, "reactor.conf"), "--dry-run", "--jinja", "--nats", srv.ClientURL())
	read := func() string {
		t.Helper()
		ch := make(chan string, 1)
		go func() { l, _ := p.stdout.ReadString('\n'); ch <- l }()
		select {
		case l := <-ch:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no reaction line within 10s")
		}
		return ""
	}
	if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web1/start", Body: startEvent("web1")}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
	if l := read(); !strings.Contains(l, `"__id__":"start_web1"`) || !strings.Contains(l, `"tgt":"web1"`) {
		t.Fatalf("reaction line: %s", l)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logs(), "configuration reloaded") {
			return errors.New("no reload logged")
		}
		return nil
	})
	_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web2/start", Body: startEvent("web2")}, natsbus.Core)
	if l := read(); !strings.Contains(l, `"tgt":"web2"`) {
		t.Fatalf("after reload: %s", l)
	}
	if strings.Contains(p.logs(), "looks like a Salt Jinja") {
		t.Errorf("the daemon took the Jinja file for a mistake:\n%s", p.logs())
	}
}
