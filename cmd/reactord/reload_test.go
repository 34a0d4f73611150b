package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestReloadWaitsForSettledFile is issue 9 #7 with a real daemon: a
// configuration rewritten in place, slowly, is loaded once and whole; a
// truncated file is refused on file change (events keep reacting) and
// applied on SIGHUP.
func TestReloadWaitsForSettledFile(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	orig, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "-c", conf, "--dry-run", "--nats", srv.ClientURL())
	lines := make(chan string, 64)
	go func() {
		for {
			l, err := p.stdout.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	reacts := func(id string) {
		t.Helper()
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id)}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-lines:
			if !strings.Contains(l, `"salt/minion/`+id+`/start"`) {
				t.Fatalf("reaction to %s: %s", id, l)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no reaction to %s", id)
		}
	}
	count := func(s string) int { return strings.Count(p.logs(), s) }
	reloaded := `msg="configuration reloaded"`
	reacts("web1")

	// In place, slowly: truncate, then two halves 300 ms apart, all
	// within the 1 s settle time.
	if err := os.Truncate(conf, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	reacts("web2")
	f, err := os.OpenFile(conf, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(orig) / 2
	if _, err := f.Write(orig[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := f.Write(orig[half:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkFor(t, 5*time.Second, func() error {
		if count(reloaded) == 0 {
			return errors.New("not reloaded")
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // a second reload would show by now
	if n, all := count(reloaded), count(`msg="configuration reloaded" why="configuration file changed" rules=4`); n != 1 || all != 1 {
		t.Fatalf("%d reloads, %d of them with the 4 rules; want exactly one", n, all)
	}
	if strings.Contains(p.logs(), "reload failed") || strings.Contains(p.logs(), "reload refused") {
		t.Fatal("a half-written file was loaded")
	}
	reacts("web3")

	// `: > reactor.conf` and nothing more: refused, the rules stay.
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		if !strings.Contains(p.logs(), "reload refused: the changed configuration has no rules") {
			return errors.New("no refusal logged")
		}
		return nil
	})
	for _, l := range strings.Split(p.logs(), "\n") {
		if strings.Contains(l, "reload refused") && !strings.HasPrefix(l, "time=") || strings.Contains(l, "reload refused") && !strings.Contains(l, "level=ERROR") {
			t.Errorf("the refusal is not an error line: %s", l)
		}
	}
	if m := metric(t, p.http, "reactord_config_last_reload_successful"); m != "0" {
		t.Errorf("reactord_config_last_reload_successful %s after a refusal, want 0", m)
	}
	reacts("web4")
	if n := count(reloaded); n != 1 {
		t.Fatalf("%d reloads after the refusal, want still 1", n)
	}

	// SIGHUP applies it.
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	checkFor(t, 5*time.Second, func() error {
		if !strings.Contains(p.logs(), `msg="configuration reloaded" why=SIGHUP rules=0`) {
			return errors.New("SIGHUP did not apply the empty configuration")
		}
		return nil
	})
	if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web5/start", Body: startEvent("web5")}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		t.Fatalf("reaction with no rules: %s", l)
	case <-time.After(700 * time.Millisecond):
	}
}

// metric returns one metric's value from /metrics.
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	for _, l := range strings.Split(scrapeAddr(t, addr), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return ""
}
