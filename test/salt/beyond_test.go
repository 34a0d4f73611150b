package salt_test

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/event"
)

// TestBeyondSaltOnRealSalt runs reactord's own rule options on a real
// master through the master driver:
//
//   - concurrency: 1 over the whole estate: four events, each a 2 s
//     test.sleep on web1 or web2, run one at a time: no job is published
//     before the one before it returned;
//   - provenance: web2 sends salt/minion/web1/start through the master
//     (salt-call event.send): no highstate of web1; its own start does
//     highstate web2;
//   - retry: a state that fails on web1 runs 1 + 2 times, then gives up;
//   - collect: three events within the window make one job with all
//     three.
func TestBeyondSaltOnRealSalt(t *testing.T) {
	t.Parallel()
	e := startSalt(t)
	dir := t.TempDir()
	sleep := filepath.Join(dir, "sleep.sls")
	writeFile(t, sleep, "#!gotmpl|yaml\nsleep_{{ .data.n }}:\n  local.test.sleep:\n    - tgt: {{ .data.id }}\n    - args:\n      - length: 2\n")
	root, _ := filepath.Abs("../..")
	flaky := filepath.Join(dir, "flaky.sls")
	writeFile(t, flaky, "#!yaml\nflaky:\n  local.state.single:\n    - tgt: web1\n    - args:\n      - fun: test.fail_without_changes\n      - name: flaky\n")
	batch := filepath.Join(dir, "batch.sls")
	writeFile(t, batch, "batch:\n  local.test.arg:\n    - tgt: web2\n    - arg:\n      - \"{% for e in events %}{{ e.data.id }} {% endfor %}\"\n")
	r := startReactordRules(t, e, "master", root+"/examples/reactor/revert-on-inotify/revert.sls",
		"  - 'myco/deploy/*':\n      sls: "+sleep+"\n      concurrency: 1\n      key: '\"all\"'\n"+
			"  - 'myco/flaky':\n      sls: "+flaky+"\n      retry: {attempts: 2, backoff: 1s}\n"+
			"  - 'myco/batch/*':\n      sls: "+batch+"\n      collect: {within: 4s}\n")
	e.startMinions()
	waitFor(t, 120*time.Second, "minion keys accepted by the reactor", func() error {
		out, err := e.salt("salt", "--out", "json", "--static", "*", "test.ping")
		if err != nil || strings.Count(out, "true") < 2 {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})

	// Concurrency: four deploys pushed at once into the master's bus.
	c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pull.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"web1", "web2", "web1", "web2"} {
		data, _ := msgpack.Marshal(map[string]any{"id": id, "n": i, "_stamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000")})
		if _, err := c.Write(bridge.SaltFrame("myco/deploy/"+id, data)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	c.Close()
	sleeps := func() []event.Event {
		jids := map[string]bool{}
		return r.seen(func(ev event.Event) bool {
			jt, ok := event.ParseJobTag(ev.Tag)
			if !ok {
				return false
			}
			if strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "test.sleep" {
				jids[jt.JID] = true
				return true
			}
			_, isRet := jt.Return()
			return isRet && jids[jt.JID]
		})
	}
	waitFor(t, 90*time.Second, "four sleeps to run and return", func() error {
		if n := len(sleeps()); n != 8 {
			return fmt.Errorf("%d job events", n)
		}
		return nil
	})
	var order []string
	inFlight := 0
	for _, ev := range sleeps() {
		if strings.HasSuffix(ev.Tag, "/new") {
			inFlight++
			order = append(order, fmt.Sprint(ev.Data["tgt"]))
		} else {
			inFlight--
		}
		if inFlight > 1 {
			t.Errorf("two test.sleep jobs in flight at once: %v", sleeps())
			break
		}
	}
	// Lanes handle different minions side by side: the queue's order is
	// the order the events reached the rule, not necessarily the bus's.
	if strings.Count(fmt.Sprint(order), "web1") != 2 || strings.Count(fmt.Sprint(order), "web2") != 2 {
		t.Errorf("jobs ran for %v, want two for web1 and two for web2", order)
	}
	if !strings.Contains(r.log(), "event queued: the rule's concurrency limit is reached for its key") {
		t.Errorf("no event queued in the log:\n%s", r.log())
	}

	// Retry and collect: one failing state, three batch events.
	push := func(tag string, data map[string]any) {
		c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pull.ipc"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		data["_stamp"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000")
		b, _ := msgpack.Marshal(data)
		if _, err := c.Write(bridge.SaltFrame(tag, b)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	jobsOf := func(fun string) []event.Event {
		return r.seen(func(ev event.Event) bool { return strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == fun })
	}
	push("myco/flaky", map[string]any{"n": 1})
	for _, id := range []string{"b1", "b2", "b3"} {
		push("myco/batch/"+id, map[string]any{"id": id})
	}
	waitFor(t, 90*time.Second, "the failing state to run three times and give up", func() error {
		if n := len(jobsOf("state.single")); n != 3 || !strings.Contains(r.log(), "giving up") {
			return fmt.Errorf("%d state.single jobs", n)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the collected batch", func() error {
		if n := len(jobsOf("test.arg")); n != 1 {
			return fmt.Errorf("%d test.arg jobs", n)
		}
		return nil
	})
	holds(t, 5*time.Second, "no state.single job beyond 1 + 2 retries", func() error {
		if n := len(jobsOf("state.single")); n != 3 {
			return fmt.Errorf("%d state.single jobs, want 1 + 2 retries", n)
		}
		return nil
	})
	arg := fmt.Sprint(jobsOf("test.arg")[0].Data["arg"])
	for _, id := range []string{"b1", "b2", "b3"} {
		if !strings.Contains(arg, id) {
			t.Errorf("the collected job's arg %s lacks %s", arg, id)
		}
	}
	if n := len(jobsOf("test.arg")); n != 1 {
		t.Errorf("%d test.arg jobs, want one for the collection", n)
	}

	// Provenance: web2 claims web1's start, then sends its own.
	highstates := func(id string) int {
		return len(r.seen(func(ev event.Event) bool {
			return strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "state.apply" && fmt.Sprint(ev.Data["tgt"]) == id
		}))
	}
	before1, before2 := highstates("web1"), highstates("web2")
	minionConf := filepath.Join(e.dir, "minions", "web2", "etc")
	for _, tag := range []string{"salt/minion/web1/start", "salt/minion/web2/start"} {
		if out, err := e.saltAs("salt-call", minionConf, "event.send", tag); err != nil {
			t.Fatalf("salt-call event.send %s: %v %s", tag, err, out)
		}
	}
	waitFor(t, 60*time.Second, "web2's own start to highstate web2", func() error {
		if highstates("web2") <= before2 {
			return fmt.Errorf("no highstate of web2")
		}
		return nil
	})
	holds(t, 2*time.Second, "no highstate of web1 from web2's forged start", func() error {
		if n := highstates("web1"); n != before1 {
			return fmt.Errorf("web2's forged start of web1 highstated web1 (%d → %d)", before1, n)
		}
		return nil
	})
	if !strings.Contains(r.log(), "forged event: no reaction") {
		t.Errorf("the forged event is not in the log:\n%s", r.log())
	}
}
