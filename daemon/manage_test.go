package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// saltRunConf writes a configuration with one rule, myco/conf/*, and two
// reaction files (conf.sls, added.sls), and returns its path.
func saltRunConf(t *testing.T) (conf, added string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("conf.sls", "conf_{{ data['n'] }}:\n  local.test.arg:\n    - tgt: conf-{{ data['n'] }}\n")
	added = write("added.sls", "added_{{ data['n'] }}:\n  local.test.arg:\n    - tgt: added-{{ data['n'] }}\n")
	return write("reactor.conf", "reactor:\n  - 'myco/conf/*':\n    - conf.sls\n"), added
}

// answer asks d as a salt-run reactor.VERB request from master m1 would.
func answer(d *Daemon, verb string, data map[string]any) map[string]any {
	return d.manage(context.Background(), masterdriver.ManageRequest{ID: "1", Verb: verb, Data: data, Master: "m1"})
}

// result is an add or delete answer's {status, comment}.
func result(ans map[string]any) (bool, string) {
	r, _ := ans["result"].(map[string]any)
	s, _ := r["status"].(bool)
	c, _ := r["comment"].(string)
	return s, c
}

// globs lists a reactor.list answer's globs.
func globs(ans map[string]any) []string {
	var out []string
	for _, r := range ans["reactors"].([]map[string][]string) {
		for g := range r {
			out = append(out, g)
		}
	}
	return out
}

// TestSaltRunChanges: salt-run reactor.add and reactor.delete change the
// running rules with Salt's answers, an added rule reacts and /rules says
// where it comes from; the changes are in the NATS bucket, so that a
// second replica applies them as they come and a restarted daemon finds
// them; set_leader False pauses the master's reactions and is shared too.
func TestSaltRunChanges(t *testing.T) {
	srv, _ := natstest.Start(t)
	conf, added := saltRunConf(t)
	replica := func() (*Daemon, *syncbuf.Buffer, func() error) {
		o := testOptions(t)
		o.Config, o.NATS.URL, o.MasterID = conf, srv.ClientURL(), "m1"
		out := &syncbuf.Buffer{}
		o.Stdout = out
		d, stop := runDaemon(t, o)
		return d, out, stop
	}
	bus, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	publish := func(tag, data string) {
		t.Helper()
		if err := bus.Publish(context.Background(), natsbus.Msg{Tag: tag, Body: []byte(`{"tag": "` + tag + `", "data": ` + data + `}`)}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
	}
	d1, out1, stop1 := replica()
	d2, out2, _ := replica()
	for _, c := range []struct {
		verb, glob string
		status     bool
		comment    string
	}{
		{"add", "myco/added/*", true, saltAdded},
		{"add", "myco/added/*", false, saltExists},
		{"add", "myco/conf/*", false, saltExists},
		{"delete", "myco/conf/*", true, saltDeleted},
		{"delete", "myco/conf/*", false, saltNotExists},
		{"delete", "myco/nosuch/*", false, saltNotExists},
	} {
		ans := answer(d1, c.verb, map[string]any{"event": c.glob, "reactors": []any{added}})
		if s, cm := result(ans); s != c.status || cm != c.comment {
			t.Errorf("%s %s: %v %q, want %v %q", c.verb, c.glob, s, cm, c.status, c.comment)
		}
	}
	broken := filepath.Join(t.TempDir(), "broken.sls")
	if err := os.WriteFile(broken, []byte("x: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, cm := result(answer(d1, "add", map[string]any{"event": "myco/bad/*", "reactors": []any{broken}})); s || !strings.Contains(cm, "would not load") {
		t.Errorf("adding a file that does not load: %v %q, want refused", s, cm)
	}
	want := []string{"myco/added/*"}
	if g := globs(answer(d1, "list", nil)); !slices.Equal(g, want) {
		t.Errorf("list: %v, want %v", g, want)
	}
	publish("myco/added/7", `{"n": 7}`)
	wait.For(t, 10*time.Second, func() error { // either replica takes it
		if !strings.Contains(out1.String()+out2.String(), `"tgt":"added-7"`) {
			return fmt.Errorf("no reaction to myco/added/7")
		}
		return nil
	})
	rep := d1.rules.Report()
	if len(rep.Rules) != 1 || rep.Rules[0].Source != "salt-run reactor.add" || rep.Rules[0].AddedBy != "m1" || rep.Rules[0].AddedAt.IsZero() {
		t.Errorf("/rules: %+v, want the added rule alone, its source salt-run reactor.add", rep.Rules)
	}
	wait.For(t, 10*time.Second, func() error {
		if g := globs(answer(d2, "list", nil)); !slices.Equal(g, want) {
			return fmt.Errorf("second replica lists %v, want %v", g, want)
		}
		return nil
	})

	if ans := answer(d1, "set_leader", map[string]any{"id": "m1", "value": false}); ans["result"] != false {
		t.Errorf("set_leader False: %v", ans)
	}
	if ans := answer(d1, "set_leader", map[string]any{"id": "other", "value": true}); ans["result"] != false {
		t.Errorf("set_leader of another master changed this one's: %v", ans)
	}
	wait.For(t, 10*time.Second, func() error {
		if ans := answer(d2, "is_leader", nil); ans["result"] != false {
			return fmt.Errorf("second replica's is_leader: %v", ans)
		}
		return nil
	})
	publish("myco/added/8", `{"n": 8}`)
	wait.For(t, 10*time.Second, func() error {
		if n := counterValue(t, d1, "reactord_suppressed_total", "reason", "not_leader") + counterValue(t, d2, "reactord_suppressed_total", "reason", "not_leader"); n < 1 {
			return fmt.Errorf("not_leader suppressions: %v", n)
		}
		return nil
	})
	if strings.Contains(out1.String()+out2.String(), `"tgt":"added-8"`) {
		t.Error("reacted while paused")
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	d3, out3, _ := replica()
	if g := globs(answer(d3, "list", nil)); !slices.Equal(g, want) {
		t.Errorf("after a restart, list: %v, want %v", g, want)
	}
	if ans := answer(d3, "set_leader", map[string]any{"id": "m1", "value": true}); ans["result"] != true {
		t.Errorf("set_leader True: %v", ans)
	}
	publish("myco/added/9", `{"n": 9}`)
	wait.For(t, 10*time.Second, func() error { // either replica takes it
		if !strings.Contains(out2.String()+out3.String(), `"tgt":"added-9"`) {
			return fmt.Errorf("no reaction to myco/added/9 once resumed")
		}
		return nil
	})
}

// TestSaltRunChangesWithoutJetStream: on a NATS server without
// JetStream the changes are kept in the data directory and found again by
// the next start.
func TestSaltRunChangesWithoutJetStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1"}) // no DataDir: no JetStream
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conf, added := saltRunConf(t)
	o := testOptions(t)
	o.Config, o.NATS.URL, o.SharedState = conf, srv.ClientURL(), false
	d, stop := runDaemon(t, o)
	if s, cm := result(answer(d, "add", map[string]any{"event": "myco/added/*", "reactors": added})); !s {
		t.Fatalf("add: %q", cm)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(o.DataDir, ruleChangesFile)); err != nil {
		t.Fatalf("the changes' file: %v", err)
	}
	d, _ = runDaemon(t, o)
	if g := globs(answer(d, "list", nil)); !slices.Equal(g, []string{"myco/conf/*", "myco/added/*"}) {
		t.Errorf("after a restart, list: %v", g)
	}
}

// TestSaltRunChangeTooLate: a change that waited behind a reload past its
// deadline (shorter than the Salt engine's wait for the answer) is not
// made: salt-run is told to ask again, and no rule changes after the
// engine gave up on the answer.
func TestSaltRunChangeTooLate(t *testing.T) {
	srv, _ := natstest.Start(t)
	conf, added := saltRunConf(t)
	o := testOptions(t)
	o.Config, o.NATS.URL, o.MasterID = conf, srv.ClientURL(), "m1"
	d, _ := runDaemon(t, o)
	d.applyMu.Lock() // a reload in progress
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	got := make(chan map[string]any, 1)
	go func() {
		got <- d.manage(ctx, masterdriver.ManageRequest{ID: "1", Verb: "add", Data: map[string]any{"event": "myco/late/*", "reactors": []any{added}}, Master: "m1"})
	}()
	<-ctx.Done()
	d.applyMu.Unlock()
	if s, cm := result(<-got); s || !strings.Contains(cm, "ask again") {
		t.Errorf("a change past its deadline: %v %q, want refused", s, cm)
	}
	if g := globs(answer(d, "list", nil)); !slices.Equal(g, []string{"myco/conf/*"}) {
		t.Errorf("list after the late change: %v, want the configuration's rule alone", g)
	}
}
