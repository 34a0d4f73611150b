package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// These tests run three replicas of the daemon on one NATS server: the
// loop guard, the throttle and the debounce give one reactor's results
// because the replicas share their state (--shared-state, a JetStream
// key-value bucket), and a replica started later continues with it.

var replicaModes = []struct {
	name string
	args []string
}{{"core", []string{"--jetstream=false"}}, {"jetstream", []string{"--jetstream"}}, {"partitions", []string{"--jetstream", "--partitions", "3"}}}

// startReplicas starts n daemons with args.
func startReplicas(t *testing.T, n int, args ...string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startDaemon(t, args...)
	}
	return ps
}

// waitBalanced waits until each replica holds `each` partitions of the
// event stream (--partitions, the plain lane aside): replicas that start
// one after another balance after the first took them all, and events
// published before that may be handed over half-way.
func waitBalanced(t *testing.T, ps []*proc, each string) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		var owned []string
		for _, p := range ps {
			owned = append(owned, metricValue(t, scrape(t, p), "reactord_partitions_owned"))
		}
		for _, n := range owned {
			if n != each {
				return fmt.Errorf("partitions held %v, want %s each", owned, each)
			}
		}
		return nil
	})
}

// sumMetric adds a metric over the replicas.
func sumMetric(t *testing.T, ps []*proc, name string) int {
	t.Helper()
	total := 0
	for _, p := range ps {
		v, _ := strconv.ParseFloat(metricValue(t, scrape(t, p), name), 64)
		total += int(v)
	}
	return total
}

// sumLogs counts a log line over the replicas.
func sumLogs(ps []*proc, line string) int {
	total := 0
	for _, p := range ps {
		total += strings.Count(p.logs(), line)
	}
	return total
}

// stopAll ends the replicas with SIGTERM and waits for them.
func stopAll(t *testing.T, ps []*proc) {
	t.Helper()
	for _, p := range ps {
		p.terminate()
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Fatal("no exit after SIGTERM")
		}
	}
}

// TestReplicasRevertOnInotify: the revert-on-inotify loop with three
// replicas: the beacon event the state run causes, and the job's return,
// land on any replica; 3 genuine changes give 3 state.apply, as with one.
func TestReplicasRevertOnInotify(t *testing.T) {
	t.Parallel()
	for _, mode := range replicaModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			srv, c := natsServer(t)
			conf, salt, calls := revertSetup(t, srv.ClientURL())
			ps := startReplicas(t, 3, append([]string{"-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--settle", "1s"}, mode.args...)...)
			var counts []int
			for n := 1; n <= 3; n++ {
				genuineChange(t, c, "web1")
				checkFor(t, 20*time.Second, func() error {
					if got := sumMetric(t, ps, `reactord_suppressed_total{reason="loop_guard_beacon"}`); got != n {
						return fmt.Errorf("loop_guard suppressions %d, want %d", got, n)
					}
					if got := sumLogs(ps, "loop guard: job returned"); got != n {
						return fmt.Errorf("%d job returns seen, want %d", got, n)
					}
					return nil
				})
				time.Sleep(1500 * time.Millisecond) // settle is 1s
				counts = append(counts, countLines(t, calls))
			}
			t.Logf("%s, 3 replicas: state.apply after 1, 2, 3 genuine changes: %v", mode.name, counts)
			if fmt.Sprint(counts) != "[1 2 3]" {
				t.Fatalf("state.apply after 1, 2, 3 genuine changes: %v, want [1 2 3]", counts)
			}
		})
	}
}

// throttleConf writes a rule reacting to myco/ping with a throttle of 3
// per hour per minion.
func throttleConf(t *testing.T, option string) string {
	t.Helper()
	dir := t.TempDir()
	sls := filepath.Join(dir, "ping.sls")
	if err := os.WriteFile(sls, []byte("ping:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/ping':\n      sls: "+sls+"\n      "+option+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

func ping(t *testing.T, c *natsbus.Conn, id string) {
	t.Helper()
	if err := c.Publish("myco/ping", []byte(`{"tag": "myco/ping", "data": {"id": "`+id+`"}}`), natsbus.Meta{}); err != nil {
		t.Fatal(err)
	}
}

// pingStream publishes a myco/ping event of minion id to JetStream on its
// keyed subject, as the bridge and fire do: with --partitions it goes to
// the minion's partition (a core publish goes to the plain lane).
func pingStream(t *testing.T, c *natsbus.Conn, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.PublishStream(ctx, "myco/ping", []byte(`{"tag": "myco/ping", "data": {"id": "`+id+`"}}`), natsbus.Meta{}); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasThrottle: throttle 3 per hour keyed by the minion, three
// replicas: 3 reactions in all for a minion; after every replica was
// stopped, a new one goes on counting (none more for that minion).
func TestReplicasThrottle(t *testing.T) {
	t.Parallel()
	for _, mode := range replicaModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			srv, c := natsServer(t)
			conf := throttleConf(t, "throttle: {count: 3, per: 1h, key: data.id}")
			ce := collect(t, c, "test.exec.")
			args := append([]string{"-c", conf, "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--no-loop-guard"}, mode.args...)
			ps := startReplicas(t, 3, args...)
			const events = 30
			for range events {
				ping(t, c, "web1")
			}
			checkFor(t, 20*time.Second, func() error {
				if got := sumMetric(t, ps, `reactord_suppressed_total{reason="throttle"}`); got != events-3 {
					return fmt.Errorf("%d throttled, want %d", got, events-3)
				}
				return nil
			})
			total, _, origins, _ := ce.snapshot()
			if total != 3 {
				t.Fatalf("%d reactions for %d events, want 3 (origins %v)", total, events, origins)
			}
			stopAll(t, ps)
			p := startDaemon(t, args...)
			for range 10 {
				ping(t, c, "web1")
			}
			ping(t, c, "web2")
			checkFor(t, 20*time.Second, func() error {
				if got := sumMetric(t, []*proc{p}, `reactord_suppressed_total{reason="throttle"}`); got != 10 {
					return fmt.Errorf("%d throttled after the restart, want 10", got)
				}
				if total, _, _, _ := ce.snapshot(); total != 4 {
					return fmt.Errorf("%d reactions, want 4 (web2's first)", total)
				}
				return nil
			})
			t.Logf("%s, 3 replicas, throttle 3 per 1h: %d events for web1, 3 reactions (by replica %v); after a restart of all, 10 more: 0 more reactions", mode.name, events, origins)
		})
	}
}

// TestReplicasDebounce: the events of one key, spread over three core
// replicas within the quiet period, fire once.
//
// Not in parallel with other tests: the replicas must see each other's
// records within the 30 ms between events, which a busy machine delays.
func TestReplicasDebounce(t *testing.T) {
	srv, c := natsServer(t)
	conf := throttleConf(t, "debounce: 1s")
	ce := collect(t, c, "test.exec.")
	ps := startReplicas(t, 3, "-c", conf, "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--no-loop-guard")
	const events = 12
	pace := time.NewTicker(30 * time.Millisecond) // spread over the replicas, within the quiet period
	defer pace.Stop()
	for range events {
		ping(t, c, "web1")
		<-pace.C
	}
	checkFor(t, 20*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total != 1 {
			return fmt.Errorf("%d reactions, want 1", total)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // nothing fires late
	held := 0
	for _, p := range ps {
		if metricValue(t, scrape(t, p), `reactord_suppressed_total{reason="debounce"}`) != "0" {
			held++
		}
	}
	if total, _, _, _ := ce.snapshot(); total != 1 || held < 2 {
		t.Fatalf("%d reactions (want 1); %d replicas held events (want 2 or more)", total, held)
	}
	t.Logf("debounce 1s, 3 replicas: %d events over %d replicas, 1 reaction", events, held)
}

// TestReplicasLoopGuardRestart: the loop guard's state outlives the
// daemon: a job returned just before a stop still holds its reaction, in
// its settle window, for the replica started next.
func TestReplicasLoopGuardRestart(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, salt, calls := revertSetup(t, srv.ClientURL())
	args := []string{"-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--settle", "1h"}
	p := startDaemon(t, args...)
	genuineChange(t, c, "web1")
	checkFor(t, 20*time.Second, func() error {
		if !strings.Contains(p.logs(), "loop guard: job returned") {
			return fmt.Errorf("no job return seen")
		}
		return nil
	})
	stopAll(t, []*proc{p})
	p = startDaemon(t, args...)
	genuineChange(t, c, "web1")
	checkFor(t, 20*time.Second, func() error {
		if got := metricValue(t, scrape(t, p), `reactord_suppressed_total{reason="loop_guard_beacon"}`); got != "1" {
			return fmt.Errorf("loop_guard suppressions %s after the restart, want 1", got)
		}
		return nil
	})
	if n := countLines(t, calls); n != 1 {
		t.Fatalf("%d state.apply, want 1: the restarted daemon forgot the job's settle window", n)
	}
	// The line follows the metric: wait for it.
	checkFor(t, 5*time.Second, func() error {
		if !strings.Contains(p.logs(), "phase=settling") {
			return fmt.Errorf("the suppression is not in the settle window")
		}
		return nil
	})
}

// TestReplicasHopLimit: a reaction whose runner fires its own trigger
// tag, with three replicas: the event lands on any replica and still
// carries its hop count; the hop limit stops the chain after 3 hops.
func TestReplicasHopLimit(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf, saltRun, calls := selfFiringLoop(t, srv.ClientURL())
	ps := startReplicas(t, 3, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-run-bin", saltRun, "--max-hops", "3")
	if err := c.Publish("myco/loop", []byte(`{"tag": "myco/loop", "data": {"from": "operator"}}`), natsbus.Meta{}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, func() error {
		if got := sumMetric(t, ps, `reactord_suppressed_total{reason="hop_limit"}`); got != 1 {
			return fmt.Errorf("hop_limit suppressions %d", got)
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
}

// TestReplicasCollectByPartition: with --partitions a minion's events go
// to one replica, so a collect keyed by the minion gathers all of them
// there: three replicas, three minions, three events each, three
// reactions, each with its minion's three events.
func TestReplicasCollectByPartition(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := t.TempDir()
	sls := filepath.Join(dir, "batch.sls")
	if err := os.WriteFile(sls, []byte("#!gotmpl|yaml\nbatch:\n  local.test.ping:\n    - tgt: {{ .data.id }}-{{ len .events }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/ping':\n      sls: "+sls+"\n      collect: {within: 3s, key: data.id}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ce := collect(t, c, "test.exec.")
	ps := startReplicas(t, 3, "-c", conf, "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec.", "--no-loop-guard",
		"--jetstream", "--partitions", "3")
	// A partition handed over while its minion's collection is open splits
	// the collection (docs/loop-guard.md): publish once they settled.
	waitBalanced(t, ps, "1")
	for range 3 {
		for _, id := range []string{"web1", "web2", "web3"} {
			pingStream(t, c, id)
		}
	}
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total != 3 {
			return fmt.Errorf("%d reactions, want 3", total)
		}
		return nil
	})
	waitSettled(t, srv.ClientURL(), 30*time.Second) // nothing more comes
	ce.mu.Lock()
	got := fmt.Sprint(ce.byMinion)
	ce.mu.Unlock()
	if got != "map[web1-3:1 web2-3:1 web3-3:1]" {
		t.Fatalf("reactions by target: %s, want one per minion with its 3 events", got)
	}
	t.Logf("collect keyed by minion, 3 replicas, --partitions 3: 9 events, reactions %s, by replica %v", got, func() map[string]int { _, _, o, _ := ce.snapshot(); return o }())
	stopAll(t, ps)
}

// TestReplicasResumeRetries: a reaction whose job failed on one of its
// minions waits for its retry; the replica holding it stops; the event
// comes back to the other replica, which runs the pending retry on the
// failed minion alone, at its time, and the next one, not the whole
// reaction again. Shared consumer and partitions; and one daemon
// restarted.
func TestReplicasResumeRetries(t *testing.T) {
	t.Parallel()
	modes := append(slices.Clone(replicaModes[1:]), struct {
		name string
		args []string
	}{"restart", []string{"--jetstream"}})
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			srv, c := natsServer(t)
			dir := t.TempDir()
			conf := ruleFiles(t, dir, "#!yaml\ndeploy:\n  local.state.apply:\n    - tgt: web1,web2\n    - tgt_type: list\n",
				"  - 'myco/deploy':\n      sls: %s\n      retry: {attempts: 2, backoff: 3s, on: [failed]}\n")
			salt, calls := jobsStandIn(t, dir, srv.ClientURL(), "0.2", "web2")
			args := append([]string{"-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt}, mode.args...)
			n := 2
			if mode.name == "restart" {
				n = 1
			}
			ps := startReplicas(t, n, args...)
			if err := c.Publish("myco/deploy", []byte(`{"tag": "myco/deploy", "data": {}}`), natsbus.Meta{}); err != nil {
				t.Fatal(err)
			}
			holder := -1
			checkFor(t, 20*time.Second, func() error {
				for i, p := range ps {
					if strings.Contains(p.logs(), "retrying them") {
						holder = i
						return nil
					}
				}
				return fmt.Errorf("no retry scheduled yet; calls %q", readFile(t, calls))
			})
			stopAll(t, ps[holder:holder+1])
			var other *proc
			if n == 1 {
				other = startDaemon(t, args...)
			} else {
				other = ps[1-holder]
			}
			checkFor(t, 30*time.Second, func() error {
				if !strings.Contains(other.logs(), "giving up") {
					return fmt.Errorf("the other replica did not give up yet; calls %q", readFile(t, calls))
				}
				return nil
			})
			if got, want := startLines(readFile(t, calls)), "web1,web2 web2 web2"; got != want {
				t.Fatalf("calls:\n%s\nwant the reaction once, then its two retries on web2 alone:\n%s", got, want)
			}
			m := scrape(t, other)
			if got := metricValue(t, m, `reactord_retries_total{outcome="resumed"}`); got != "1" {
				t.Errorf("resumed %s, want 1", got)
			}
			if !strings.Contains(other.logs(), "resuming a reaction's retries") {
				t.Errorf("the other replica did not say it resumed the retries:\n%s", other.logs())
			}
			stopAll(t, []*proc{other})
		})
	}
}

// ruleFiles writes a reaction file holding src and a reactor.conf whose
// rule (with %s for the file's path) uses it, and returns the conf's path.
func ruleFiles(t *testing.T, dir, src, rule string) string {
	t.Helper()
	sls, conf := filepath.Join(dir, "r.sls"), filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(sls, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("reactor:\n"+fmt.Sprintf(rule, sls)), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// jobsStandIn writes a stand-in for `salt --async [-L] -- TGT FUN`: it
// logs "start TGT" to calls, and after delay seconds "end TGT" and fires
// the job's return of each minion of TGT, failed on minion fail.
func jobsStandIn(t *testing.T, dir, natsURL, delay, fail string) (salt, calls string) {
	t.Helper()
	salt, calls = filepath.Join(dir, "salt"), filepath.Join(dir, "calls")
	standIn(t, salt, fmt.Sprintf(`while [ "$1" != "--" ]; do shift; done; shift
tgt="$1"; fun="$2"
jid="$(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
echo "start $tgt" >> %[1]q
( sleep %[4]s
  echo "end $tgt" >> %[1]q
  for m in $(echo "$tgt" | tr ',' ' '); do
    ok=true; rc=0
    if [ "$m" = %[5]q ]; then ok=false; rc=2; fi
    %[2]q fire --nats %[3]q "salt/job/$jid/ret/$m" "{\"id\": \"$m\", \"jid\": \"$jid\", \"fun\": \"$fun\", \"success\": $ok, \"retcode\": $rc}"
  done
) >/dev/null 2>&1 &
echo "Executed command with job ID: $jid"
`, calls, binPath, natsURL, delay, fail))
	return salt, calls
}

// startLines lists the targets of a jobsStandIn call log's start lines.
func startLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if tgt, ok := strings.CutPrefix(l, "start "); ok {
			out = append(out, tgt)
		}
	}
	return strings.Join(out, " ")
}

// readFile returns a file's content, "" when it cannot be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestReplicasConcurrencyByPartition: concurrency: 1 per minion (the
// default key) with two replicas and --partitions 2: a minion's events
// go to the replica holding its partition, which runs its reactions one
// at a time, each after the previous job returned; the two minions'
// jobs run side by side.
func TestReplicasConcurrencyByPartition(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := t.TempDir()
	conf := ruleFiles(t, dir, "#!gotmpl|yaml\nhs:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n", "  - 'myco/ping':\n      sls: %s\n      concurrency: 1\n")
	salt, calls := jobsStandIn(t, dir, srv.ClientURL(), "1", "")
	ps := startReplicas(t, 2, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", salt, "--jetstream", "--partitions", "2")
	// One partition each, and web1 and web2 in different ones: each
	// replica runs one minion's jobs.
	waitBalanced(t, ps, "1")
	if natsbus.PartitionOf("web1", 2) == natsbus.PartitionOf("web2", 2) {
		t.Fatal("web1 and web2 share a partition of 2: pick other names")
	}
	// One job each first: a partition just handed over can take seconds
	// to deliver (the former owner's pin), which is not what this test
	// is about; the jobs compared are those after.
	ends := func(n int) {
		t.Helper()
		checkFor(t, 30*time.Second, func() error {
			if got := strings.Count(readFile(t, calls), "end "); got != n {
				return fmt.Errorf("%d jobs returned, want %d", got, n)
			}
			return nil
		})
	}
	for _, id := range []string{"web1", "web2"} {
		pingStream(t, c, id)
	}
	ends(2)
	warm := len(strings.Split(strings.TrimSpace(readFile(t, calls)), "\n"))
	for range 3 {
		for _, id := range []string{"web1", "web2"} {
			pingStream(t, c, id)
		}
	}
	ends(8)
	running := map[string]int{}
	side := false
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, calls)), "\n")[warm:] {
		what, minion, _ := strings.Cut(l, " ")
		if what == "start" {
			running[minion]++
			if running[minion] > 1 {
				t.Fatalf("two jobs on %s at once:\n%s", minion, readFile(t, calls))
			}
			if len(running) == 2 && running["web1"]+running["web2"] == 2 {
				side = true
			}
		} else {
			running[minion]--
			if running[minion] == 0 {
				delete(running, minion)
			}
		}
	}
	if !side {
		t.Errorf("web1's and web2's jobs never ran side by side:\n%s", readFile(t, calls))
	}
	for i, p := range ps {
		if got := metricValue(t, scrape(t, p), `reactord_actions_total{driver="exec",state="dispatched"}`); got != "4" {
			t.Errorf("replica %d dispatched %s reactions, want 4 (one minion's)", i, got)
		}
	}
	stopAll(t, ps)
}
