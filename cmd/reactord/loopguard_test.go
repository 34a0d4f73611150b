package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// The end-to-end loop guard tests run the revert-on-inotify recipe under
// the daemon with the exec driver and stand-in salt programs that behave
// like a real master: the state run rewrites the watched file (the beacon
// fires again, through `reactord fire`) and then the job returns.

// standIn writes an executable shell script.
func standIn(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// revertSetup writes the recipe and a stand-in `salt` whose state.apply
// rewrites the file and returns; it returns the config path, the salt
// program and its call log.
func revertSetup(t *testing.T, natsURL string) (conf, salt, calls string) {
	t.Helper()
	dir := t.TempDir()
	conf = filepath.Join(dir, "reactor.conf")
	abs, _ := filepath.Abs("../../examples/reactor/revert-on-inotify/revert.sls")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'salt/beacon/*/inotify//etc/important_file':\n    - "+abs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	salt = filepath.Join(dir, "salt")
	calls = filepath.Join(dir, "calls")
	standIn(t, salt, fmt.Sprintf(`# Stand-in for salt --async: argv is --async -- TGT FUN ARGS...
shift 2
tgt="$1"; fun="$2"
jid="$(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
echo "$fun $tgt $jid" >> %[1]q
# The state run rewrites /etc/important_file: the beacon fires, then the job returns.
( sleep 0.2
  %[2]q fire --nats %[3]q "salt/beacon/$tgt/inotify//etc/important_file" "{\"id\": \"$tgt\", \"change\": \"IN_MODIFY\", \"path\": \"/etc/important_file\"}"
  sleep 0.3
  %[2]q fire --nats %[3]q "salt/job/$jid/ret/$tgt" "{\"id\": \"$tgt\", \"jid\": \"$jid\", \"fun\": \"$fun\", \"success\": true, \"retcode\": 0}"
) >/dev/null 2>&1 &
echo "Executed command with job ID: $jid"
`, calls, binPath, natsURL))
	return conf, salt, calls
}

func metricValue(t *testing.T, metrics, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(metrics)
	if m == nil {
		return "0"
	}
	return m[1]
}

// scrape returns a daemon's /metrics.
func scrape(t *testing.T, p *proc) string {
	t.Helper()
	return scrapeAddr(t, p.http)
}

// scrapeAddr returns /metrics of the daemon serving HTTP on addr.
func scrapeAddr(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func genuineChange(t *testing.T, c *natsbus.Conn, id string) {
	t.Helper()
	tag := "salt/beacon/" + id + "/inotify//etc/important_file"
	if err := c.Publish(tag, []byte(`{"tag": "`+tag+`", "data": {"id": "`+id+`", "change": "IN_MODIFY", "path": "/etc/important_file"}}`), natsbus.Meta{}); err != nil {
		t.Fatal(err)
	}
}

// TestLoopWithoutGuard shows the classic Salt loop: each state.apply
// rewrites the file, the beacon fires, the reactor applies the state again.
func TestLoopWithoutGuard(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, salt, calls := revertSetup(t, srv.ClientURL())
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--no-loop-guard")
	genuineChange(t, c, "web1")
	checkFor(t, 20*time.Second, func() error {
		if n := countLines(t, calls); n < 4 {
			return fmt.Errorf("%d state.apply so far", n)
		}
		return nil
	})
	p.terminate()
	t.Logf("without the guard: %d state.apply calls for one genuine change (and counting)", countLines(t, calls))
}

// TestLoopGuardStopsTheLoop: one genuine change gives exactly one
// state.apply; a second genuine change after the settle window gives
// exactly one more.
func TestLoopGuardStopsTheLoop(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, salt, calls := revertSetup(t, srv.ClientURL())
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--settle", "1s")
	waitReturn := func(n int) {
		t.Helper()
		// The stand-in fires the beacon, then the job return; wait until
		// the daemon suppressed the first and saw the second, then past
		// the settle window.
		checkFor(t, 30*time.Second, func() error {
			if got := metricValue(t, scrape(t, p), `reactord_suppressed_total{reason="loop_guard_beacon"}`); got != fmt.Sprint(n) {
				return fmt.Errorf("loop_guard suppressions %s, want %d", got, n)
			}
			if got := strings.Count(p.logs(), "loop guard: job returned"); got != n {
				return fmt.Errorf("%d job returns seen, want %d", got, n)
			}
			return nil
		})
		time.Sleep(1500 * time.Millisecond) // settle is 1s
	}
	genuineChange(t, c, "web1")
	waitReturn(1)
	if n := countLines(t, calls); n != 1 {
		t.Fatalf("%d state.apply calls after one genuine change, want 1", n)
	}
	genuineChange(t, c, "web1")
	waitReturn(2)
	if n := countLines(t, calls); n != 2 {
		t.Fatalf("%d state.apply calls after a second genuine change, want 2", n)
	}
	metrics := scrape(t, p)
	t.Logf("with the guard: %d state.apply calls for 2 genuine changes; %s", countLines(t, calls), suppressionLines(metrics))
	if !strings.Contains(p.logs(), "reaction held back by the loop guard") || !strings.Contains(p.logs(), "evidence=beacon") || !strings.Contains(p.logs(), "jid=") {
		t.Fatalf("no suppression log line naming the evidence and the jid:\n%s", p.logs())
	}
}

func suppressionLines(metrics string) string {
	var out []string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "reactord_suppressed_total") || strings.HasPrefix(l, "reactord_actions_total") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// selfFiringLoop writes a configuration whose one reaction runs a runner
// (event.send) that fires the reaction's own trigger tag, through a
// stand-in salt-run that records its calls in the calls file and fires the
// event with reactord fire at natsURL 0.1 s later.
func selfFiringLoop(t *testing.T, natsURL string) (conf, saltRun, calls string) {
	t.Helper()
	dir := t.TempDir()
	conf = filepath.Join(dir, "reactor.conf")
	sls := filepath.Join(dir, "loop.sls")
	if err := os.WriteFile(sls, []byte("again:\n  runner.event.send:\n    - args:\n      - tag: myco/loop\n      - data:\n          from: {{ .tag }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/loop': "+sls+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saltRun = filepath.Join(dir, "salt-run")
	calls = filepath.Join(dir, "calls")
	standIn(t, saltRun, fmt.Sprintf(`# Stand-in for salt-run --async -- event.send tag=... data=...
jid="$(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
echo "$*" >> %[1]q
( sleep 0.1; %[2]q fire --nats %[3]q myco/loop '{"from": "runner"}' ) >/dev/null 2>&1 &
echo "[WARNING ] Running in asynchronous mode. This execution is running under tag salt/run/$jid" >&2
`, calls, binPath, natsURL))
	return conf, saltRun, calls
}

// TestHopLimitStopsSelfFiringReaction: a reaction whose runner fires its
// own trigger tag is stopped by the hop limit.
func TestHopLimitStopsSelfFiringReaction(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, saltRun, calls := selfFiringLoop(t, srv.ClientURL())
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-run-bin", saltRun, "--max-hops", "3")
	if err := c.Publish("myco/loop", []byte(`{"tag": "myco/loop", "data": {"from": "operator"}}`), natsbus.Meta{}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, func() error {
		if got := metricValue(t, scrape(t, p), `reactord_suppressed_total{reason="hop_limit"}`); got != "1" {
			return fmt.Errorf("hop_limit suppressions %s", got)
		}
		return nil
	})
	// The fourth run fired the event held at the limit: its line is
	// written, or being written.
	checkFor(t, 10*time.Second, func() error {
		if n := countLines(t, calls); n < 4 {
			return fmt.Errorf("%d event.send runs", n)
		}
		return nil
	})
	if n := countLines(t, calls); n != 4 {
		t.Fatalf("%d event.send runs, want 4 (the genuine event and 3 hops)", n)
	}
	t.Logf("hop limit: %d event.send runs; %s", countLines(t, calls), suppressionLines(scrape(t, p)))
}

// TestLoopGuardKeepsGenuineEvents: with the exec driver and stand-in
// salt and salt-run programs whose jobs never return, nothing genuine is
// held back: four failed jobs reactord did not start, three of them on
// one minion within a second, give four alerts, and fifteen custom events
// of three minions, each reaction targeting its own minion while its
// earlier jobs still run, give fifteen jobs (issue 21's alert and
// per-minion cases).
func TestLoopGuardKeepsGenuineEvents(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	alert, _ := filepath.Abs("../../examples/reactor/alert-on-failed-job/alert.sls")
	step := filepath.Join(dir, "step.sls")
	if err := os.WriteFile(step, []byte("step:\n  local.cmd.run:\n    - tgt: {{ .data.id }}\n    - args:\n      - cmd: 'true'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'salt/job/*/ret/*': "+alert+"\n  - 'myco/step': "+step+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	salt, saltRun := filepath.Join(dir, "salt"), filepath.Join(dir, "salt-run")
	calls := filepath.Join(dir, "calls")
	standIn(t, salt, fmt.Sprintf(`# Stand-in for salt --async: a job that never returns.
echo "salt $*" >> %[1]q
echo "Executed command with job ID: $(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
`, calls))
	standIn(t, saltRun, fmt.Sprintf(`# Stand-in for salt-run --async: a runner job that never returns.
echo "salt-run $*" >> %[1]q
echo "[WARNING ] Running in asynchronous mode. This execution is running under tag salt/run/$(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)" >&2
`, calls))
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--salt-run-bin", saltRun)
	publish := func(tag, data string) {
		t.Helper()
		if err := c.Publish(tag, []byte(`{"tag": "`+tag+`", "data": `+data+`}`), natsbus.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	pace := time.NewTicker(200 * time.Millisecond) // three on web1 within a second
	defer pace.Stop()
	for i, id := range []string{"web1", "web1", "web1", "web2"} {
		jid := fmt.Sprintf("2026112607000000000%d", i)
		publish("salt/job/"+jid+"/ret/"+id, fmt.Sprintf(`{"id": %q, "jid": %q, "fun": "state.apply", "success": false, "retcode": 2}`, id, jid))
		<-pace.C
	}
	for range 5 {
		for _, id := range []string{"web1", "web2", "web3"} {
			publish("myco/step", `{"id": "`+id+`"}`)
		}
	}
	checkFor(t, 30*time.Second, func() error {
		b, _ := os.ReadFile(calls)
		runs, jobs := 0, 0
		for _, l := range strings.Split(string(b), "\n") {
			// The exec driver merges reactions that differ only in their
			// minion into one list target: count the minions.
			if rest, ok := strings.CutPrefix(l, "salt --async "); ok {
				f := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(rest, "-L "), "-- "))
				jobs += strings.Count(f[0], ",") + 1
			} else if strings.HasPrefix(l, "salt-run ") {
				runs++
			}
		}
		if runs != 4 || jobs != 15 {
			return fmt.Errorf("%d alerts (salt-run), %d step reactions (salt); want 4 and 15:\n%s", runs, jobs, b)
		}
		return nil
	})
	metrics := scrape(t, p)
	for _, reason := range []string{"loop_guard_job", "loop_guard_beacon", "loop_guard_minion_start", "loop_guard_minion"} {
		if got := metricValue(t, metrics, `reactord_suppressed_total{reason="`+reason+`"}`); got != "0" {
			t.Errorf("%s suppressions %s, want 0: a genuine event was held back", reason, got)
		}
	}
	t.Logf("genuine events: %s", suppressionLines(metrics))
}
