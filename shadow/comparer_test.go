package shadow

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/scenarios")

// lag is how long after the master stamped an event or a job reactord
// receives it, in the scenarios.
const lag = 200 * time.Millisecond

// harness runs one scenario's steps against a Comparer and writes down
// what comes out of it (the golden text), and the verdicts and adoptions
// in short form (for the scenario's explicit expectations).
type harness struct {
	t       *testing.T
	c       *Comparer
	out     strings.Builder
	got     []string // "verdict event jid"
	adopted []string // "event jid"
}

func newHarness(t *testing.T, o Options) *harness {
	h := &harness{t: t}
	o.Adopt = func(d *Decision, j *Job) {
		h.adopted = append(h.adopted, d.EventID+" "+j.JID)
		fmt.Fprintf(&h.out, "  adopt event=%s jid=%s\n", d.EventID, j.JID)
	}
	o.Verdict = h.verdict
	h.c = New(o)
	return h
}

func (h *harness) verdict(v Verdict) {
	ev, jid := "-", "-"
	if v.Decision != nil {
		ev = v.Decision.EventID
	} else if v.Note != nil {
		ev = v.Note.EventID
	}
	if v.Job != nil {
		jid = v.Job.JID
	}
	h.got = append(h.got, v.Verdict+" "+ev+" "+jid)
	fmt.Fprintf(&h.out, "  verdict=%s rule=%q event=%s jid=%s\n", v.Verdict, v.Rule(), ev, jid)
	if v.Reason != "" {
		fmt.Fprintf(&h.out, "    reason: %s\n", v.Reason)
	}
	rec, err := json.Marshal(v.Record())
	if err != nil {
		h.t.Errorf("record of %s: %v", v.Verdict, err)
	}
	fmt.Fprintf(&h.out, "    record: %s\n", rec)
}

// clock writes t as an offset from t0.
func clock(t time.Time) string {
	switch d := t.Sub(t0); {
	case t.IsZero():
		return "-"
	case d < 0:
		return d.String()
	default:
		return "+" + d.String()
	}
}

// step is one thing that happens in a scenario.
type step func(h *harness)

// decide hands the comparer a decision.
func decide(d Decision) step {
	return func(h *harness) {
		held := ""
		if d.Held != "" {
			held = " held=" + d.Held
		}
		fmt.Fprintf(&h.out, "decided event=%s stamp=%s seen=%s %s %s%s\n", d.EventID, clock(d.Stamp), clock(d.Seen), d.Chunk.Str("state"), d.Chunk.Str("fun"), held)
		h.c.Decided(d)
	}
}

// dec is reactord's decision to run ch for event id, which the master
// stamped at s (reactord saw it lag later): a minion start event of web1.
func dec(id string, s time.Duration, ch *event.Chunk) Decision {
	return Decision{EventID: id, Tag: "salt/minion/web1/start", Minion: "web1", Stamp: at(s), Seen: at(s + lag),
		Rule: "salt/minion/*/start", RuleID: "r1", File: ch.Str("__sls__"), ReactionID: ch.Str("__id__"), Chunk: ch}
}

// held is d held back on purpose, with its verdict and explain's words.
func held(d Decision, verdict, why string) Decision {
	d.Held, d.Reason = verdict, why
	return d
}

// unstamped is d without the master's stamp.
func unstamped(d Decision) Decision {
	d.Stamp = time.Time{}
	return d
}

// salt hands the comparer the job event tag (data as JSON, without
// _stamp), which the master stamped at s (in Salt's form) and reactord
// saw lag later; the comparer must take it.
func salt(tag string, s time.Duration, data string) step {
	return saltJob(tag, &s, s+lag, data, true)
}

// saltUnstamped is salt for a job event without _stamp, seen at seen.
func saltUnstamped(tag string, seen time.Duration, data string) step {
	return saltJob(tag, nil, seen, data, true)
}

// ignored is salt for a job the comparer must refuse.
func ignored(tag string, s time.Duration, data string) step {
	return saltJob(tag, &s, s+lag, data, false)
}

// saltJob is salt for a job event stamped at *s (none when nil) and seen at
// seen, which the comparer must take or not.
func saltJob(tag string, s *time.Duration, seen time.Duration, raw string, taken bool) step {
	return func(h *harness) {
		h.t.Helper()
		d, err := event.DecodeData([]byte(raw))
		if err != nil {
			h.t.Fatalf("job %s: %v", tag, err)
		}
		if s != nil {
			d["_stamp"] = at(*s).Format("2006-01-02T15:04:05.000000")
		}
		j, ok := ParseJob(tag, d, at(seen))
		if !ok {
			h.t.Fatalf("ParseJob(%q) refused it", tag)
		}
		fmt.Fprintf(&h.out, "job jid=%s stamp=%s seen=%s %s %s user=%s\n", j.JID, clock(j.Stamp), clock(j.Seen), j.Kind, j.Fun, j.User)
		if got := h.c.Job(j); got != taken {
			h.t.Errorf("Job(%s) = %v, want %v", j.JID, got, taken)
		}
		if !taken {
			fmt.Fprintf(&h.out, "  ignored\n")
		}
	}
}

func ptr(d time.Duration) *time.Duration { return &d }

// noted hands the comparer a note: rule salt/minion/*/start matched event
// id of minion ("": an event of no minion), stamped at s, and did not
// react, because why.
func noted(id string, s time.Duration, minion, why string) step {
	return func(h *harness) {
		tag := "acme/deploy/done" // an event of no minion
		if minion != "" {
			tag = "salt/minion/" + minion + "/start"
		}
		n := Note{EventID: id, Tag: tag, Minion: minion, Stamp: at(s), Seen: at(s + lag),
			Rule: "salt/minion/*/start", Note: why}
		fmt.Fprintf(&h.out, "noted event=%s stamp=%s seen=%s minion=%s: %s\n", id, clock(n.Stamp), clock(n.Seen), minion, why)
		h.c.Noted(n)
	}
}

// expire calls Expire at t0+now.
func expire(now time.Duration) step {
	return func(h *harness) {
		fmt.Fprintf(&h.out, "expire now=%s\n", clock(at(now)))
		h.c.Expire(at(now))
	}
}

// setHold calls SetHold.
func setHold(d time.Duration) step {
	return func(h *harness) {
		fmt.Fprintf(&h.out, "hold %s\n", d)
		h.c.SetHold(d)
	}
}

// pending checks what is still unpaired.
func pending(decisions, jobs int) step {
	return func(h *harness) {
		h.t.Helper()
		d, j := h.c.Pending()
		fmt.Fprintf(&h.out, "pending decisions=%d jobs=%d\n", d, j)
		if d != decisions || j != jobs {
			h.t.Errorf("Pending() = %d, %d; want %d, %d", d, j, decisions, jobs)
		}
	}
}

// runnerDone hands the comparer runner jid's return, seen at t0+seen.
func runnerDone(jid string, seen time.Duration) step {
	return func(h *harness) {
		fmt.Fprintf(&h.out, "runner done jid=%s seen=%s\n", jid, clock(at(seen)))
		h.c.RunnerDone(jid, at(seen))
	}
}

// children checks how many jobs were taken as runners' own.
func children(n int) step {
	return func(h *harness) {
		h.t.Helper()
		got := h.c.Children()
		fmt.Fprintf(&h.out, "children=%d\n", got)
		if got != n {
			h.t.Errorf("Children() = %d, want %d", got, n)
		}
	}
}

// abandon calls Abandon and checks its counts.
func abandon(decisions, jobs int) step {
	return func(h *harness) {
		h.t.Helper()
		d, j := h.c.Abandon()
		fmt.Fprintf(&h.out, "abandon decisions=%d jobs=%d\n", d, j)
		if d != decisions || j != jobs {
			h.t.Errorf("Abandon() = %d, %d; want %d, %d", d, j, decisions, jobs)
		}
	}
}

// Reactions and jobs of the scenarios.
var (
	highstate    = func() *event.Chunk { return reaction("highstate", "local", "state.apply", "tgt", "web1") }
	highstateFor = func(tgt string) *event.Chunk { return reaction("highstate", "local", "state.apply", "tgt", tgt) }
	highstateJob = func(jid, tgt string) string {
		return `{"jid":"` + jid + `","tgt_type":"glob","tgt":"` + tgt + `","user":"root","fun":"state.apply","arg":[],"minions":["` + tgt + `"],"missing":[]}`
	}
	orchestrate = func() *event.Chunk {
		return reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x")})
	}
	orchestrateJob = func(jid string) string {
		return `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x"}],"jid":"` + jid + `","user":"Reactor"}`
	}
)

type scenario struct {
	name  string
	opts  Options
	steps []step
	// want is every verdict, in order, as "verdict event jid" ("-" for
	// none); adopted every adoption, as "event jid".
	want    []string
	adopted []string
}

func scenarios() []scenario {
	window := DefaultWindow
	expiry := DefaultWindow + DefaultGrace + lag // a decision or job stamped at 0 expires then
	ss := []scenario{
		{name: "exact-decision-first",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				pending(0, 0),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "exact-job-first",
			steps: []step{
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				pending(0, 1),
				decide(dec("ev1", 0, highstate())),
				pending(0, 0),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "exact-oldest-decision-first",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				decide(dec("ev2", time.Second, highstate())),
				salt("salt/job/j1/new", 2*time.Second, highstateJob("j1", "web1")),
				salt("salt/job/j2/new", 3*time.Second, highstateJob("j2", "web1")),
			},
			want: []string{"agree ev1 j1", "agree ev2 j2"}, adopted: []string{"ev1 j1", "ev2 j2"}},
		{name: "held-loop-paired",
			steps: []step{
				decide(held(dec("ev1", 0, highstate()), HeldLoop, "loop guard: the event is a consequence of job j0 of this reaction")),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			want: []string{"held-loop ev1 j1"}},
		{name: "held-loop-job-first",
			steps: []step{
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				decide(held(dec("ev1", 0, highstate()), HeldLoop, "loop guard: the event is a consequence of job j0 of this reaction")),
			},
			want: []string{"held-loop ev1 j1"}},
		{name: "held-unpaired",
			steps: []step{
				decide(held(dec("ev1", 0, highstate()), HeldLoop, "loop guard: the event is a consequence of job j0 of this reaction")),
				decide(held(dec("ev2", time.Second, orchestrate()), HeldHops, "hop limit: the event is 5 hops from its origin")),
				expire(expiry - time.Microsecond),
				expire(expiry),
				expire(expiry + time.Second),
				pending(0, 0),
			},
			want: []string{"agree ev1 -", "agree ev2 -"}},
		{name: "held-differ",
			steps: []step{
				decide(held(dec("ev1", 0, highstate()), HeldLoop, "loop guard: the event is a consequence of job j0 of this reaction")),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web2")),
				expire(expiry),
			},
			want: []string{"differ ev1 j1"}}, // Salt ran other arguments: the files differ
		{name: "differ-at-expiry",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web2")),
				pending(1, 1),
				expire(expiry - time.Microsecond),
				expire(expiry),
				pending(0, 0),
			},
			want: []string{"differ ev1 j1"}},
		{name: "differ-job-expires-first",
			steps: []step{
				salt("salt/run/j1/new", -time.Second, `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.y"}],"jid":"j1","user":"Reactor"}`),
				decide(dec("ev1", 0, orchestrate())),
				expire(expiry - time.Second),
			},
			want: []string{"differ ev1 j1"}},
		{name: "exact-wins-over-same-function",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web2")),
				salt("salt/job/j2/new", 2*time.Second, highstateJob("j2", "web1")),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j2", "ambiguous - j1"}, adopted: []string{"ev1 j2"}},
		{name: "exact-wins-over-same-function-job-first",
			steps: []step{
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web2")),
				salt("salt/job/j2/new", 2*time.Second, highstateJob("j2", "web1")),
				decide(dec("ev1", 0, highstate())),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j2", "ambiguous - j1"}, adopted: []string{"ev1 j2"}},
		{name: "reactord-only",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				expire(expiry - time.Microsecond),
				pending(1, 0),
				expire(expiry),
				pending(0, 0),
			},
			want: []string{"reactord-only ev1 -"}},
		{name: "salt-only",
			steps: []step{
				salt("salt/run/j1/new", 0, orchestrateJob("j1")),
				expire(expiry - time.Microsecond),
				expire(expiry),
			},
			want: []string{"salt-only - j1"}},
		{name: "ambiguous",
			steps: []step{
				salt("salt/job/j1/new", 0, highstateJob("j1", "web1")),
				expire(expiry),
			},
			want: []string{"ambiguous - j1"}},
		{name: "ignored-jobs",
			steps: []step{
				ignored("salt/job/j1/new", 0, `{"jid":"j1","tgt_type":"glob","tgt":"web1","user":"alice","fun":"state.apply","arg":[],"minions":["web1"]}`),
				ignored("salt/job/j2/new", 0, `{"jid":"j2","tgt_type":"list","tgt":["web1"],"user":"root","fun":"saltutil.find_job","arg":["j0"],"minions":["web1"]}`),
				ignored("salt/run/j3/new", 0, `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x"}],"jid":"j3","user":"root"}`),
				ignored("salt/wheel/j4/new", 0, `{"fun":"wheel.key.accept","fun_args":["web1"],"jid":"j4","user":"alice"}`),
				ignored("salt/job/j5/new", 0, `{"jid":"j5","tgt":"web1","user":"Reactor","fun":"state.apply","arg":[]}`),
				decide(dec("ev1", 0, highstate())),
				pending(1, 0),
				expire(time.Minute),
			},
			want: []string{"reactord-only ev1 -"}},
		{name: "other-master-user",
			opts: Options{MasterUser: "salt"},
			steps: []step{
				ignored("salt/job/j1/new", 0, highstateJob("j1", "web1")),
				salt("salt/job/j2/new", 0, `{"jid":"j2","tgt":"web1","user":"salt","fun":"state.apply","arg":[],"minions":["web1"]}`),
				expire(time.Minute),
			},
			want: []string{"ambiguous - j2"}},
		{name: "note-when-false-runner",
			steps: []step{
				noted("ev1", 0, "web1", "when: `data.id == 'db1'` is false"),
				salt("salt/run/j1/new", time.Second, orchestrateJob("j1")),
				expire(time.Minute),
			},
			want: []string{"salt-only ev1 j1"}},
		{name: "note-when-false-local",
			steps: []step{
				noted("ev1", 0, "web1", "when: `data.id == 'db1'` is false"),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			// A note about the job's minion accounts for a local job of the
			// master's user: salt-only, not ambiguous.
			want: []string{"salt-only ev1 j1"}},
		{name: "note-of-another-minion",
			steps: []step{
				noted("ev9", 0, "web9", "throttle: more than 1 per 1m0s for key \"web9\""),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			// A note about another minion does not account for the job: its
			// event is not the job's (the reason names it all the same).
			want: []string{"ambiguous - j1"}},
		{name: "note-targeted-minion-preferred",
			steps: []step{
				noted("ev1", 0, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				noted("ev9", time.Second, "web9", "when: `false` is false"),
				salt("salt/job/j1/new", 2*time.Second, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			want: []string{"held-throttle ev1 j1"}},
		{name: "note-latest-in-window",
			steps: []step{
				noted("ev1", 0, "", "when: `first` is false"),
				noted("ev2", time.Second, "", "when: `second` is false"),
				salt("salt/run/j1/new", 2*time.Second, orchestrateJob("j1")),
				expire(time.Minute),
			},
			want: []string{"salt-only ev2 j1"}},
		{name: "note-of-runner-any-minion",
			steps: []step{
				noted("ev9", 0, "web9", "throttle: more than 1 per 1m0s for key \"web9\""),
				salt("salt/run/j1/new", time.Second, orchestrateJob("j1")),
				expire(time.Minute),
			},
			want: []string{"held-throttle ev9 j1"}},
		{name: "note-outside-window",
			steps: []step{
				noted("ev1", 0, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				salt("salt/job/j1/new", window+time.Microsecond, highstateJob("j1", "web1")),
				noted("ev2", 30*time.Second, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				salt("salt/job/j2/new", 30*time.Second-DefaultSkew-time.Microsecond, highstateJob("j2", "web1")),
				expire(2 * time.Minute),
			},
			want: []string{"ambiguous - j1", "ambiguous - j2"}},
		// Notes are kept 2*(Window+Grace)+Hold after reactord saw them;
		// the jobs are stamped in the note's window and seen long after.
		{name: "note-kept",
			steps: []step{
				noted("ev1", 0, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				expire(2*(DefaultWindow+DefaultGrace) + lag),
				saltJob("salt/job/j1/new", ptr(time.Second), time.Hour, highstateJob("j1", "web1"), true),
				expire(2 * time.Hour),
			},
			want: []string{"held-throttle ev1 j1"}},
		{name: "note-forgotten",
			steps: []step{
				noted("ev1", 0, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				expire(2*(DefaultWindow+DefaultGrace) + lag + time.Microsecond),
				saltJob("salt/job/j1/new", ptr(time.Second), time.Hour, highstateJob("j1", "web1"), true),
				expire(2 * time.Hour),
			},
			want: []string{"ambiguous - j1"}},
		{name: "skew-edge-pairs",
			steps: []step{
				salt("salt/job/j1/new", 10*time.Second-DefaultSkew, highstateJob("j1", "web1")),
				decide(dec("ev1", 10*time.Second, highstate())),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "skew-past",
			steps: []step{
				salt("salt/job/j1/new", 10*time.Second-DefaultSkew-time.Microsecond, highstateJob("j1", "web1")),
				decide(dec("ev1", 10*time.Second, highstate())),
				expire(time.Minute),
			},
			want: []string{"ambiguous - j1", "reactord-only ev1 -"}},
		{name: "window-edge-pairs",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", window, highstateJob("j1", "web1")),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "window-past",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", window+time.Microsecond, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			want: []string{"reactord-only ev1 -", "ambiguous - j1"}},
		{name: "window-past-same-function",
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", window+time.Microsecond, highstateJob("j1", "web2")),
				expire(time.Minute),
			},
			want: []string{"reactord-only ev1 -", "ambiguous - j1"}},
		{name: "unstamped-seen-edge-pairs",
			steps: []step{
				decide(unstamped(dec("ev1", 0, highstate()))),
				saltUnstamped("salt/job/j1/new", lag+window, highstateJob("j1", "web1")),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "unstamped-seen-past",
			steps: []step{
				decide(unstamped(dec("ev1", 0, highstate()))),
				saltUnstamped("salt/job/j1/new", lag+window+time.Millisecond, highstateJob("j1", "web1")),
				expire(time.Minute),
			},
			want: []string{"reactord-only ev1 -", "ambiguous - j1"}},
		// With one side unstamped the times reactord saw them are
		// compared, Window either way: a job seen 4.8s before the event
		// pairs, where by the stamps (also 4.8s, past Skew) it would not.
		{name: "half-stamped-seen",
			steps: []step{
				salt("salt/job/j1/new", -10*time.Second, highstateJob("j1", "web1")),
				decide(unstamped(dec("ev1", -5*time.Second-lag, highstate()))),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "wheel-key-accept",
			steps: []step{
				decide(dec("ev1", 0, reaction("accept", "wheel", "key.accept", "args", []any{m("match", "web1")}))),
				salt("salt/wheel/j1/new", time.Second, `{"fun":"wheel.key.accept","fun_args":["web1",{"include_denied":false,"include_rejected":false}],"jid":"j1","user":"Reactor"}`),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "wheel-key-accept-other-minion",
			steps: []step{
				decide(dec("ev1", 0, reaction("accept", "wheel", "key.accept", "args", []any{m("match", "web2")}))),
				salt("salt/wheel/j1/new", time.Second, `{"fun":"wheel.key.accept","fun_args":["web1",{"include_denied":false,"include_rejected":false}],"jid":"j1","user":"Reactor"}`),
				expire(time.Minute),
			},
			want: []string{"differ ev1 j1"}},
		{name: "runner-orchestrate",
			steps: []step{
				decide(dec("ev1", 0, reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x"), m("pillar", m("target", "web1", "n", int64(3)))}))),
				salt("salt/run/j1/new", time.Second, `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"n":3,"target":"web1"}}],"jid":"j1","user":"Reactor"}`),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "runner-orchestrate-other-pillar",
			steps: []step{
				decide(dec("ev1", 0, reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x"), m("pillar", m("target", "web1", "n", int64(3)))}))),
				salt("salt/run/j1/new", time.Second, `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"n":4,"target":"web1"}}],"jid":"j1","user":"Reactor"}`),
				expire(time.Minute),
			},
			want: []string{"differ ev1 j1"}},
		{name: "local-kwargs",
			steps: []step{
				decide(dec("ev1", 0, reaction("run", "local", "cmd.run", "tgt", "web1", "arg", []any{"uptime"}, "kwarg", m("runas", "root", "timeout", int64(5))))),
				salt("salt/job/j1/new", time.Second, `{"jid":"j1","tgt_type":"glob","tgt":"web1","user":"root","fun":"cmd.run","arg":["uptime",{"__kwarg__":true,"runas":"root","timeout":5}],"minions":["web1"]}`),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
		{name: "local-kwargs-differ",
			steps: []step{
				decide(dec("ev1", 0, reaction("run", "local", "cmd.run", "tgt", "web1", "arg", []any{"uptime"}, "kwarg", m("runas", "root")))),
				salt("salt/job/j1/new", time.Second, `{"jid":"j1","tgt_type":"glob","tgt":"web1","user":"root","fun":"cmd.run","arg":["uptime",{"__kwarg__":true,"runas":"web"}],"minions":["web1"]}`),
				expire(time.Minute),
			},
			want: []string{"differ ev1 j1"}},
		{name: "max-pending-decisions",
			opts: Options{MaxPending: 2},
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				decide(dec("ev2", time.Second, orchestrate())),
				pending(2, 0),
				decide(dec("ev3", 2*time.Second, reaction("ping", "local", "test.ping", "tgt", "web1"))),
				pending(2, 0),
				expire(time.Minute),
			},
			want: []string{"reactord-only ev1 -", "reactord-only ev2 -", "reactord-only ev3 -"}},
		{name: "max-pending-jobs",
			opts: Options{MaxPending: 2},
			steps: []step{
				salt("salt/job/j1/new", 0, highstateJob("j1", "web1")),
				salt("salt/run/j2/new", time.Second, orchestrateJob("j2")),
				pending(0, 2),
				salt("salt/run/j3/new", 2*time.Second, orchestrateJob("j3")),
				pending(0, 2),
				expire(time.Minute),
			},
			want: []string{"ambiguous - j1", "salt-only - j2", "salt-only - j3"}},
		// The bound is on what is unpaired: a decision paired since does
		// not count.
		{name: "max-pending-counts-unpaired",
			opts: Options{MaxPending: 2},
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				decide(dec("ev2", time.Second, orchestrate())),
				salt("salt/run/j2/new", time.Second, orchestrateJob("j2")),
				decide(dec("ev3", 2*time.Second, reaction("ping", "local", "test.ping", "tgt", "web1"))),
				pending(2, 0),
				decide(dec("ev4", 3*time.Second, reaction("ping", "local", "test.ping", "tgt", "web2"))),
				pending(2, 0),
				expire(time.Minute),
			},
			want: []string{"agree ev2 j2", "reactord-only ev1 -", "reactord-only ev3 -", "reactord-only ev4 -"}, adopted: []string{"ev2 j2"}},
		// The oldest decision was paired: the oldest unpaired one is decided.
		{name: "max-pending-head-paired",
			opts: Options{MaxPending: 2},
			steps: []step{
				decide(dec("ev1", 0, highstate())),
				decide(dec("ev2", time.Second, orchestrate())),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				decide(dec("ev3", 2*time.Second, reaction("ping", "local", "test.ping", "tgt", "web1"))),
				pending(2, 0),
				decide(dec("ev4", 3*time.Second, reaction("ping", "local", "test.ping", "tgt", "web2"))),
				pending(2, 0),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j1", "reactord-only ev2 -", "reactord-only ev3 -", "reactord-only ev4 -"}, adopted: []string{"ev1 j1"}},
		{name: "abandon",
			steps: []step{
				noted("ev0", 0, "", "throttle: more than 1 per 1m0s for key \"web1\""),
				decide(dec("ev1", 0, highstate())),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web2")),
				salt("salt/run/j2/new", time.Second, orchestrateJob("j2")),
				abandon(1, 2),
				pending(0, 0),
				salt("salt/job/j4/new", 2*time.Second, highstateJob("j4", "web1")),
				salt("salt/run/j3/new", 3*time.Second, orchestrateJob("j3")),
				expire(2 * time.Minute),
			},
			want: []string{"ambiguous - j4", "salt-only - j3"}},
		// A local job of the master's user that starts while a runner of
		// Salt's reactor runs is the runner's own (an orchestration's): no
		// verdict; one before the runner is not.
		{name: "runner-child",
			steps: []step{
				salt("salt/job/j0/new", 0, highstateJob("j0", "web1")),
				salt("salt/run/j1/new", time.Second, orchestrateJob("j1")),
				salt("salt/job/j2/new", 2*time.Second, highstateJob("j2", "web1")),
				expire(2 * time.Minute),
			},
			want: []string{"ambiguous - j0", "salt-only - j1"}},
		// Salt's reactor falls behind in a burst: the lags of the exact
		// pairs stretch the window (1.5 times the longest), so a later
		// job, past Window (15s) after its event, still pairs.
		{name: "lag-stretches-window",
			steps: []step{
				decide(dec("ev1", 0, highstateFor("a1"))),
				salt("salt/job/j1/new", 12*time.Second, highstateJob("j1", "a1")),
				decide(dec("ev2", 100*time.Millisecond, highstateFor("a2"))),
				salt("salt/job/j2/new", 14*time.Second, highstateJob("j2", "a2")),
				decide(dec("ev3", 200*time.Millisecond, highstateFor("a3"))),
				salt("salt/job/j3/new", 19*time.Second, highstateJob("j3", "a3")),
				expire(2 * time.Minute),
			},
			want: []string{"agree ev1 j1", "agree ev2 j2", "agree ev3 j3"}, adopted: []string{"ev1 j1", "ev2 j2", "ev3 j3"}},
		// Without such lags, the window is Window.
		{name: "lag-none",
			steps: []step{
				decide(dec("ev3", 200*time.Millisecond, highstateFor("a3"))),
				salt("salt/job/j3/new", 19*time.Second, highstateJob("j3", "a3")),
				expire(2 * time.Minute),
			},
			want: []string{"reactord-only ev3 -", "ambiguous - j3"}},
		// The runner's own jobs are those of its run: until its return.
		{name: "runner-child-until-ret",
			steps: []step{
				salt("salt/run/j1/new", time.Second, orchestrateJob("j1")),
				salt("salt/job/j2/new", 3*time.Second, highstateJob("j2", "web1")),
				runnerDone("j1", 5*time.Second),
				salt("salt/job/j3/new", 6*time.Second, highstateJob("j3", "web1")),
				expire(2 * time.Minute),
				children(1),
			},
			want: []string{"salt-only - j1", "ambiguous - j3"}},
		// A return handled before its runner's job event (another lane)
		// still ends the run.
		{name: "runner-ret-before-new",
			steps: []step{
				runnerDone("j1", 1500*time.Millisecond),
				salt("salt/run/j1/new", time.Second, orchestrateJob("j1")),
				salt("salt/job/j2/new", 3*time.Second, highstateJob("j2", "web1")),
				expire(2 * time.Minute),
				children(0),
			},
			want: []string{"salt-only - j1", "ambiguous - j2"}},
		// A note about its minion accounts for a job, runner or not.
		{name: "runner-note-first",
			steps: []step{
				salt("salt/run/j1/new", 0, orchestrateJob("j1")),
				noted("ev1", 3*time.Second, "web1", "throttle: more than 1 per 1m0s for key \"web1\""),
				salt("salt/job/j2/new", 4*time.Second, highstateJob("j2", "web1")),
				expire(2 * time.Minute),
				children(0),
			},
			want: []string{"salt-only - j1", "held-throttle ev1 j2"}},
		{name: "hold-delays-jobs",
			steps: []step{
				setHold(30 * time.Second),
				salt("salt/run/j1/new", 0, orchestrateJob("j1")),
				decide(dec("ev1", 0, highstate())),
				expire(expiry),
				expire(expiry + 30*time.Second - time.Microsecond),
				expire(expiry + 30*time.Second),
			},
			want: []string{"reactord-only ev1 -", "salt-only - j1"}},
		// A debounced event's decision comes after the hold; Salt's job
		// for the event waits for it.
		{name: "hold-debounced-decision-pairs",
			steps: []step{
				setHold(30 * time.Second),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				expire(25 * time.Second),
				decide(dec("ev1", 0, highstate())),
				expire(time.Minute),
			},
			want: []string{"agree ev1 j1"}, adopted: []string{"ev1 j1"}},
	}
	for _, g := range []struct{ name, verdict, note string }{
		{"throttle", HeldThrottle, "throttle: more than 1 per 1m0s for key \"web1\""},
		{"forged", HeldForged, "forged event: data.id web2 is not the sender web1 (from: any on the rule accepts it)"},
		{"debounce", HeldDebounce, "debounce: held until 5s without a new event for key \"web1\""},
		{"collect", HeldCollect, "collect: the collection for key \"web1\" is full (max 10); left out"},
	} {
		ss = append(ss, scenario{name: "note-" + g.name,
			steps: []step{
				noted("ev1", 0, "web1", g.note),
				salt("salt/job/j1/new", time.Second, highstateJob("j1", "web1")),
				expire(expiry + time.Second - time.Microsecond),
				expire(expiry + time.Second),
			},
			want: []string{g.verdict + " ev1 j1"}})
	}
	return ss
}

// TestScenarios runs each scenario, checks its verdicts and adoptions, and
// compares what came out (verdicts with their rule, jid, reason and
// record) with testdata/scenarios/NAME.golden; -update rewrites those.
func TestScenarios(t *testing.T) {
	names := map[string]bool{}
	for _, s := range scenarios() {
		if names[s.name] {
			t.Fatalf("two scenarios named %s", s.name)
		}
		names[s.name] = true
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			for _, st := range s.steps {
				st(h)
			}
			if !slices.Equal(h.got, s.want) {
				t.Errorf("verdicts\n got %q\nwant %q", h.got, s.want)
			}
			if !slices.Equal(h.adopted, s.adopted) {
				t.Errorf("adopted\n got %q\nwant %q", h.adopted, s.adopted)
			}
			golden(t, filepath.Join("testdata", "scenarios", s.name+".golden"), h.out.String())
		})
	}
	if *update {
		return
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.golden"))
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".golden"); !names[n] {
			t.Errorf("%s belongs to no scenario", f)
		}
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to rewrite it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}
