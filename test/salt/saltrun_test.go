package salt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/natsbus"
)

// saltRun runs salt-run --out json FUN ARGS... on e and decodes its
// answer.
func saltRun(t *testing.T, e *saltEnv, args ...string) any {
	t.Helper()
	start := time.Now()
	out, err := e.salt("salt-run", append([]string{"--out", "json"}, args...)...)
	t.Logf("salt-run %v: %v", args, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("salt-run %v: %v\n%s", args, err, out)
	}
	// salt-run prints the request event it fires first (Salt's print
	// of its job's events), then the answer.
	var v any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("salt-run %v: %v\n%s", args, err, out)
		}
	}
	return v
}

// listed says whether salt-run reactor.list's answer holds {glob: [file]}.
func listed(v any, glob, file string) bool {
	list, _ := v.([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if files, ok := m[glob].([]any); ok && len(files) == 1 && files[0] == file {
			return true
		}
	}
	return false
}

// TestSaltRunReactorOnRealSalt runs salt-run reactor.list, add, delete,
// is_leader and set_leader on a real master whose reactord Salt engine
// hands them to reactord (engines: [reactord], no Salt reactor): the
// answers have Salt's shapes, an added rule reacts, a paused master's
// events do not, the changes survive a restart of reactord and a second
// replica has them, and a request with a wrong key is discarded.
func TestSaltRunReactorOnRealSalt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runner := filepath.Join(dir, "runner.sls")
	writeFile(t, runner, "runner_{{ data['n'] }}:\n  runner.test.arg:\n    - args:\n      - {{ tag }}\n")
	conf := filepath.Join(dir, "conf.sls")
	writeFile(t, conf, "conf_{{ data['n'] }}:\n  runner.test.arg:\n    - args:\n      - {{ tag }}\n")
	e := startSalt(t, saltOptions{noMinions: true, noAPI: true,
		masterExtra: "engines_dirs:\n  - " + filepath.Join(rootDir(), "salt-engine") + "\nengines:\n  - reactord\n"})
	waitEngine(t, e)
	r := startReactordRules(t, e, "master", filepath.Join(rootDir(), "examples/reactor/revert-on-inotify/revert.sls"),
		"  - 'myco/conf/*':\n    - "+conf+"\n", "--no-loop-guard")
	daemonArgs := []string{"-c", r.conf, "--listen", strings.TrimPrefix(r.url, "nats://"), "--data-dir", r.data, "--driver", "master", "--http", r.http,
		"--salt-config-dir", e.etc, "--salt-run-bin", e.bin("salt-run"), "--salt-call-bin", e.bin("salt-call"), "--no-loop-guard"}
	t.Cleanup(func() {
		// How long reactord took to answer, as the engine measured it
		// (salt-run's own start is most of each command's time).
		b, _ := os.ReadFile(filepath.Join(e.dir, "log", "master"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "answered by reactord in") {
				t.Log(l)
			}
		}
	})
	reacted := func(tag string) bool {
		return len(r.seen(func(ev event.Event) bool {
			return strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "runner.test.arg" &&
				strings.Contains(fmt.Sprint(ev.Data["fun_args"]), tag)
		})) > 0
	}

	// The first salt-run on a loaded machine may outlast its two minutes
	// (a master still starting its workers): try again.
	var list any
	waitFor(t, 6*time.Minute, "a first salt-run reactor.list", func() error {
		start := time.Now()
		out, err := e.salt("salt-run", "--out", "json", "reactor.list")
		t.Logf("salt-run reactor.list: %v", time.Since(start).Round(time.Millisecond))
		if err != nil {
			return err
		}
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			if err := dec.Decode(&list); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
		}
		return nil
	})
	if !listed(list, "myco/conf/*", conf) {
		t.Fatalf("reactor.list: %v, want {myco/conf/*: [%s]} among them", list, conf)
	}
	got := saltRun(t, e, "reactor.add", "myco/added/*", "reactors="+runner)
	if m, _ := got.(map[string]any); m["status"] != true || m["comment"] != "Reactor added." {
		t.Fatalf("reactor.add: %v, want Salt's {status: true, comment: Reactor added.}", got)
	}
	got = saltRun(t, e, "reactor.add", "myco/added/*", "reactors="+runner)
	if m, _ := got.(map[string]any); m["status"] != false || m["comment"] != "Reactor already exists." {
		t.Errorf("reactor.add again: %v, want Salt's {status: false, comment: Reactor already exists.}", got)
	}
	pushEvents(t, e.sockDir, []event.Event{{Tag: "myco/added/1", Data: map[string]any{"n": 1}}})
	waitFor(t, 60*time.Second, "the added rule's runner", func() error {
		if !reacted("myco/added/1") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	got = saltRun(t, e, "reactor.delete", "myco/conf/*")
	if m, _ := got.(map[string]any); m["status"] != true || m["comment"] != "Reactor deleted." {
		t.Errorf("reactor.delete: %v, want Salt's {status: true, comment: Reactor deleted.}", got)
	}
	got = saltRun(t, e, "reactor.delete", "myco/nosuch/*")
	if m, _ := got.(map[string]any); m["status"] != false || m["comment"] != "Reactor does not exists." {
		t.Errorf("reactor.delete of no rule: %v, want Salt's {status: false, comment: Reactor does not exists.}", got)
	}

	t.Run("leader", func(t *testing.T) {
		if got := saltRun(t, e, "reactor.is_leader"); got != true {
			t.Fatalf("reactor.is_leader: %v, want true", got)
		}
		if got := saltRun(t, e, "reactor.set_leader", "False"); got != false {
			t.Fatalf("reactor.set_leader False: %v, want false", got)
		}
		if got := saltRun(t, e, "reactor.is_leader"); got != false {
			t.Errorf("reactor.is_leader after set_leader False: %v, want false", got)
		}
		pushEvents(t, e.sockDir, []event.Event{{Tag: "myco/added/2", Data: map[string]any{"n": 2}}})
		holds(t, 8*time.Second, "no reaction while paused", func() error {
			if reacted("myco/added/2") {
				return fmt.Errorf("reacted while paused")
			}
			return nil
		})
		if !strings.Contains(r.log(), "reactions paused") {
			t.Errorf("reactord did not log the pause")
		}
		if got := saltRun(t, e, "reactor.set_leader", "True"); got != true {
			t.Fatalf("reactor.set_leader True: %v, want true", got)
		}
		pushEvents(t, e.sockDir, []event.Event{{Tag: "myco/added/3", Data: map[string]any{"n": 3}}})
		waitFor(t, 60*time.Second, "a reaction once resumed", func() error {
			if !reacted("myco/added/3") {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	})

	t.Run("wrong key", func(t *testing.T) {
		pushEvents(t, e.sockDir, []event.Event{{Tag: "salt/run/1/salt/reactors/manage/add",
			Data: map[string]any{"key": "forged", "event": "myco/forged/*", "reactors": []any{runner}}}})
		waitFor(t, 30*time.Second, "the engine's refusal in the master's log", func() error {
			b, _ := os.ReadFile(filepath.Join(e.dir, "log", "master"))
			if !strings.Contains(string(b), "without matching master_key") {
				return fmt.Errorf("not logged yet")
			}
			return nil
		})
		if list := saltRun(t, e, "reactor.list"); strings.Contains(fmt.Sprint(list), "myco/forged") {
			t.Errorf("a request with a wrong key added a rule: %v", list)
		}
	})

	t.Run("restart and a second replica", func(t *testing.T) {
		daemon := r.pids[0]
		_ = syscall.Kill(daemon, syscall.SIGTERM)
		waitFor(t, 30*time.Second, "reactord's stop", func() error {
			// Stopped once a zombie (the test's cleanup reaps it) or gone.
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", daemon))
			if err == nil && !strings.Contains(string(b), ") Z ") {
				return fmt.Errorf("still running")
			}
			return nil
		})
		r.run(daemonArgs...)
		waitFor(t, 60*time.Second, "reactord ready again", func() error {
			if strings.Count(r.log(), "reactord ready") < 2 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		list := saltRun(t, e, "reactor.list")
		if !listed(list, "myco/added/*", runner) || listed(list, "myco/conf/*", conf) {
			t.Errorf("reactor.list after a restart: %v, want myco/added/* and not myco/conf/*", list)
		}
		second := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		r.run("-c", r.conf, "--nats", r.url, "--nats-token-file", natsbus.TokenFile(r.data), "--data-dir", filepath.Join(r.data, "second"),
			"--driver", "master", "--http", second, "--salt-config-dir", e.etc, "--salt-run-bin", e.bin("salt-run"), "--salt-call-bin", e.bin("salt-call"), "--no-loop-guard")
		waitFor(t, 60*time.Second, "the second replica's rules", func() error {
			out, err := exec.Command(reactordBin, "rules", "--http", second).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), "myco/added/* -> "+runner+" (salt-run reactor.add at ") || strings.Contains(string(out), "myco/conf/*") {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
	})
}
