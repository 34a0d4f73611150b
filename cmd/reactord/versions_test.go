package main

import (
	"context"
	"fmt"
	"github.com/nats-io/nats.go/jetstream"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// natsServersEnv lists the nats-server binaries (space-separated paths)
// the version tests run reactord against, beside the embedded server;
// .ci/run builds the pinned releases and sets it.
const natsServersEnv = "REACTORD_TEST_NATS_SERVERS"

// natsUnderTest is a NATS server a version test runs on: the embedded
// one (bin empty) or a nats-server binary.
type natsUnderTest struct {
	name string // its version, for the subtest's name
	bin  string
}

// serversUnderTest returns the embedded server and the binaries
// $REACTORD_TEST_NATS_SERVERS names (said once when it is unset).
func serversUnderTest(t *testing.T) []natsUnderTest {
	t.Helper()
	out := []natsUnderTest{{name: "embedded"}}
	bins := strings.Fields(os.Getenv(natsServersEnv))
	if len(bins) == 0 {
		t.Logf("$%s unset: only the embedded server; set it to nats-server binaries (e.g. /opt/nats-v2.12.3/nats-server) to test those releases", natsServersEnv)
	}
	for _, b := range bins {
		out = append(out, natsUnderTest{name: filepath.Base(filepath.Dir(b)), bin: b})
	}
	return out
}

// start runs the server with JetStream on a free port of 127.0.0.1, its
// store in a temporary directory, until the test ends; it returns its
// client URL and the client connected to it.
func (s natsUnderTest) start(t *testing.T) (string, *natsbus.Conn) {
	t.Helper()
	if s.bin == "" {
		srv, c := natsServer(t)
		return srv.ClientURL(), c
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(s.bin, "-js", "-a", host, "-p", port, "-sd", t.TempDir())
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", s.bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", s.bin, out.String())
		}
	})
	url := "nats://" + addr
	var c *natsbus.Conn
	checkFor(t, 10*time.Second, func() error {
		var err error
		c, err = natsbus.Connect(natsbus.ConnOptions{URL: url, Name: "test"})
		return err
	})
	t.Cleanup(c.Close)
	return url, c
}

// matrixEvents is how many events each cell of the version matrix fires.
const matrixEvents = 30

// TestNATSVersionMatrix runs each feature built on JetStream on each NATS
// server under test (the embedded 2.15 always, the releases of
// $REACTORD_TEST_NATS_SERVERS: 2.10, 2.11, 2.12 in CI), each cell on a
// server of its own: either every event fired reacts, exactly once, or
// the daemon exits at start with the one line naming the feature, the
// server's version and the version it needs. No daemon may say ready and
// then take nothing (what --partitions did on 2.12: every partition's
// consumer reset timed out, for ever).
//
// The expectations are the measured ones, written here apart from the
// daemon's table (natsbus.Features): --partitions needs 2.14.0 (consumer
// reset), the shared state 2.11.0 (per-message TTLs; on older servers the
// daemon keeps it in memory and says so), the shared consumer and
// --dedupe-masters work everywhere; the shared consumer's stream is
// trimmed from 2.10.0 (stream metadata), a work queue before.
func TestNATSVersionMatrix(t *testing.T) {
	t.Parallel()
	for _, s := range serversUnderTest(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, cell := range []struct {
				feature string
				run     func(t *testing.T, url string, c *natsbus.Conn, v natsbus.Version)
			}{
				{"shared-consumer", matrixSharedConsumer},
				{"partitions", matrixPartitions},
				{"shared-state", matrixSharedState},
				{"dedupe-masters", matrixDedupeMasters},
			} {
				t.Run(cell.feature, func(t *testing.T) {
					t.Parallel()
					url, c := s.start(t)
					v, err := natsbus.ParseVersion(c.NATS().ConnectedServerVersion())
					if err != nil {
						t.Fatal(err)
					}
					cell.run(t, url, c, v)
				})
			}
		})
	}
}

// matrixArgs are a cell's daemon arguments: the example configuration,
// the nats driver on test.exec., no audit store.
func matrixArgs(t *testing.T, url string, more ...string) []string {
	return append([]string{"-c", copyExampleConfig(t), "--nats", url, "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none"}, more...)
}

// fireStarts publishes matrixEvents minion starts to the stream (copies:
// each twice, as two masters a second apart would).
func fireStarts(t *testing.T, c *natsbus.Conn, run string, copies bool) {
	t.Helper()
	ctx := context.Background()
	stamp := time.Now().UTC()
	for i := range matrixEvents {
		id := fmt.Sprintf("%s-m%d", run, i)
		for k := range 1 + btoi(copies) {
			at := stamp.Add(time.Duration(k) * time.Second).Format("2006-01-02T15:04:05.000000")
			body := fmt.Appendf(nil, `{"tag": "salt/minion/%s/start", "data": {"id": %q, "cmd": "_minion_event", "_stamp": %q}}`, id, id, at)
			if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: body, Meta: natsbus.Meta{MsgID: fmt.Sprintf("%s-%d", id, k)}}, natsbus.Stored); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expectEveryReaction waits until every event fired reacted, then until
// the stream's consumers hold nothing, and checks that none reacted twice.
func expectEveryReaction(t *testing.T, url string, ce *collectExec) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < matrixEvents {
			return fmt.Errorf("%d of %d events reacted to", total, matrixEvents)
		}
		return nil
	})
	waitSettled(t, url, 20*time.Second)
	if total, distinct, _, dups := ce.snapshot(); total != matrixEvents || distinct != matrixEvents || dups != 0 {
		t.Fatalf("%d reactions for %d minions (%d duplicates), want %d each, none twice", total, distinct, dups, matrixEvents)
	}
}

// expectRefused waits for p to exit at start and checks its one line.
func expectRefused(t *testing.T, p *proc, want string) {
	t.Helper()
	select {
	case err := <-p.done:
		if err == nil {
			t.Fatalf("exit 0, want a refusal\n%s", p.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after its start, want a refusal\n%s", p.logs())
	}
	logs := p.logs()
	if strings.Contains(logs, "reactord ready") {
		t.Fatalf("said ready before refusing:\n%s", logs)
	}
	if n := strings.Count(logs, "needs nats-server"); n != 1 || !strings.Contains(logs, "reactord: "+want+"\n") {
		t.Fatalf("want the one line %q (lines naming a version: %d), got:\n%s", want, n, logs)
	}
}

func matrixSharedConsumer(t *testing.T, url string, c *natsbus.Conn, v natsbus.Version) {
	ce := collect(t, c, "test.exec.")
	startDaemon(t, matrixArgs(t, url, "--jetstream")...)
	fireStarts(t, c, "shared", false)
	expectEveryReaction(t, url, ce)
	// The stream the daemon made: trimmed to the consumer's
	// acknowledgement floor from 2.10 (stream metadata), a work queue
	// before; either way it ends empty.
	want := jetstream.LimitsPolicy
	if v.Less(natsbus.Version{Major: 2, Minor: 10}) {
		want = jetstream.WorkQueuePolicy
	}
	checkFor(t, 10*time.Second, func() error {
		s, err := c.JetStream().Stream(context.Background(), "REACTORD_EVENTS")
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.Config.Retention != want || natsbus.Trimmed(info.Config, "reactord") != (want == jetstream.LimitsPolicy) || info.State.Msgs != 0 {
			return fmt.Errorf("the stream has retention %v, metadata %v and holds %d; want %v, trimmed=%t, empty", info.Config.Retention, info.Config.Metadata, info.State.Msgs, want, want == jetstream.LimitsPolicy)
		}
		return nil
	})
}

func matrixPartitions(t *testing.T, url string, c *natsbus.Conn, v natsbus.Version) {
	args := matrixArgs(t, url, "--jetstream", "--partitions", "2")
	if v.Less(natsbus.Version{Major: 2, Minor: 14}) {
		want := fmt.Sprintf("--partitions needs nats-server 2.14.0 or later (consumer reset); %s runs %s", url, v)
		for range 2 {
			expectRefused(t, launchDaemon(t, args...), want)
		}
		return
	}
	ce := collect(t, c, "test.exec.")
	ps := []*proc{startDaemon(t, args...), startDaemon(t, args...)}
	waitBalanced(t, ps, "1")
	fireStarts(t, c, "parts", false)
	expectEveryReaction(t, url, ce)
}

func matrixSharedState(t *testing.T, url string, c *natsbus.Conn, v natsbus.Version) {
	ce := collect(t, c, "test.exec.")
	p := startDaemon(t, matrixArgs(t, url, "--jetstream", "--shared-state")...)
	if v.Less(natsbus.Version{Major: 2, Minor: 11}) {
		want := fmt.Sprintf("--shared-state needs nats-server 2.11.0 or later (per-message TTLs); %s runs %s", url, v)
		if !strings.Contains(p.logs(), "shared state unavailable") || !strings.Contains(p.logs(), want) {
			t.Fatalf("no warning %q:\n%s", want, p.logs())
		}
	} else if !strings.Contains(p.logs(), "shared state loaded") {
		t.Fatalf("the shared state was not loaded:\n%s", p.logs())
	}
	up := map[bool]string{true: "0", false: "1"}[v.Less(natsbus.Version{Major: 2, Minor: 11})]
	if got := metricValue(t, scrape(t, p), "reactord_shared_state_up"); got != up {
		t.Fatalf("reactord_shared_state_up %s on %s, want %s", got, v, up)
	}
	fireStarts(t, c, "state", false)
	expectEveryReaction(t, url, ce)
}

func matrixDedupeMasters(t *testing.T, url string, c *natsbus.Conn, _ natsbus.Version) {
	ce := collect(t, c, "test.exec.")
	p := startDaemon(t, matrixArgs(t, url, "--jetstream", "--dedupe-masters", "2s")...)
	fireStarts(t, c, "copies", true)
	expectEveryReaction(t, url, ce)
	if got := metricValue(t, scrape(t, p), `reactord_suppressed_total{reason="master_copy"}`); got != fmt.Sprint(matrixEvents) {
		t.Fatalf("%s copies dropped, want %d", got, matrixEvents)
	}
}
