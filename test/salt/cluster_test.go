package salt_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/event"
)

// clusterPoolPort is the port on which each member of a Salt master cluster
// receives its peers' events (Salt 3007 fixes it: 4520 on the member's
// interface), so the members need an address each.
const clusterPoolPort = 4520

// saltHasCluster reports whether the Salt under test has master clusters
// (cluster_id, new in 3007), and its version.
func saltHasCluster(t *testing.T) (bool, string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(saltBinDir, "salt-master"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("salt-master --version: %v: %s", err, out)
	}
	m := regexp.MustCompile(`(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("salt-master --version: no version in %q", out)
	}
	major, _ := strconv.Atoi(m[1])
	return major >= 3007, m[0]
}

// clusterIPs returns n loopback addresses, 127.B.C.2 and on, on which
// nothing listens on the cluster pool port.
func clusterIPs(t *testing.T, n int) []string {
	t.Helper()
	for range 50 {
		b, c := 16+rand.IntN(230), rand.IntN(250)
		var ips []string
		var ls []net.Listener
		for i := range n {
			ip := fmt.Sprintf("127.%d.%d.%d", b, c, i+2)
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(clusterPoolPort)))
			if err != nil {
				break
			}
			ls = append(ls, l)
			ips = append(ips, ip)
		}
		for _, l := range ls {
			l.Close()
		}
		if len(ips) == n {
			return ips
		}
	}
	t.Fatalf("no %d loopback addresses with port %d free", n, clusterPoolPort)
	return nil
}

// saltCluster is a Salt 3007 master cluster on one machine: members on
// their own loopback addresses (Salt's pool port is fixed), sharing the
// cluster's key directory and the cache directory (the job cache) as
// Salt's documentation requires, with identical file_roots; no load
// balancer, so each minion names the member it connects to.
type saltCluster struct {
	members []*saltEnv
	ips     []string
	shared  string
}

// startCluster starts n members, without minions or salt-api.
func startCluster(t *testing.T, n int) *saltCluster {
	t.Helper()
	shared, err := os.MkdirTemp("", "rsc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	c := &saltCluster{ips: clusterIPs(t, n), shared: shared}
	for i, ip := range c.ips {
		var peers []string
		for j, p := range c.ips {
			if j != i {
				peers = append(peers, p)
			}
		}
		// root_dir / keeps startSalt's absolute paths as they are and lets
		// the cache directory live outside the member's own tree.
		c.members = append(c.members, startSalt(t, saltOptions{noMinions: true, noAPI: true, masterOverride: fmt.Sprintf(`id: %[1]s
interface: %[1]s
root_dir: /
cachedir: %[2]s/cache
cluster_id: reactord_e2e
cluster_peers: [%[3]s]
cluster_pki_dir: %[2]s/pki
`, ip, shared, strings.Join(peers, ", "))}))
		// No recovery from the job cache: it is the cluster's, so a
		// member's bridge back from a restart would publish again the
		// returns its peers' bridges carried meanwhile (their copies on
		// the peers' buses), and each would react twice (seen on 3007.1:
		// a failed job's alert twice).
		c.members[i].bridgeJobCache = "-"
	}
	return c
}

// addMinion adds minion id (its inotify beacon as addMinion writes it)
// connected to member i.
func (c *saltCluster) addMinion(t *testing.T, i int, id string) {
	t.Helper()
	e := c.members[i]
	addMinion(e, id, []*saltEnv{e}, "")
	// The member's own address, over the 127.0.0.1 addMinion writes
	// (Salt merges minion.d over the minion file).
	// A pending key's salt/auth every 10s rather than 2s: each reaction
	// to one is a salt-run wheel call, which takes seconds.
	writeFile(t, filepath.Join(e.dir, "minions", id, "etc", "minion.d", "cluster.conf"), "master: "+c.ips[i]+"\nacceptance_wait_time: 10\n")
}

// emissionID identifies one emission whichever member's bus (and bridge)
// carried it: the tag and the data, "_stamp" included, without the
// "__peer_id" a member adds to its peers' events.
func emissionID(ev event.Event) string {
	data := maps.Clone(ev.Data)
	delete(data, "__peer_id")
	b, _ := json.Marshal(data)
	return bridge.MsgID(ev.Tag, b)
}

// emissions returns the events on the bus matching f, one per emission
// (every member fires every event, and each member's bridge publishes it).
func (r *reactord) emissions(f func(event.Event) bool) []event.Event {
	seen := map[string]bool{}
	var out []event.Event
	for _, ev := range r.seen(f) {
		if id := emissionID(ev); !seen[id] {
			seen[id] = true
			out = append(out, ev)
		}
	}
	return out
}

// jobs returns the distinct job ids of the events matching f.
func (r *reactord) jobs(f func(event.Event) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, ev := range r.seen(f) {
		if j := fmt.Sprint(ev.Data["jid"]); !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out
}

// TestSaltClusterOnRealSalt runs reactord against a Salt 3007 master
// cluster of three members (web1 on the first, web2 on the second, none on
// the third), with a bridge on every member (no job cache recovery) into
// the daemon's JetStream stream and --dedupe-masters 1ms (a peer's copy
// carries the first member's _stamp, so the window needs to fold only
// equal stamps; a wider one would fold genuine repeats too, such as a
// pending key's salt/auth every acceptance_wait_time), the daemon
// dispatching through the first member (master driver). Every member's bus
// carries every event (a peer's copy with the first member's _stamp and
// its id in __peer_id), so each emission reaches NATS three times and is
// stored once. The four recipes react once per emission: each salt/auth
// emission is taken at most once and the keys are accepted, one highstate
// per minion start, one revert per genuine change on web2 (whose beacon
// Salt does not pause, the revert's own write held back by the loop
// guard), one alert per failed job. The second member then restarts: the
// events fired on the others meanwhile, and a failed job's return, reach
// the daemon once each.
func TestSaltClusterOnRealSalt(t *testing.T) {
	t.Parallel()
	if ok, version := saltHasCluster(t); !ok {
		t.Skipf("Salt %s has no master cluster (cluster_id and cluster_peers came in 3007)", version)
	}
	start := time.Now()
	c := startCluster(t, 3)
	t.Logf("3 members on %v up in %s", c.ips, time.Since(start).Round(time.Second))
	c.addMinion(t, 0, "web1")
	c.addMinion(t, 1, "web2")

	counted := filepath.Join(t.TempDir(), "counted.sls")
	writeFile(t, counted, "#!gotmpl|yaml\n{{- /* counted, nothing to do */ -}}\n")
	root, _ := filepath.Abs("../..")
	m1, m2, m3 := c.members[0], c.members[1], c.members[2]
	revert := root + "/examples/reactor/revert-on-inotify/revert.sls"
	// startReactordRules watches the files under the first member's
	// directory; web2's is under the second's.
	rules := fmt.Sprintf("  - 'salt/beacon/*/inotify/%s':\n    - %s\n  - 'reactord/cluster/*':\n    - %s\n",
		filepath.Join(m2.dir, "watch", "*", "important_file"), revert, counted)
	r := startReactordRules(t, m1, "master", revert, rules, "--dedupe-masters", "1ms")
	r.addBridge(m2)
	r.addBridge(m3)
	for _, e := range c.members {
		e.startMinions()
	}

	// Keys: each pending emission (every acceptance_wait_time, once per
	// minion's member) gives one wheel.key.accept.
	waitFor(t, 300*time.Second, "web1 and web2 accepted by the reactor", func() error {
		out, err := m3.salt("salt-key", "-L", "--out", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var keys map[string][]string
		if err := json.Unmarshal([]byte(out), &keys); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(keys["minions"]) != 2 {
			return fmt.Errorf("salt-key -L on the third member: %s", out)
		}
		return nil
	})
	// Every pending emission reacts (a salt-run wheel call each: they
	// queue up on a loaded machine), but none twice: the daemon takes each
	// emission once, whichever bridges carried it.
	auths := tagIs("salt/auth")
	taken := r.metric(`reactord_rule_matches_total{rule="salt/auth"}`)
	if n := len(r.emissions(auths)); taken > n {
		t.Errorf("the daemon took %d salt/auth events of %d emissions", taken, n)
	}
	t.Logf("keys accepted: %d salt/auth emissions on NATS %d times, taken %d times so far", len(r.emissions(auths)), len(r.seen(auths)), taken)

	// Minion starts: one highstate each, which returns.
	for _, id := range []string{"web1", "web2"} {
		waitFor(t, 180*time.Second, "the highstate of "+id, func() error {
			js := r.jobs(isHighstate(id))
			if len(js) == 0 {
				return fmt.Errorf("no state.apply of %s", id)
			}
			if len(r.seen(tagIs("salt/job/"+js[0]+"/ret/"+id))) == 0 {
				return fmt.Errorf("job %s has not returned", js[0])
			}
			return nil
		})
	}
	highstates := func(id string) func() error {
		return func() error {
			starts := len(r.emissions(tagIs("salt/minion/" + id + "/start")))
			if n := len(r.jobs(isHighstate(id))); n != starts {
				return fmt.Errorf("%s: %d start emissions, %d highstates", id, starts, n)
			}
			return nil
		}
	}
	holds(t, 4*time.Second, "one highstate per start", func() error {
		if err := highstates("web1")(); err != nil {
			return err
		}
		return highstates("web2")()
	})
	t.Logf("starts: one highstate each for web1 (on %s) and web2 (on %s); the start event on NATS %d times", c.ips[0], c.ips[1],
		len(r.seen(tagIs("salt/minion/web1/start"))))

	// Reverts on web2, whose beacon reports the revert's own write.
	reverts := isJobNew("state.apply", "web2", "maintain_important_file")
	suppressions := func() int { return r.metric(`reactord_suppressed_total{reason="loop_guard_beacon"}`) }
	suppressedBefore := suppressions()
	for change := 1; change <= 2; change++ {
		f, err := os.OpenFile(m2.watch["web2"], os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "genuine change %d\n", change)
		f.Close()
		waitFor(t, 60*time.Second, fmt.Sprintf("revert %d of web2", change), func() error {
			js := r.jobs(reverts)
			if len(js) < change {
				return fmt.Errorf("%d reverts; %d beacon emissions of web2; loop_guard_beacon %d, queue depth %d", len(js),
					len(r.emissions(func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "salt/beacon/web2/") })),
					suppressions(), r.metric("reactord_queue_depth"))
			}
			if len(r.seen(tagIs("salt/job/"+js[len(js)-1]+"/ret/web2"))) == 0 {
				return fmt.Errorf("revert %s has not returned", js[len(js)-1])
			}
			return nil
		})
		// The beacon interval and the settle window: a loop would show a
		// further revert here.
		holds(t, 6*time.Second, fmt.Sprintf("web2 after %d genuine change(s)", change), func() error {
			if n := len(r.jobs(reverts)); n != change {
				return fmt.Errorf("%d reverts", n)
			}
			return nil
		})
		if b, _ := os.ReadFile(m2.watch["web2"]); strings.TrimSpace(string(b)) != "known content" {
			t.Errorf("web2's watched file was not reverted: %q", b)
		}
	}
	beacons := r.emissions(func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "salt/beacon/web2/inotify/") })
	suppressed := suppressions() - suppressedBefore
	if len(beacons) < 3 || suppressed < len(beacons)-2 {
		t.Errorf("web2: %d beacon emissions gave 2 reverts with %d loop_guard_beacon suppressions: want the revert's own write back (3 or more) and held back", len(beacons), suppressed)
	}
	t.Logf("web2: 2 genuine changes → %d beacon emissions → 2 reverts, %d held back by the loop guard", len(beacons), suppressed)

	// Failed jobs, started on the third member (no minion of its own): one
	// alert each.
	alerts := tagIs("myco/alert/job_failed")
	alertedOnce := func(jids []string) func() error {
		return func() error {
			per := map[string]int{}
			for _, ev := range r.emissions(alerts) {
				per[fmt.Sprint(ev.Data["jid"])]++
			}
			for _, j := range jids {
				if per[j] != 1 {
					return fmt.Errorf("job %s: %d alerts", j, per[j])
				}
			}
			if len(per) != len(jids) {
				return fmt.Errorf("alerts for %d jobs, want %d: %v", len(per), len(jids), per)
			}
			return nil
		}
	}
	var fails []string
	for _, id := range []string{"web1", "web2"} {
		out, err := m3.salt("salt", "--async", id, "state.apply", "fail")
		fails = append(fails, jidOf(t, out, err))
	}
	waitFor(t, 60*time.Second, "an alert for each failed job", alertedOnce(fails))
	holds(t, 4*time.Second, "one alert per failed job", alertedOnce(fails))
	t.Logf("failed jobs %v (started on %s) → one alert each", fails, c.ips[2])

	// The second member restarts. What the others fire meanwhile reaches
	// the daemon through their bridges, once.
	reconnects := strings.Count(r.log(), "reconnected to the master's event bus")
	m2.stopMaster()
	sent := 0
	send := func(e *saltEnv) {
		t.Helper()
		sent++
		if out, err := e.salt("salt-run", "event.send", fmt.Sprintf("reactord/cluster/%d", sent)); err != nil {
			t.Fatalf("salt-run event.send: %v: %s", err, out)
		}
	}
	for range 2 {
		send(m1)
		send(m3)
	}
	out, err := m1.salt("salt", "--async", "web1", "state.apply", "fail")
	fails = append(fails, jidOf(t, out, err))
	m2.startMaster()
	waitFor(t, 120*time.Second, "the second member's bridge to reconnect", func() error {
		if strings.Count(r.log(), "reconnected to the master's event bus") <= reconnects {
			return fmt.Errorf("no reconnection logged")
		}
		return nil
	})
	send(m2)
	send(m1)
	matched := func() error {
		if n := r.metric(`reactord_rule_matches_total{rule="reactord/cluster/*"}`); n != sent {
			return fmt.Errorf("the daemon took %d of the %d events sent", n, sent)
		}
		if n := len(r.emissions(func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "reactord/cluster/") })); n != sent {
			return fmt.Errorf("%d of the %d events on NATS", n, sent)
		}
		return nil
	}
	waitFor(t, 60*time.Second, "every event sent across the restart", matched)
	waitFor(t, 60*time.Second, "one alert per failed job, the one during the restart included", alertedOnce(fails))
	holds(t, 5*time.Second, "no copy reacting late", func() error {
		if err := matched(); err != nil {
			return err
		}
		return alertedOnce(fails)()
	})
	for _, id := range []string{"web1", "web2"} {
		if err := highstates(id)(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("second member restarted: %d events sent on the members (4 while it was down) → %d taken by the daemon, the failed job %s during the restart → one alert; %d master_copy drops; %s in all",
		sent, r.metric(`reactord_rule_matches_total{rule="reactord/cluster/*"}`), fails[len(fails)-1],
		r.metric(`reactord_suppressed_total{reason="master_copy"}`), time.Since(start).Round(time.Second))
}
