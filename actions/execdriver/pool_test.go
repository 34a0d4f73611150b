package execdriver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// waitFor polls cond until it holds, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 5*time.Second, what, cond)
}

// concurrencyScript is a stand-in that notes how many copies of itself run
// at once (in counts), holds its slot for a moment, and prints body's job
// line.
func concurrencyScript(f *fakeSalt, body string) string {
	running, counts := shq(f.path("running")), shq(f.path("counts"))
	return "mkdir -p " + running + "\ntouch " + running + "/$$\nls " + running + " | wc -l >> " + counts +
		"\nsleep 0.3\nrm " + running + "/$$\n" + body
}

// peak is the most copies a concurrencyScript saw running at once.
func (f *fakeSalt) peak(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(f.path("counts"))
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, s := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
	}
	return most
}

// TestMaxProcs starts more reactions than MaxProcs at once: several
// programs run in parallel, never more than MaxProcs.
func TestMaxProcs(t *testing.T) {
	f := newFakeSalt(t)
	f.script(t, "salt-run", concurrencyScript(f, "echo 'running under tag salt/run/"+runnerJID+"' >&2\n"))
	cfg := f.config()
	cfg.MaxProcs = 3
	d := f.driver(t, cfg)
	var wg sync.WaitGroup
	for range 9 {
		wg.Go(func() {
			if res, err := do(d, chunk("runner", "manage.up")); err != nil || res.JID != runnerJID {
				t.Errorf("Do = %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if peak := f.peak(t); peak > 3 || peak < 2 {
		t.Fatalf("%d programs ran at once, want 2 or 3 (MaxProcs 3)", peak)
	}
}

// TestCallerHasItsOwnSlots: a salt-call running its function to the end
// does not hold up job starts.
func TestCallerHasItsOwnSlots(t *testing.T) {
	f := newFakeSalt(t)
	release := f.path("release")
	f.script(t, "salt-call", "touch "+shq(f.path("called"))+"\nwhile [ ! -e "+shq(release)+" ]; do sleep 0.01; done\necho 'local: True'\n")
	cfg := f.config()
	cfg.MaxProcs = 1
	d := f.driver(t, cfg)
	called := make(chan error, 1)
	go func() {
		_, err := do(d, chunk("caller", "state.apply"))
		called <- err
	}()
	defer os.WriteFile(release, nil, 0o600)
	waitFor(t, "salt-call to start", func() bool { _, err := os.Stat(f.path("called")); return err == nil })
	if res, err := do(d, chunk("local", "test.ping", "tgt", "web1")); err != nil || res.JID != localJID {
		t.Fatalf("salt while salt-call runs: %+v, %v", res, err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-called; err != nil {
		t.Fatal(err)
	}
}

// gatedSalt makes salt note each command line (one a line, in calls),
// hold the run targeting "blocker" until release exists, and print a job
// ID of its own.
func gatedSalt(t *testing.T, f *fakeSalt, extra string) {
	f.script(t, "salt", "echo \"$*\" >> "+shq(f.path("calls"))+"\n"+
		"case \" $* \" in *' blocker '*) while [ ! -e "+shq(f.path("release"))+" ]; do sleep 0.01; done;; esac\n"+
		extra+
		"echo \"Executed command with job ID: 20261122$(printf %012d $$)\"\n")
}

func (f *fakeSalt) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.path("calls"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

type outcome struct {
	res actions.Result
	err error
}

// lineUp runs a reaction targeting "blocker", which holds the only slot
// (MaxProcs 1), queues rest in order behind it, releases the blocker and
// returns rest's outcomes.
func lineUp(t *testing.T, f *fakeSalt, d *execdriver.Driver, rest []*event.Chunk) []outcome {
	t.Helper()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer os.WriteFile(f.path("release"), nil, 0o600)
	wg.Go(func() {
		if _, err := do(d, chunk("local", "test.ping", "tgt", "blocker")); err != nil {
			t.Errorf("blocker: %v", err)
		}
	})
	waitFor(t, "the blocker to run", func() bool { _, err := os.Stat(f.path("calls")); return err == nil })
	outs := make([]outcome, len(rest))
	for i, c := range rest {
		wg.Go(func() { outs[i].res, outs[i].err = do(d, c) })
		waitFor(t, fmt.Sprintf("%d queued reactions", i+1), func() bool { return d.Queued() == i+1 })
	}
	if err := os.WriteFile(f.path("release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return outs
}

func apply(tgt any, kv ...any) *event.Chunk {
	return chunk("local", "state.apply", append([]any{"tgt", tgt}, kv...)...)
}

// TestCoalescing lines local reactions up behind a busy slot and checks
// which of them share a salt run.
func TestCoalescing(t *testing.T) {
	withID := func(c *event.Chunk, id string) *event.Chunk {
		c.Set("__id__", id)
		c.Set("name", id)
		return c
	}
	cases := []struct {
		name        string
		maxCoalesce int
		rest        []*event.Chunk
		calls       []string // command lines after the blocker's
	}{
		{name: "literal globs share one run",
			rest:  []*event.Chunk{apply("m1"), apply("m2"), apply("m3")},
			calls: []string{"--async -L -- m1,m2,m3 state.apply"}},
		{name: "lists and globs share a run",
			rest:  []*event.Chunk{apply([]any{"m1", "m2"}, "tgt_type", "list"), apply("m3", "tgt_type", "glob"), apply("m4,m5", "tgt_type", "list")},
			calls: []string{"--async -L -- m1,m2,m3,m4,m5 state.apply"}},
		{name: "reaction ids naming the minion do not matter",
			rest:  []*event.Chunk{withID(apply("m1"), "apply m1"), withID(apply("m2"), "apply m2")},
			calls: []string{"--async -L -- m1,m2 state.apply"}},
		{name: "different arguments run apart",
			rest:  []*event.Chunk{apply("m1", "arg", []any{"x"}), apply("m2", "arg", []any{"z"}), apply("m3", "arg", []any{"x"})},
			calls: []string{"--async -L -- m1,m3 state.apply x", "--async -- m2 state.apply z"}},
		{name: "different kwarg run apart",
			rest:  []*event.Chunk{apply("m1", "kwarg", m("test", true)), apply("m2", "kwarg", m("test", false))},
			calls: []string{"--async -- m1 state.apply test=true", "--async -- m2 state.apply test=false"}},
		{name: "different returners run apart",
			rest:  []*event.Chunk{apply("m1", "ret", "mongo"), apply("m2"), apply("m3", "ret", "mongo")},
			calls: []string{"--async -L --return mongo -- m1,m3 state.apply", "--async -- m2 state.apply"}},
		{name: "other chunk keys must match",
			rest:  []*event.Chunk{apply("m1", "metadata", m("a", "1")), apply("m2", "metadata", m("a", "2"))},
			calls: []string{"--async -- m1 state.apply", "--async -- m2 state.apply"}},
		{name: "wildcards and other target types run alone",
			rest:  []*event.Chunk{apply("web*"), apply("m1"), apply("G@os:Debian", "tgt_type", "compound"), apply("m2"), apply("m[3]")},
			calls: []string{"--async -- web* state.apply", "--async -L -- m1,m2 state.apply", "--async -C -- G@os:Debian state.apply", "--async -- m[3] state.apply"}},
		{name: "a minion twice gets two jobs",
			rest:  []*event.Chunk{apply("m1"), apply([]any{"m2", "m1"}, "tgt_type", "list"), apply("m2")},
			calls: []string{"--async -L -- m1,m2 state.apply", "--async -L -- m2,m1 state.apply"}},
		{name: "functions differ",
			rest:  []*event.Chunk{apply("m1"), chunk("local", "test.ping", "tgt", "m2")},
			calls: []string{"--async -- m1 state.apply", "--async -- m2 test.ping"}},
		{name: "MaxCoalesce caps a run", maxCoalesce: 2,
			rest:  []*event.Chunk{apply("m1"), apply("m2"), apply("m3")},
			calls: []string{"--async -L -- m1,m2 state.apply", "--async -- m3 state.apply"}},
		{name: "MaxCoalesce 1 turns it off", maxCoalesce: 1,
			rest:  []*event.Chunk{apply("m1"), apply("m2")},
			calls: []string{"--async -- m1 state.apply", "--async -- m2 state.apply"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSalt(t)
			gatedSalt(t, f, "")
			cfg := f.config()
			cfg.MaxProcs, cfg.MaxCoalesce = 1, tc.maxCoalesce
			d := f.driver(t, cfg)
			outs := lineUp(t, f, d, tc.rest)
			if got := f.calls(t)[1:]; !slices.Equal(got, tc.calls) {
				t.Fatalf("salt runs\n got %q\nwant %q", got, tc.calls)
			}
			jids := map[string]bool{}
			for i, out := range outs {
				if out.err != nil {
					t.Fatalf("reaction %d: %v", i, out.err)
				}
				jids[out.res.JID] = true
				// A reaction that shared a run reports its own
				// minions; one that ran alone reports none.
				if out.res.Minions != nil {
					want := ownIDs(tc.rest[i])
					if !reflect.DeepEqual(out.res.Minions, want) {
						t.Errorf("reaction %d: minions %q, want %q", i, out.res.Minions, want)
					}
				}
			}
			if len(jids) != len(tc.calls) {
				t.Errorf("%d distinct jids for %d salt runs", len(jids), len(tc.calls))
			}
		})
	}
}

func ownIDs(c *event.Chunk) []string {
	tgt, _ := c.Get("tgt")
	switch t := tgt.(type) {
	case string:
		return strings.Split(t, ",")
	case []any:
		var ids []string
		for _, e := range t {
			ids = append(ids, e.(string))
		}
		return ids
	}
	return nil
}

// TestSharedRunFailure: every reaction of a failed shared run gets its
// error, retryable exactly when a run of its own would have been.
func TestSharedRunFailure(t *testing.T) {
	cases := []struct {
		name  string
		fail  string
		msg   string
		retry bool
		is    error
	}{
		{"publish refused", "echo 'Failed to authenticate!' >&2; exit 1", "Failed to authenticate!", false, nil},
		{"master unreachable", "echo 'Salt request timed out. The master is not responding.' >&2; exit 2", "Salt request timed out", true, nil},
		{"no minion matched", "echo 'No minions matched the target. No command was sent, no jid was assigned.'; echo 'Executed command with job ID: 0'; exit 0", "no minions matched", false, execdriver.ErrNoMinions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSalt(t)
			gatedSalt(t, f, "case \"$*\" in *' -L '*) "+tc.fail+";; esac\n")
			cfg := f.config()
			cfg.MaxProcs = 1
			d := f.driver(t, cfg)
			outs := lineUp(t, f, d, []*event.Chunk{apply("m1"), apply("m2"), apply("m3")})
			if got := f.calls(t); len(got) != 2 {
				t.Fatalf("salt runs %q, want the blocker's and one shared", got)
			}
			for i, out := range outs {
				if out.err == nil || !strings.Contains(out.err.Error(), tc.msg) || !strings.Contains(out.err.Error(), "run shared by 3 reactions (-L m1,m2,m3)") {
					t.Fatalf("reaction %d: err %v, want %q from the shared run", i, out.err, tc.msg)
				}
				if actions.IsRetryable(out.err) != tc.retry {
					t.Errorf("reaction %d: retryable %v, want %v", i, actions.IsRetryable(out.err), tc.retry)
				}
				if tc.is != nil && !errors.Is(out.err, tc.is) {
					t.Errorf("reaction %d: %v is not %v", i, out.err, tc.is)
				}
			}
		})
	}
}

// TestCallerLeavesSharedRun: a reaction whose context ends during a shared
// run returns at once, not retryable; the run goes on for the others.
func TestCallerLeavesSharedRun(t *testing.T) {
	f := newFakeSalt(t)
	release2 := f.path("release2")
	gatedSalt(t, f, "case \"$*\" in *' -L '*) while [ ! -e "+shq(release2)+" ]; do sleep 0.01; done;; esac\n")
	cfg := f.config()
	cfg.MaxProcs = 1
	d := f.driver(t, cfg)
	defer os.WriteFile(f.path("release"), nil, 0o600)
	defer os.WriteFile(release2, nil, 0o600)

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _, _ = do(d, chunk("local", "test.ping", "tgt", "blocker")) })
	waitFor(t, "the blocker to run", func() bool { _, err := os.Stat(f.path("calls")); return err == nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		_, err := d.Do(ctx, actions.Action{Chunk: apply("m1")})
		left <- err
	}()
	waitFor(t, "m1 to queue", func() bool { return d.Queued() == 1 })
	stayed := make(chan outcome, 1)
	go func() {
		res, err := do(d, apply("m2"))
		stayed <- outcome{res, err}
	}()
	waitFor(t, "m2 to queue", func() bool { return d.Queued() == 2 })
	if err := os.WriteFile(f.path("release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the shared run", func() bool { return len(f.calls(t)) == 2 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) || actions.IsRetryable(err) || !strings.Contains(err.Error(), "stopped waiting") {
		t.Fatalf("canceled sharer: %v", err)
	}
	if err := os.WriteFile(release2, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := <-stayed
	if out.err != nil || !reflect.DeepEqual(out.res.Minions, []string{"m2"}) {
		t.Fatalf("remaining sharer: %+v, %v", out.res, out.err)
	}
}
