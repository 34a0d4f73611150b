package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// The process tests run reactord as processes of their own against a real
// NATS server (embedded in the test process on a random port): this test
// binary, which is reactord's main when its arguments carry none of the
// -test. flags go test gives it (a stand-in salt a daemon runs calls
// binPath fire, with the environment the exec driver passes on), or a NATS
// cluster node when $REACTORD_TEST_ROLE is natsnode. Built with -race, its
// processes report their data races too, which fail the tests.

// roleEnv set to "natsnode" makes this binary a NATS cluster node.
const roleEnv = "REACTORD_TEST_ROLE"

// binPath is this test binary, reactord when run by a test.
var binPath string

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "natsnode":
		natsNode(os.Args[1:])
		return
	case "storetags":
		storeTags(os.Args[1:])
		return
	}
	if !slices.ContainsFunc(os.Args[1:], func(a string) bool { return strings.HasPrefix(a, "-test.") }) {
		main()
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = self
	// The daemon tests spend their time waiting (on timers, the network,
	// other processes), not computing: more of them run at once than
	// go test's default of one per CPU, unless -parallel says otherwise.
	// Not under the race detector, which makes them compute: there, four
	// at once on two cores starved the timing of the replicas' debounce
	// and of progress acknowledgements (.ci/run's race pass).
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && !raceEnabled && runtime.GOMAXPROCS(0) < minParallel {
		_ = flag.Set("test.parallel", strconv.Itoa(minParallel))
	}
	os.Exit(m.Run())
}

// minParallel is the number of parallel tests run at once at least.
const minParallel = 4

// checkFor waits until fn returns nil, failing the test after timeout
// (wait.For).
func checkFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	wait.For(t, timeout, fn)
}

// freeAddr returns 127.0.0.1:PORT with a port no other role of the test
// process got (freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
}

// natsServer runs an embedded server and connects to it (natstest.Start).
func natsServer(t *testing.T) (*embedded.Server, *natsbus.Conn) { t.Helper(); return natstest.Start(t) }

// proc is a reactord under test: a process of its own (cmd set,
// startProcess) or run in the test process (stop set, startDaemon).
type proc struct {
	http   string // the --http address
	cmd    *exec.Cmd
	stop   context.CancelFunc
	out    *outPipe // in the test process: all of stdout
	stdout *bufio.Reader
	stderr *strings.Builder
	mu     *sync.Mutex
	done   chan error
}

// logWriter appends a process's stderr to its proc's logs.
type logWriter struct{ p *proc }

func (w logWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// terminate asks p to stop as SIGTERM does: the signal to a process, the
// cancel of run's context (what main makes of SIGTERM) in the test process.
func (p *proc) terminate() {
	if p.cmd == nil {
		p.stop()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
}

// startProcess runs the reactord binary with args and waits for /healthz:
// for the tests that kill it or signal it.
func startProcess(t *testing.T, args ...string) *proc {
	t.Helper()
	p := launchProcess(t, args...)
	waitHealthy(t, p)
	return p
}

// launchProcess starts the reactord binary with args (a data directory and
// --http added, daemonArgs) without waiting for it to be healthy.
func launchProcess(t *testing.T, args ...string) *proc {
	t.Helper()
	args = daemonArgs(t, args)
	cmd := exec.Command(binPath, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	// Wait returns once stderr is copied to its end, so the last lines (a
	// stop's report) are in p.logs() when done says the process ended;
	// at most WaitDelay after it, should a child of reactord keep the
	// pipe open.
	cmd.Stderr = logWriter{p}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if strings.Contains(p.logs(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in reactord %v", args)
		}
		if t.Failed() {
			t.Logf("reactord %v logs:\n%s", args, p.logs())
		}
	})
	waitServing(t, p, args)
	return p
}

func copyExampleConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("../../reactor.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../..")
	conf := strings.ReplaceAll(string(src), "- examples/", "- "+abs+"/examples/")
	p := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func startEvent(id string) []byte {
	return []byte(`{"tag": "salt/minion/` + id + `/start", "data": {"id": "` + id + `", "cmd": "_minion_event"}}`)
}

// TestDryRunStreamsReactions: --dry-run prints each reaction as one JSON
// line as it happens, reload keeps the old configuration when the new one
// is broken, and SIGTERM exits 0.
func TestDryRunStreamsReactions(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	p := startProcess(t, "-c", conf, "--dry-run", "--nats", srv.ClientURL())
	readLine := func() map[string]any {
		t.Helper()
		type res struct {
			line string
			err  error
		}
		ch := make(chan res, 1)
		go func() { l, err := p.stdout.ReadString('\n'); ch <- res{l, err} }()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("reading stdout: %v", r.err)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(r.line), &v); err != nil {
				t.Fatalf("line %q: %v", r.line, err)
			}
			return v
		case <-time.After(10 * time.Second):
			t.Fatal("no reaction line within 10s")
		}
		return nil
	}
	for _, id := range []string{"web1", "web2"} {
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id)}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
		v := readLine()
		chunk, _ := v["chunk"].(map[string]any)
		if v["tag"] != "salt/minion/"+id+"/start" || chunk["tgt"] != id || chunk["fun"] != "state.apply" {
			t.Fatalf("line = %v", v)
		}
	}
	// A broken configuration is refused on SIGHUP; the old one keeps running.
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'x': [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logs(), "reload failed; keeping the running configuration") {
			return errors.New("no reload failure logged")
		}
		return nil
	})
	_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web3/start", Body: startEvent("web3")}, natsbus.Core)
	if v := readLine(); v["tag"] != "salt/minion/web3/start" {
		t.Fatalf("after failed reload: %v", v)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

// collectExec counts the reactions the nats driver publishes, per event
// minion and per publishing process.
type collectExec struct {
	mu       sync.Mutex
	byMinion map[string]int
	byOrigin map[string]int
	total    int
	// catchUp, when set, counts what arrived since the last snapshot
	// (collectStored); snapshots are taken from one goroutine.
	catchUp func()
}

func collect(t *testing.T, c *natsbus.Conn, prefix string) *collectExec {
	t.Helper()
	ce := &collectExec{byMinion: map[string]int{}, byOrigin: map[string]int{}}
	sub, err := c.SubscribeRaw(prefix+">", func(subject string, body []byte, meta natsbus.Meta) {
		ce.add(body, meta.Origin)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Stop)
	_ = c.Flush(context.Background())
	return ce
}

// add counts one reaction the nats driver published.
func (ce *collectExec) add(body []byte, origin string) {
	var v struct {
		Chunk struct {
			Tgt string `json:"tgt"`
		} `json:"chunk"`
	}
	_ = json.Unmarshal(body, &v)
	ce.mu.Lock()
	ce.byMinion[v.Chunk.Tgt]++
	ce.byOrigin[origin]++
	ce.total++
	ce.mu.Unlock()
}

// collectStored creates a stream (replicas copies) capturing the nats
// driver's subjects under prefix, so that the driver publishes its
// reactions to JetStream, and counts what the stream holds: each snapshot
// first reads the messages stored since the last one (a direct get per
// message, which any node with a copy answers; one that fails leaves the
// rest to the next snapshot). A core subscriber can miss a reaction a
// dying node confirmed and had not routed yet: the stream cannot.
func collectStored(t *testing.T, js jetstream.JetStream, prefix string, replicas int) *collectExec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST_EXEC", Subjects: []string{prefix + ">"}, Storage: jetstream.FileStorage,
		Replicas: replicas, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	ce := &collectExec{byMinion: map[string]int{}, byOrigin: map[string]int{}}
	next := uint64(1)
	ce.catchUp = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "TEST_EXEC")
		if err != nil {
			return
		}
		for last := s.CachedInfo().State.LastSeq; next <= last; next++ {
			m, err := s.GetMsg(ctx, next)
			if err != nil {
				return
			}
			ce.add(m.Data, m.Header.Get(natsbus.HeaderOrigin))
		}
	}
	return ce
}

func (ce *collectExec) snapshot() (total, distinct int, origins map[string]int, dups int) {
	if ce.catchUp != nil {
		ce.catchUp()
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	origins = map[string]int{}
	for k, v := range ce.byOrigin {
		origins[k] = v
	}
	for _, n := range ce.byMinion {
		if n > 1 {
			dups += n - 1
		}
	}
	return ce.total, len(ce.byMinion), origins, dups
}

// TestCoreQueueGroupSplitsLoad: two replicas in core mode share the events
// (queue group) and none is handled twice.
func TestCoreQueueGroupSplitsLoad(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	ce := collect(t, c, "test.exec.")
	var replicas []*proc
	for range 2 {
		replicas = append(replicas, startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "nats", "--exec-subject", "test.exec."))
	}
	const n = 2000
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id)}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
	}
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < n {
			return fmt.Errorf("%d of %d reactions", total, n)
		}
		return nil
	})
	total, distinct, _, dups := ce.snapshot()
	if total != n || distinct != n || dups != 0 {
		t.Fatalf("total %d distinct %d duplicates %d, want %d each and no duplicates", total, distinct, dups, n)
	}
	// Each replica's own count (they share a process, so the reactions'
	// origin, reactord-PID, does not tell them apart).
	var split []string
	for _, p := range replicas {
		got := metricValue(t, scrape(t, p), `reactord_actions_total{driver="nats",state="dispatched"}`)
		if got == "0" || got == "" {
			t.Fatalf("a replica dispatched %q reactions: the queue group did not split the load", got)
		}
		split = append(split, got)
	}
	t.Logf("queue group split: %v", split)
}

// TestJetStreamSurvivesSIGKILL: two replicas on one durable consumer; one
// is killed with SIGKILL mid-stream. Every event is still acted on, and the
// only events acted on twice are the ones in flight at the kill.
func TestJetStreamSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	ce := collect(t, c, "test.exec.")
	args := []string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--ack-wait", "1s", "--queue", "64", "--driver", "nats", "--exec-subject", "test.exec."}
	victim := startProcess(t, args...)
	startDaemon(t, args...)
	ctx := context.Background()
	const n = 4000
	go func() {
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < n/4 {
			return fmt.Errorf("%d reactions so far", total)
		}
		return nil
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt, _, _, _ := ce.snapshot()
	checkFor(t, 60*time.Second, func() error {
		if _, distinct, _, _ := ce.snapshot(); distinct < n {
			return fmt.Errorf("%d of %d events acted on", distinct, n)
		}
		return nil
	})
	waitSettled(t, srv.ClientURL(), 30*time.Second) // late redeliveries would show up as duplicates
	total, distinct, origins, dups := ce.snapshot()
	// In flight at the kill: at most the consumer's MaxAckPending
	// messages delivered to the victim and not yet acknowledged.
	if bound := daemon.MaxAckPending(64, 8); distinct != n || dups > bound {
		t.Fatalf("distinct %d (want %d), duplicates %d (want at most %d in flight)", distinct, n, dups, bound)
	}
	t.Logf("killed after %d reactions; total %d, duplicates (in flight at the kill) %d, by replica %v", killedAt, total, dups, origins)
}

// TestEventsCommandFormat: `reactord events` prints TAG<tab>JSON indented
// by 4 with sorted keys, filtered by a Salt glob.
func TestEventsCommandFormat(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	events := goRun(t, "events", "--nats", srv.ClientURL(), "--count", "1", "salt/minion/*/start")
	// Publish until the subscriber is up: the first matching event it sees
	// ends it.
	stop := make(chan struct{})
	go func() {
		for {
			_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/auth", Body: []byte(`{"tag": "salt/auth", "data": {"id": "x"}}`)}, natsbus.Core)
			_ = c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web1/start", Body: []byte(`{"tag": "salt/minion/web1/start", "data": {"id": "web1", "cmd": "_minion_event"}}`)}, natsbus.Core)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer close(stop)
	got, err := io.ReadAll(events.stdout)
	if err != nil {
		t.Fatal(err)
	}
	want := "salt/minion/web1/start\t{\n    \"cmd\": \"_minion_event\",\n    \"id\": \"web1\"\n}\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestReloadOnFileChangeAndDeadLetter: editing the configuration adds a rule
// without a restart, and a reaction whose driver fails lands on the
// dead-letter subject.
func TestReloadOnFileChangeAndDeadLetter(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	sls := filepath.Join(dir, "r.sls")
	if err := os.WriteFile(sls, []byte("r:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'a/*': r.sls\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := make(chan string, 10)
	sub, err := c.SubscribeRaw("reactord.deadletter", func(_ string, body []byte, _ natsbus.Meta) { dead <- string(body) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	_ = c.Flush(context.Background())
	failing := filepath.Join(dir, "salt")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'ERROR: no such target' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--driver", "exec", "--salt-bin", failing)
	// A rule for b/* appears in the file: the daemon notices within ~2s
	// (by its content hash too, whatever the file times' granularity).
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'a/*': r.sls\n  - 'b/*': r.sls\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logs(), "configuration reloaded") {
			return errors.New("not reloaded yet")
		}
		return nil
	})
	if err := c.Publish(context.Background(), natsbus.Msg{Tag: "b/1", Body: []byte(`{"tag": "b/1", "data": {"id": "web9"}}`)}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-dead:
		if !strings.Contains(body, `"tag":"b/1"`) || !strings.Contains(body, `"tgt":"web9"`) || !strings.Contains(body, "no such target") {
			t.Fatalf("dead letter = %s", body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no dead letter")
	}
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// waitSettled waits until every consumer of the event stream on the NATS
// server(s) at url has nothing left to deliver and nothing delivered but
// unacknowledged: the server will deliver no event again, so a duplicate
// that has not shown by then never comes (no fixed wait of an ack-wait).
func waitSettled(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	checkFor(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "REACTORD_EVENTS")
		if err != nil {
			return err
		}
		consumers := s.ListConsumers(ctx)
		n := 0
		for info := range consumers.Info() {
			n++
			if info.NumPending > 0 || info.NumAckPending > 0 {
				return fmt.Errorf("consumer %s: %d events to deliver, %d unacknowledged", info.Name, info.NumPending, info.NumAckPending)
			}
		}
		if err := consumers.Err(); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the event stream has no consumer")
		}
		return nil
	})
}
