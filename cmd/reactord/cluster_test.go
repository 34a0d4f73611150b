package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// natsCluster is a three-node NATS cluster with JetStream, each node a
// process of its own (natsNode) that a test can SIGKILL.
type natsCluster struct {
	urls  []string // client URLs
	https []string // monitoring addresses
	cmds  []*exec.Cmd
}

// startCluster starts three clustered nodes and waits until JetStream
// answers (a meta leader is elected).
func startCluster(t *testing.T) *natsCluster {
	t.Helper()
	c := launchCluster(t, 3)
	nc, err := nats.Connect(strings.Join(c.urls, ","), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Three nodes electing JetStream's meta leader take seconds; on a
	// loaded machine (CI ran the real-Salt suite beside it) over 20.
	checkFor(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err
	})
	return c
}

// launchCluster prepares a three-node cluster and starts its first n
// nodes without waiting for anything; restart starts the others.
func launchCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	port := func() int {
		_, p, _ := net.SplitHostPort(freeAddr(t))
		n, _ := strconv.Atoi(p)
		return n
	}
	c := &natsCluster{}
	var routes []string
	clusterPorts := []int{port(), port(), port()}
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range 3 {
		cp, hp := port(), port()
		args := []string{"-name", fmt.Sprintf("n%d", i+1), "-port", strconv.Itoa(cp), "-http", strconv.Itoa(hp),
			"-cluster", strconv.Itoa(clusterPorts[i]), "-routes", strings.Join(routes, ","), "-store", t.TempDir()}
		if i < n {
			c.cmds = append(c.cmds, startNode(t, args...))
		} else {
			c.cmds = append(c.cmds, exec.Command(binPath, args...)) // not started: restart starts it
		}
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", cp))
		c.https = append(c.https, fmt.Sprintf("127.0.0.1:%d", hp))
	}
	return c
}

// js is a JetStream client of the cluster that reconnects to any of its
// nodes, closed at the end of the test.
func (c *natsCluster) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(strings.Join(c.urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// stepDown asks the event stream's leader to step down for node to lead
// it, and waits (up to 5s) for the election to end: it returns an error
// saying which node leads then, nil when node does.
func stepDown(nc *nats.Conn, js jetstream.JetStream, node string) error {
	if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.REACTORD_EVENTS", []byte(`{"placement":{"preferred":"`+node+`"}}`), 2*time.Second); err != nil {
		return err
	}
	leader := ""
	err := wait.Poll(5*time.Second, func() error {
		info, err := streamInfo(js, "REACTORD_EVENTS")
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errors.New("no stream leader yet")
		}
		leader = info.Cluster.Leader
		return nil
	})
	if err != nil {
		return err
	}
	if leader != node {
		return fmt.Errorf("stream leader %s, not %s", leader, node)
	}
	return nil
}

// streamInfo asks for a stream's info, within 2s.
func streamInfo(js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// nodeOf returns the index of the node a client connection named name is
// connected to, from each node's /connz.
func (c *natsCluster) nodeOf(name string) (int, error) {
	for i, h := range c.https {
		resp, err := http.Get("http://" + h + "/connz")
		if err != nil {
			continue
		}
		var v struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, cn := range v.Connections {
			if cn.Name == name {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("no node has a connection named %q", name)
}

// TestClusterNodeSIGKILL: a JetStream daemon given the three nodes of a
// NATS cluster and --stream-replicas 3; the node it is connected to is
// killed with SIGKILL mid-stream. The daemon reconnects to another node,
// the stream (whose leader was moved to that node) keeps its quorum and
// elects another leader, and every event is acted on (issue 12).
func TestClusterNodeSIGKILL(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	conf := copyExampleConfig(t)
	// The stream exists with one copy, as a single-server setup left it:
	// --stream-replicas 3 scales it up.
	{
		nc, err := nats.Connect(strings.Join(cl.urls, ","))
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "REACTORD_EVENTS", Subjects: []string{"salt.evt.>"}, Storage: jetstream.FileStorage})
		cancel()
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The reactions go to a stream of three copies, which the test
	// reads: a reaction published with core NATS through the node that
	// dies can be lost in its routes after the node confirmed it.
	ce := collectStored(t, cl.js(t), "test.exec.", 3)
	d := startDaemon(t, "-c", conf, "--nats", strings.Join(cl.urls, ","), "--jetstream", "--stream-replicas", "3", "--ack-wait", "2s",
		"--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
	victim, err := cl.nodeOf("reactord")
	if err != nil {
		t.Fatal(err)
	}
	// The test's own client stays on another node: it publishes and
	// reads the reactions.
	other := cl.urls[(victim+1)%3]
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: other, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	nc, err := nats.Connect(other)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	info := func() *jetstream.StreamInfo {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "REACTORD_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		i, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	if r := info().Config.Replicas; r != 3 || !strings.Contains(d.logs(), "JetStream stream replicas changed") {
		t.Fatalf("stream replicas %d, want 3, and a line saying it changed", r)
	}
	// The stream's leader moves to the node about to die, so the kill
	// takes the daemon's connection and the stream's leader at once.
	victimName := fmt.Sprintf("n%d", victim+1)
	checkFor(t, 10*time.Second, func() error {
		if l := info().Cluster.Leader; l == victimName {
			return nil
		}
		return stepDown(nc, js, victimName)
	})
	const n = 2000
	var retries int
	steady := time.NewTicker(20 * time.Millisecond)
	defer steady.Stop()
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			// A publish the stream did not acknowledge (a leader
			// election) is retried with the same id: one copy is kept.
			err := wait.Poll(30*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored)
				if err != nil {
					retries++
				}
				return err
			})
			if err != nil {
				t.Errorf("publishing %s: %v", id, err)
				return
			}
			if i%100 == 0 {
				<-steady.C // a steady stream, not one burst
			}
		}
	}()
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < n/3 {
			return fmt.Errorf("%d reactions so far", total)
		}
		return nil
	})
	if err := cl.cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	atKill, _, _, _ := ce.snapshot()
	checkFor(t, 40*time.Second, func() error {
		if _, distinct, _, _ := ce.snapshot(); distinct < n {
			return fmt.Errorf("%d of %d events acted on", distinct, n)
		}
		return nil
	})
	<-published
	took := time.Since(killedAt)
	waitSettled(t, strings.Join(cl.urls, ","), 30*time.Second) // late redeliveries would show as duplicates
	total, distinct, _, dups := ce.snapshot()
	if distinct != n {
		t.Fatalf("%d of %d events acted on", distinct, n)
	}
	if bound := daemon.MaxAckPending(1024, 8); dups > bound {
		t.Fatalf("%d duplicates, more than the %d a kill can leave in flight", dups, bound)
	}
	now, err := cl.nodeOf("reactord")
	if err != nil || now == victim {
		t.Fatalf("daemon on node %d after node %d was killed: %v", now, victim, err)
	}
	if !strings.Contains(d.logs(), "NATS connection back") {
		t.Error("the daemon did not log its reconnection")
	}
	// The stream answers again (its info may time out for a while after
	// a kill that took its leader and JetStream's meta leader).
	var i *jetstream.StreamInfo
	checkFor(t, 20*time.Second, func() error {
		i, err = streamInfo(js, "REACTORD_EVENTS")
		return err
	})
	t.Logf("killed node %s (the daemon's and the stream leader) after %d reactions; all %d acted on %v after the kill; total %d, duplicates %d, publish retries %d; daemon now on n%d; stream leader %s, replicas %d",
		victimName, atKill, distinct, took.Round(time.Millisecond), total, dups, retries, now+1, i.Cluster.Leader, len(i.Cluster.Replicas)+1)
	var notes []string
	for _, l := range strings.Split(d.logs(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			notes = append(notes, l)
		}
	}
	t.Logf("the daemon's warnings and errors:\n%s", strings.Join(notes, "\n"))
}

// TestClusterBridgeNodeSIGKILL: a bridge given the three nodes of the
// cluster feeds a JetStream daemon (--stream-replicas 3); the node the
// bridge is connected to is killed with SIGKILL while the master fires.
// The bridge holds what it could not publish, reconnects to another node
// and publishes it: every event the master fired reacts once (issue 12).
func TestClusterBridgeNodeSIGKILL(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	conf := copyExampleConfig(t)
	all := strings.Join(cl.urls, ",")
	// The reactions go to a stream the test reads (see
	// TestClusterNodeSIGKILL): the daemon may share the dying node.
	ce := collectStored(t, cl.js(t), "test.exec.", 3)
	d := startDaemon(t, "-c", conf, "--nats", all, "--jetstream", "--stream-replicas", "3", "--ack-wait", "2s",
		"--driver", "nats", "--exec-subject", "test.exec.", "--store", "none", "--no-loop-guard")
	frames := make(chan []byte, 4096)
	startDaemon(t, "bridge", "--sock-dir", fakeMasterSocket(t, frames), "--nats", all, "--data-dir", t.TempDir())
	victim, err := cl.nodeOf("reactord-bridge")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	steady := time.NewTicker(20 * time.Millisecond)
	defer steady.Stop()
	go func() {
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			frames <- saltFrame(t, "salt/minion/"+id+"/start", map[string]any{"id": id, "cmd": "_minion_event",
				"_stamp": base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000000")})
			if i%50 == 0 {
				<-steady.C // a steady stream, not one burst
			}
		}
	}()
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < n/3 {
			return fmt.Errorf("%d reactions so far", total)
		}
		return nil
	})
	daemonNode, _ := cl.nodeOf("reactord")
	consumerLeader := "?"
	{
		nc, err := nats.Connect(cl.urls[(victim+1)%3])
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if cons, err := js.Consumer(ctx, "REACTORD_EVENTS", "reactord"); err == nil && cons.CachedInfo().Cluster != nil {
			consumerLeader = cons.CachedInfo().Cluster.Leader
		}
		cancel()
		nc.Close()
	}
	if err := cl.cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	atKill, _, _, _ := ce.snapshot()
	checkFor(t, 40*time.Second, func() error {
		if _, distinct, _, _ := ce.snapshot(); distinct < n {
			return fmt.Errorf("%d of %d events acted on", distinct, n)
		}
		return nil
	})
	took := time.Since(killedAt)
	waitSettled(t, strings.Join(cl.urls, ","), 30*time.Second) // late redeliveries would show as duplicates
	total, distinct, _, dups := ce.snapshot()
	if distinct != n {
		t.Fatalf("%d of %d events acted on", distinct, n)
	}
	// The bridge's retries carry the same Nats-Msg-Id: the stream keeps
	// one. An event runs twice only when an acknowledgement was lost with
	// the node (the daemon's connection, or the consumer's leader, was
	// there): at most what was in flight.
	if bound := daemon.MaxAckPending(1024, 8); dups > bound {
		t.Fatalf("%d duplicates, more than the %d a kill can leave in flight", dups, bound)
	}
	t.Logf("killed node n%d (the bridge's; the daemon was on n%d; consumer leader %s) after %d reactions; all %d acted on %v after the kill; total %d, duplicates %d",
		victim+1, daemonNode+1, consumerLeader, atKill, distinct, took.Round(time.Millisecond), total, dups)
	if strings.Contains(d.logs(), "level=ERROR") {
		t.Errorf("the daemon logged errors:\n%s", d.logs())
	}
}

// TestClusterThrottleThroughNodeKill: three JetStream replicas on the
// three-node cluster share a throttle of 3 per hour per minion; the node
// leading the shared-state bucket is killed after each minion's first
// reaction, while events keep coming. Each minion still gets 3 reactions
// in all: a replica waits for the bucket's new leader rather than count
// alone (issue 12).
func TestClusterThrottleThroughNodeKill(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	conf := throttleConf(t, "throttle: {count: 3, per: 1h, key: data.id}")
	js := cl.js(t)
	ce := collectStored(t, js, "test.exec.", 3)
	ps := startReplicas(t, 3, "-c", conf, "--nats", strings.Join(cl.urls, ","), "--jetstream", "--stream-replicas", "3", "--ack-wait", "5s",
		"--driver", "nats", "--exec-subject", "test.exec.", "--store", "none", "--no-loop-guard")
	var victim int
	checkFor(t, 10*time.Second, func() error {
		info, err := streamInfo(js, "KV_REACTORD_GUARD")
		if err != nil {
			return err
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("bucket replicas %d, no leader yet", info.Config.Replicas)
		}
		_, err = fmt.Sscanf(info.Cluster.Leader, "n%d", &victim)
		victim--
		return err
	})
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: cl.urls[(victim+1)%3], Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const minions, rounds = 20, 8
	publish := func(r int) {
		for m := range minions {
			id := fmt.Sprintf("m%02d", m)
			checkFor(t, 30*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				return c.Publish(ctx, natsbus.Msg{Tag: "myco/ping", Body: []byte(`{"tag": "myco/ping", "data": {"id": "` + id + `"}}`), Meta: natsbus.Meta{MsgID: fmt.Sprintf("%s-%d", id, r)}}, natsbus.Stored)
			})
		}
	}
	publish(0)
	checkFor(t, 20*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < minions {
			return fmt.Errorf("%d reactions of the first round", total)
		}
		return nil
	})
	if err := cl.cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pace := time.NewTicker(300 * time.Millisecond) // events keep coming through the election
	defer pace.Stop()
	for r := 1; r < rounds; r++ {
		publish(r)
		<-pace.C
	}
	checkFor(t, 60*time.Second, func() error {
		total, _, _, _ := ce.snapshot()
		throttled := sumMetric(t, ps, `reactord_suppressed_total{reason="throttle"}`)
		if total+throttled < minions*rounds {
			return fmt.Errorf("%d reactions and %d throttled of %d events", total, throttled, minions*rounds)
		}
		return nil
	})
	waitSettled(t, strings.Join(cl.urls, ","), 30*time.Second) // a late reaction would show
	ce.snapshot()
	ce.mu.Lock()
	defer ce.mu.Unlock()
	var wrong []string
	for m := range minions {
		id := fmt.Sprintf("m%02d", m)
		if n := ce.byMinion[id]; n != 3 {
			wrong = append(wrong, fmt.Sprintf("%s: %d", id, n))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("reactions per minion, want 3 each: %v (by replica %v)", wrong, ce.byOrigin)
	}
	t.Logf("killed n%d (the bucket's leader) after the first round; %d events of %d minions: 3 reactions each (by replica %v)", victim+1, minions*rounds, minions, ce.byOrigin)
}

// stop kills node i with SIGKILL.
func (c *natsCluster) stop(t *testing.T, i int) {
	t.Helper()
	_ = c.cmds[i].Process.Kill()
	_ = c.cmds[i].Wait()
}

// restart starts node i again, with its ports and store, after stop.
func (c *natsCluster) restart(t *testing.T, i int) {
	t.Helper()
	old := c.cmds[i]
	c.cmds[i] = startNode(t, old.Args[1:]...)
}

// startNode starts a natsnode process (this binary, natsNode), killed at
// the end of the test (its output logged if the test failed).
func startNode(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), roleEnv+"=natsnode")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && out.Len() > 0 {
			t.Logf("natsnode %s:\n%s", cmd.Args[2], out.String())
		}
	})
	return cmd
}

// TestSharedStateArrivesLate: a replica that starts while its cluster
// cannot hold the shared state bucket (two of three nodes down, so
// JetStream has no quorum) starts anyway, counting alone: it says so once
// in its log, /healthz answers 503 naming the shared state and
// reactord_shared_state_up is 0. When the nodes are back it opens the
// bucket by itself, in the background: /healthz 200, the gauge 1 and a
// log line (issue 22, item 7).
func TestSharedStateArrivesLate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a NATS cluster of three processes")
	}
	c := startCluster(t)
	c.stop(t, 1)
	c.stop(t, 2)
	conf := copyExampleConfig(t)
	p := launchDaemon(t, "-c", conf, "--nats", c.urls[0], "--jetstream=false", "--stream-replicas", "3")
	checkFor(t, 60*time.Second, func() error {
		resp, err := http.Get("http://" + p.http + "/healthz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shared state") {
			return fmt.Errorf("/healthz %d %q, want 503 naming the shared state", resp.StatusCode, body)
		}
		return nil
	})
	if !strings.Contains(p.logs(), "shared state not available yet") {
		t.Fatalf("the start does not say the shared state is missing:\n%s", p.logs())
	}
	if got := metricValue(t, scrape(t, p), "reactord_shared_state_up"); got != "0" {
		t.Fatalf("reactord_shared_state_up = %s while the bucket cannot be opened", got)
	}
	down := time.Now()
	c.restart(t, 1)
	c.restart(t, 2)
	checkFor(t, 90*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != http.StatusOK {
			return fmt.Errorf("/healthz %d", code)
		}
		if got := metricValue(t, scrape(t, p), "reactord_shared_state_up"); got != "1" {
			return fmt.Errorf("reactord_shared_state_up = %s", got)
		}
		return nil
	})
	if !strings.Contains(p.logs(), "shared state available again") {
		t.Errorf("the recovery is not logged:\n%s", p.logs())
	}
	if n := strings.Count(p.logs(), "shared state not available yet"); n != 1 {
		t.Errorf("the outage was logged %d times, want once", n)
	}
	t.Logf("shared state attached %s after the nodes were restarted", time.Since(down).Round(time.Second))
}
