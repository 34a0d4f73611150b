// Package salt_test runs reactord against a real Salt master, two minions
// and salt-api, started from the Salt on PATH (or in $SALT_BIN_DIR) in a
// temporary directory. Without Salt it skips with one line. Each test has
// a Salt installation of its own (ports, sockets, keys and files), so the
// tests run side by side, as many as go test's -parallel allows (-parallel
// 1 runs them one after another); the storm and the survey, which measure,
// run alone before them. See docs/salt-compatibility.md, "Proven on a real
// Salt master".
package salt_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

var (
	reactordBin string
	saltBinDir  string
)

func TestMain(m *testing.M) {
	if dirs := os.Getenv("SALT_BIN_DIRS"); dirs != "" && os.Getenv("SALT_BIN_DIR") == "" {
		os.Exit(runMatrix(filepath.SplitList(dirs)))
	}
	saltBinDir = os.Getenv("SALT_BIN_DIR")
	if saltBinDir == "" {
		if p, err := exec.LookPath("salt-master"); err == nil {
			saltBinDir = filepath.Dir(p)
		}
	}
	if saltBinDir == "" {
		fmt.Println("skipping the real-Salt suite: no salt-master on PATH and SALT_BIN_DIR is unset (docs/salt-compatibility.md: Setting up Salt for the suite)")
		os.Exit(0)
	}
	for _, name := range []string{"salt-master", "salt-minion", "salt-syndic", "salt-api", "salt", "salt-run", "salt-call", "salt-key"} {
		if _, err := exec.LookPath(filepath.Join(saltBinDir, name)); err != nil {
			fmt.Fprintf(os.Stderr, "the real-Salt suite needs %s in %s: %v (docs/salt-compatibility.md: Setting up Salt for the suite)\n", name, saltBinDir, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "reactord-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reactordBin = filepath.Join(dir, "reactord")
	if out, err := exec.Command("go", "build", "-o", reactordBin, "../../cmd/reactord").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building reactord: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// saltEnv is one Salt installation under a temporary directory.
type saltEnv struct {
	t       *testing.T
	user    string // Salt's user:
	addr    string // the master's interface
	pub     int    // the master's publish_port
	ret     int    // the master's ret_port
	minions []string
	dir     string // root_dir
	etc     string // the master's config dir (-c)
	sockDir string
	// bridgeJobCache, when set, is the bridge's --job-cache instead of
	// the master's cachedir/jobs ("-": "", recovery off).
	bridgeJobCache string
	// bridgeSockDir, when set, is the sock_dir the bridge reads instead of
	// sockDir (a proxy the test can cut).
	bridgeSockDir string
	apiURL        string
	watch         map[string]string // minion → its inotify-watched file
	procs         []*exec.Cmd
	minionP       []*exec.Cmd
	master        *exec.Cmd
	exited        map[*exec.Cmd]chan struct{} // closed when the process was reaped
}

// stopGroup ends a Salt program and every process of its group: SIGTERM,
// and SIGKILL for what is left after grace (the process itself, or a
// worker that outlived it: on a loaded machine a master's MWorkerQueue
// sometimes ignores the SIGTERM its parent relays). It reports whether
// SIGKILL was needed.
func stopGroup(pid int, done <-chan struct{}, grace time.Duration) (killed bool) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		killed = true
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	deadline := time.Now().Add(grace)
	for syscall.Kill(-pid, 0) == nil {
		if time.Now().After(deadline) {
			killed = true
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			deadline = time.Now().Add(grace)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return killed
}

// restartMaster stops the master (and its workers) and starts it again.
func (e *saltEnv) restartMaster() {
	e.t.Helper()
	e.stopMaster()
	e.start("salt-master", "-c", e.etc, "-l", "error")
	e.master = e.procs[len(e.procs)-1]
}

func (e *saltEnv) bin(name string) string { return filepath.Join(saltBinDir, name) }

// freePort returns a port nothing listens on, never the same twice in one
// run (the master's publish and return ports, salt-api, reactord).
func freePort(t *testing.T) int { t.Helper(); return freeport.Port(t) }

// keepLogs copies the log files under root (the master's, salt-api's,
// the minions', and what each program printed) into a new directory it
// returns.
func keepLogs(root string) (string, error) {
	kept, err := os.MkdirTemp("", "reactord-e2e-salt-logs-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.HasPrefix(rel, "log"+string(filepath.Separator)) && filepath.Base(rel) != "log" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		dst := filepath.Join(kept, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	return kept, err
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// saltOptions vary startSalt.
type saltOptions struct {
	// minions are the minion ids (default web1, web2).
	minions []string
	// masterExtra is appended to the master's configuration.
	masterExtra string
	// minionExtra is appended to each minion's configuration.
	minionExtra string
	// noMinions writes no minion (addMinion adds them, under several
	// masters); noAPI starts no salt-api.
	noMinions, noAPI bool
	// masterOverride, when set, is written to the master's
	// master.d/override.conf before it starts: Salt merges the included
	// file over the master file, so its keys replace startSalt's
	// (interface, root_dir, cachedir).
	masterOverride string
	// keysOf, when set, is a master whose key pair this master takes
	// before it starts: the masters of a multi-master Salt share one, as
	// a minion keeps a single minion_master.pub.
	keysOf *saltEnv
	// addr is the address the master listens on (default 127.0.0.1;
	// another loopback address lets two masters share a publish port);
	// pub, when not zero, is its publish_port.
	addr string
	pub  int
}

// netapiConfig is the master's configuration section for salt-api's
// server, on 127.0.0.1:port without TLS: rest_cherrypy, or rest_tornado
// when REACTORD_E2E_NETAPI=rest_tornado (one process, as Salt's default
// num_processes).
func netapiConfig(t *testing.T, port int) string {
	t.Helper()
	switch server := cmp.Or(os.Getenv("REACTORD_E2E_NETAPI"), "rest_cherrypy"); server {
	case "rest_cherrypy":
		return fmt.Sprintf("rest_cherrypy:\n  host: 127.0.0.1\n  port: %d\n  disable_ssl: True", port)
	case "rest_tornado":
		return fmt.Sprintf("rest_tornado:\n  address: 127.0.0.1\n  port: %d\n  disable_ssl: True\n  num_processes: 1", port)
	default:
		t.Fatalf("REACTORD_E2E_NETAPI=%q: want rest_cherrypy or rest_tornado", server)
		return ""
	}
}

// startSalt writes a master, minions (keys left pending: the reactor
// accepts them) and salt-api, and starts the master and salt-api in the
// foreground; startMinions starts the minions.
func startSalt(t *testing.T, opts ...saltOptions) *saltEnv {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: keep the root short.
	dir, err := os.MkdirTemp("", "rs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// Keep what Salt logged, for the failure's reader.
			if kept, err := keepLogs(dir); err == nil {
				t.Logf("Salt's logs kept in %s", kept)
			}
		}
		os.RemoveAll(dir)
	})
	var o saltOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if len(o.minions) == 0 {
		o.minions = []string{"web1", "web2"}
	}
	pub, ret, api := cmp.Or(o.pub, freePort(t)), freePort(t), freePort(t)
	addr := cmp.Or(o.addr, "127.0.0.1")
	user := "root"
	if os.Geteuid() != 0 {
		user = os.Getenv("USER")
	}
	e := &saltEnv{t: t, user: user, addr: addr, pub: pub, ret: ret, minions: o.minions, dir: dir, etc: filepath.Join(dir, "etc"), sockDir: filepath.Join(dir, "sock", "master"), watch: map[string]string{}}
	e.apiURL = fmt.Sprintf("http://127.0.0.1:%d", api)
	writeFile(t, filepath.Join(e.etc, "master"), fmt.Sprintf(`user: %[1]s
interface: %[8]s
ipv6: False
publish_port: %[2]d
ret_port: %[3]d
root_dir: %[4]s
pki_dir: %[4]s/pki/master
cachedir: %[4]s/cache/master
sock_dir: %[4]s/sock/master
pidfile: %[4]s/run/salt-master.pid
log_file: %[4]s/log/master
key_logfile: %[4]s/log/key
log_level_logfile: info
auto_accept: False
netapi_enable_clients: [local, local_async, runner, runner_async, wheel, wheel_async]
file_roots:
  base: [%[4]s/srv/salt]
external_auth:
  auto:
    %[1]s: ['.*', '@runner', '@wheel', '@jobs']
%[7]s
api_pidfile: %[4]s/run/salt-api.pid
api_logfile: %[4]s/log/api
%[6]s
`, user, pub, ret, dir, api, o.masterExtra, netapiConfig(t, api), addr))
	if o.masterOverride != "" {
		writeFile(t, filepath.Join(e.etc, "master.d", "override.conf"), o.masterOverride)
	}
	writeFile(t, filepath.Join(dir, "srv/salt/top.sls"), "base:\n  '*':\n    - trivial\n")
	writeFile(t, filepath.Join(dir, "srv/salt/trivial.sls"), "trivial_ok:\n  test.succeed_without_changes:\n    - name: trivial state\n")
	writeFile(t, filepath.Join(dir, "srv/salt/fail.sls"), "always_fails:\n  test.fail_without_changes:\n    - name: this state always fails\n")
	writeFile(t, filepath.Join(dir, "srv/salt/maintain_important_file.sls"),
		"revert_important_file:\n  file.managed:\n    - name: {{ salt['config.get']('reactord_watch_file') }}\n    - contents: known content\n")
	// The same revert through an orchestration, which the master runs as a
	// runner job with a minion job of its own.
	writeFile(t, filepath.Join(dir, "srv/salt/orch/revert.sls"),
		"revert_through_orchestration:\n  salt.state:\n    - tgt: {{ pillar['target'] }}\n    - sls: maintain_important_file\n")
	if !o.noMinions {
		for _, id := range o.minions {
			addMinion(e, id, []*saltEnv{e}, o.minionExtra)
		}
	} else {
		e.minions = nil
	}
	for _, d := range []string{"run", "log"} {
		_ = os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	if o.keysOf != nil {
		for _, name := range []string{"master.pem", "master.pub"} {
			b, err := os.ReadFile(filepath.Join(o.keysOf.dir, "pki", "master", name))
			if err != nil {
				t.Fatalf("the key pair of the master to share: %v", err)
			}
			writeFile(t, filepath.Join(dir, "pki", "master", name), string(b))
		}
		_ = os.Chmod(filepath.Join(dir, "pki", "master", "master.pem"), 0o400)
	}
	e.start("salt-master", "-c", e.etc, "-l", "error")
	e.master = e.procs[len(e.procs)-1]
	e.waitFor(180*time.Second, "the master's event socket", func() error {
		_, err := os.Stat(filepath.Join(e.sockDir, "master_event_pub.ipc"))
		return err
	})
	if o.noAPI {
		e.apiURL = ""
		return e
	}
	e.start("salt-api", "-c", e.etc, "-l", "error")
	// salt-api takes long to start on a loaded machine.
	e.waitFor(120*time.Second, "salt-api", func() error {
		resp, err := http.Get(e.apiURL + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return e
}

// addMinion writes minion id's configuration under e's directory, with
// masters as its master list (one: a plain master; several: host:port
// entries, hot multi-master unless extra says master_type), and adds it
// to e's minions, which e.startMinions starts. web1's beacon pauses during
// state runs (Salt's own protection); web2's does not, so its revert's own
// write comes back as a beacon event, which only reactord's loop guard
// stops.
func addMinion(e *saltEnv, id string, masters []*saltEnv, extra string) {
	e.t.Helper()
	m := filepath.Join(e.dir, "minions", id)
	watch := filepath.Join(e.dir, "watch", id, "important_file")
	e.watch[id] = watch
	writeFile(e.t, watch, "known content\n")
	master := fmt.Sprintf("master: %s\nmaster_port: %d\npublish_port: %d", masters[0].addr, masters[0].ret, masters[0].pub)
	if len(masters) > 1 {
		// publish_port 4506 makes the minion take each master's own
		// publish port from its answer to the minion's sign-in, instead
		// of one publish_port (4505 by default) for all of them. Masters
		// on one publish port (on different addresses) are given it:
		// master_alive_interval looks for a connection to that port.
		pub := 4506
		if !slices.ContainsFunc(masters, func(ms *saltEnv) bool { return ms.pub != masters[0].pub }) {
			pub = masters[0].pub
		}
		master = fmt.Sprintf("publish_port: %d\nmaster:", pub)
		for _, ms := range masters {
			master += fmt.Sprintf("\n  - %s:%d", ms.addr, ms.ret)
		}
	}
	pause := map[string]string{"web2": "False"}
	writeFile(e.t, filepath.Join(m, "etc", "minion"), fmt.Sprintf(`id: %[1]s
user: %[2]s
%[3]s
ipv6: False
root_dir: %[4]s
pki_dir: %[5]s/pki
cachedir: %[5]s/cache
extension_modules: %[5]s/cache/extmods
sock_dir: %[5]s/sock
pidfile: %[4]s/run/salt-minion-%[1]s.pid
log_file: %[5]s/log
log_level_logfile: info
acceptance_wait_time: 2
reactord_watch_file: %[6]s
beacons:
  inotify:
    - files:
        %[6]s:
          mask: [modify]
    - disable_during_state_run: %[7]s
%[8]s
`, id, e.user, master, e.dir, m, watch, cmp.Or(pause[id], "True"), extra))
	if !slices.Contains(e.minions, id) {
		e.minions = append(e.minions, id)
	}
}

// stopMaster stops the master and its workers (SIGTERM, then SIGKILL
// after 30s); startMaster starts it again on the same configuration.
func (e *saltEnv) stopMaster() {
	e.t.Helper()
	if stopGroup(e.master.Process.Pid, e.exited[e.master], 30*time.Second) {
		e.t.Logf("the master's processes needed SIGKILL to stop")
	}
}

// killMaster ends the master and its workers at once with SIGKILL, as a
// crash or a power loss would.
func (e *saltEnv) killMaster() {
	e.t.Helper()
	_ = syscall.Kill(-e.master.Process.Pid, syscall.SIGKILL)
	stopGroup(e.master.Process.Pid, e.exited[e.master], 5*time.Second)
}

// startMaster starts the master stopped by stopMaster or killMaster and
// waits for its event socket.
func (e *saltEnv) startMaster() {
	e.t.Helper()
	e.start("salt-master", "-c", e.etc, "-l", "error")
	e.master = e.procs[len(e.procs)-1]
	e.waitFor(180*time.Second, "the master's event socket", func() error {
		c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pub.ipc"))
		if err == nil {
			c.Close()
		}
		return err
	})
}

// startMinions starts the minions; their keys go pending.
func (e *saltEnv) startMinions() {
	for _, id := range e.minions {
		e.start("salt-minion", "-c", filepath.Join(e.dir, "minions", id, "etc"), "-l", "error")
		e.minionP = append(e.minionP, e.procs[len(e.procs)-1])
	}
}

// stopMinions stops the minions; the master still publishes jobs for their
// accepted keys.
func (e *saltEnv) stopMinions() {
	for _, cmd := range e.minionP {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// restartMinion stops minion id (SIGTERM to its process group, so the
// jobs it runs die with it) and starts it again.
func (e *saltEnv) restartMinion(id string) {
	e.t.Helper()
	for i, m := range e.minions {
		if m != id || i >= len(e.minionP) {
			continue
		}
		cmd := e.minionP[i]
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.exited[cmd]:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-e.exited[cmd]
		}
		e.start("salt-minion", "-c", filepath.Join(e.dir, "minions", id, "etc"), "-l", "error")
		e.minionP[i] = e.procs[len(e.procs)-1]
		return
	}
	e.t.Fatalf("no running minion %s", id)
}

// start runs a Salt program in its own process group, killed at cleanup.
func (e *saltEnv) start(name string, args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.bin(name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(e.dir, "log", name+"-"+fmt.Sprint(len(e.procs))+".out"))
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("starting %s: %v", name, err)
	}
	e.procs = append(e.procs, cmd)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if e.exited == nil {
		e.exited = map[*exec.Cmd]chan struct{}{}
	}
	e.exited[cmd] = done
	e.t.Cleanup(func() {
		stopGroup(cmd.Process.Pid, done, 10*time.Second)
		logf.Close()
	})
}

// salt runs a Salt CLI against the master and returns what it printed on
// stdout, as a user's script reads it (runSalt).
func (e *saltEnv) salt(name string, args ...string) (string, error) {
	return e.runSalt(name, append([]string{"-c", e.etc}, args...))
}

// saltAs runs a Salt CLI with another configuration directory (a
// minion's, for salt-call).
func (e *saltEnv) saltAs(name, confDir string, args ...string) (string, error) {
	return e.runSalt(name, append([]string{"-c", confDir}, args...))
}

// runSalt runs one Salt CLI for at most two minutes. Its stdout is the
// result; its stderr is kept apart (Salt 3007.8's CLIs print asyncio's
// "Task was destroyed but it is pending!" there at exit, which a parser
// of the result must not see): it goes into the error when the command
// fails, and into the test's log when it succeeds.
func (e *saltEnv) runSalt(name string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, e.bin(name), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	errText := strings.TrimSpace(stderr.String())
	switch {
	case err != nil && errText != "":
		err = fmt.Errorf("%s %s: %w; stderr: %s", name, strings.Join(args, " "), err, errText)
	case err != nil:
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	case errText != "":
		e.t.Logf("%s %s: stderr: %s", name, strings.Join(args, " "), errText)
	}
	return stdout.String(), err
}

func (e *saltEnv) waitFor(d time.Duration, what string, f func() error) {
	e.t.Helper()
	waitFor(e.t, d, what, f)
}

func waitFor(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	if err := wait.PollEvery(d, 200*time.Millisecond, f); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// holds checks f every 200ms for d: what must stay true (no second
// reaction) is watched for the whole window, not looked at once after it.
func holds(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-end:
			return
		case <-tick.C:
		}
	}
}

// reactord runs the daemon and the native bridge against e.
type reactord struct {
	t       *testing.T
	url     string // NATS
	data    string
	conf    string
	mu      sync.Mutex
	logs    strings.Builder
	http    string // the daemon's --http address
	bus     *natsbus.Conn
	evMu    sync.Mutex
	events  []event.Event
	eventAt []time.Duration // when each of events arrived, since started
	started time.Time
	eventCh chan struct{}
	// pids are the daemon's and the bridges' processes.
	pids []int
	// bridges counts the bridges started.
	bridges int
}

// startReactord writes a reactor configuration with the four recipes and
// starts the daemon with driver and the native bridge on e's socket.
func startReactord(t *testing.T, e *saltEnv, driver string, extra ...string) *reactord {
	t.Helper()
	root, _ := filepath.Abs("../..")
	return startReactordWith(t, e, driver, root+"/examples/reactor/revert-on-inotify/revert.sls", extra...)
}

// startReactordWith is startReactord with another reaction file for the
// watched file's beacon.
func startReactordWith(t *testing.T, e *saltEnv, driver, revert string, extra ...string) *reactord {
	t.Helper()
	return startReactordRules(t, e, driver, revert, "", extra...)
}

// startReactordRules is startReactordWith with more rules appended to the
// reactor: list (YAML list items, indented two spaces).
func startReactordRules(t *testing.T, e *saltEnv, driver, revert, rules string, extra ...string) *reactord {
	t.Helper()
	root, _ := filepath.Abs("../..")
	r := newReactord(t)
	watchGlob := filepath.Join(e.dir, "watch", "*", "important_file")
	writeFile(t, r.conf, fmt.Sprintf(`reactor:
  - 'salt/beacon/*/inotify/%s':
    - %[3]s
  - 'salt/minion/*/start':
    - %[2]s/examples/reactor/start-on-minion-start/highstate.sls
  - 'salt/auth':
    - %[2]s/examples/reactor/accept-pending-keys/accept.sls
  - 'salt/job/*/ret/*':
    - %[2]s/examples/reactor/alert-on-failed-job/alert.sls
%[4]s`, watchGlob, root, revert, rules))
	r.launch(e, nil, driver, extra...)
	return r
}

// newReactord returns a reactord whose configuration goes in r.conf.
func newReactord(t *testing.T) *reactord {
	r := &reactord{t: t, data: t.TempDir(), eventCh: make(chan struct{}, 1), started: time.Now()}
	r.conf = filepath.Join(r.data, "reactor.conf")
	return r
}

// launch starts the daemon on r.conf — `reactord CMD...` (nil: run) with
// driver — and the native bridge on e's socket, and follows the bus.
func (r *reactord) launch(e *saltEnv, cmd []string, driver string, extra ...string) {
	t := r.t
	t.Helper()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	r.url = "nats://" + listen
	r.http = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"-c", r.conf, "--listen", listen, "--data-dir", r.data, "--driver", driver, "--http", r.http}
	switch driver {
	case "exec":
		args = append(args, "--salt-bin", e.bin("salt"), "--salt-run-bin", e.bin("salt-run"), "--salt-call-bin", e.bin("salt-call"), "--salt-config-dir", e.etc)
	case "master":
		args = append(args, "--salt-config-dir", e.etc, "--salt-run-bin", e.bin("salt-run"), "--salt-call-bin", e.bin("salt-call"))
	case "saltapi":
		args = append(args, "--saltapi-url", e.apiURL, "--saltapi-user", "root", "--saltapi-password", "x", "--saltapi-eauth", "auto",
			"--salt-call-bin", e.bin("salt-call"))
	}
	r.run(append(append(cmd, args...), extra...)...)
	waitFor(t, 20*time.Second, "reactord's NATS server", func() error {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err
	})
	// The embedded server wants the token the daemon keeps in its data
	// directory.
	tokenFile := natsbus.TokenFile(r.data)
	r.runBridge(e, "bridge")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := natsbus.Connect(natsbus.ConnOptions{URL: r.url, Name: "e2e", Token: strings.TrimSpace(string(token))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	r.bus = bus
	if _, err := bus.Subscribe("", func(m *natsbus.Message) {
		ev, err := event.Decode(m.Body)
		if err != nil {
			return
		}
		r.evMu.Lock()
		r.events = append(r.events, ev)
		r.eventAt = append(r.eventAt, time.Since(r.started))
		r.evMu.Unlock()
		select {
		case r.eventCh <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("REACTORD_E2E_RECORD"); dir != "" {
		// Keep what reached the bus, as {"tag","data"} lines, for fixtures.
		t.Cleanup(func() {
			r.evMu.Lock()
			defer r.evMu.Unlock()
			var b strings.Builder
			for _, ev := range r.events {
				line, _ := json.Marshal(ev)
				b.Write(line)
				b.WriteByte('\n')
			}
			name := strings.ReplaceAll(t.Name(), "/", "-") + ".jsonl"
			_ = os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
				t.Errorf("recording: %v", err)
			}
		})
	}
	r.waitBridges(1)
}

// runBridge starts a native bridge on e's event socket into r's NATS,
// with its own data directory under r.data.
func (r *reactord) runBridge(e *saltEnv, dataDir string) {
	r.t.Helper()
	jobCache := cmp.Or(e.bridgeJobCache, filepath.Join(e.dir, "cache", "master", "jobs"))
	if jobCache == "-" {
		jobCache = ""
	}
	r.run("bridge", "--sock-dir", cmp.Or(e.bridgeSockDir, e.sockDir), "--job-cache", jobCache,
		"--nats", r.url, "--nats-token-file", natsbus.TokenFile(r.data), "--data-dir", filepath.Join(r.data, dataDir))
	r.bridges++
}

// waitBridges waits until n bridges said they reached their master's
// event bus.
func (r *reactord) waitBridges(n int) {
	r.t.Helper()
	waitFor(r.t, 20*time.Second, fmt.Sprintf("%d bridge(s) on their masters' buses", n), func() error {
		if got := strings.Count(r.log(), "connected to the master's event bus"); got < n {
			return fmt.Errorf("%d connected yet", got)
		}
		return nil
	})
}

// addBridge starts one more native bridge, on master e's event socket,
// into the daemon's NATS (one bridge per master of a multi-master or
// syndic topology), and waits for it to reach e's bus.
func (r *reactord) addBridge(e *saltEnv) {
	r.t.Helper()
	r.runBridge(e, fmt.Sprintf("bridge-%d", r.bridges))
	r.waitBridges(r.bridges)
}

func (r *reactord) run(args ...string) {
	r.t.Helper()
	cmd := exec.Command(reactordBin, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.pids = append(r.pids, cmd.Process.Pid)
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.logs.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
		}
	}()
	r.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if r.t.Failed() {
			r.t.Logf("reactord %v:\n%s", args[:min(2, len(args))], r.log())
			r.t.Logf("the bus, in order (time since reactord started, tag, how many in a row):\n%s", r.busSummary())
		}
	})
}

// metric reads a counter of the daemon's /metrics (0 when absent): the
// line of name itself, without labels.
func (r *reactord) metric(name string) int {
	return int(r.readMetric(name, false))
}

func (r *reactord) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// busSummary is the tags seen on the bus, in order, runs of one tag (jids
// and minion ids included) folded into one line with their count: what a
// failed test needs to tell a reaction never dispatched from one queued.
func (r *reactord) busSummary() string {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	var b strings.Builder
	for i := 0; i < len(r.events); {
		j := i
		for j < len(r.events) && r.events[j].Tag == r.events[i].Tag {
			j++
		}
		fmt.Fprintf(&b, "  %7.2fs %s", r.eventAt[i].Seconds(), r.events[i].Tag)
		if act, ok := r.events[i].Data["act"].(string); ok {
			fmt.Fprintf(&b, " act=%s", act)
		}
		if j-i > 1 {
			fmt.Fprintf(&b, " ×%d", j-i)
		}
		b.WriteByte('\n')
		i = j
	}
	return b.String()
}

// seen returns the events on the bus whose tag matches f.
func (r *reactord) seen(f func(event.Event) bool) []event.Event {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	var out []event.Event
	for _, ev := range r.events {
		if f(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// cli runs a reactord command (e.g. {"jobs", "lookup"}) with args against
// the daemon's store.
func (r *reactord) cli(cmd []string, args ...string) (string, error) {
	all := append(append(cmd, "--store", "sqlite://"+filepath.Join(r.data, "reactord.db")), args...)
	out, err := exec.Command(reactordBin, all...).CombinedOutput()
	return string(out), err
}
