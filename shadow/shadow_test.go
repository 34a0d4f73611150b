package shadow

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// t0 is the scenarios' clock origin: an event the master stamped
// "2026-11-22T01:00:00.000000".
var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// chunk builds a chunk (or any ordered map) from keys and values.
func chunk(kv ...any) *event.Chunk {
	c := event.NewMap(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i].(string), kv[i+1])
	}
	return c
}

// m is chunk, for the mappings inside a chunk.
func m(kv ...any) *event.Map { return chunk(kv...) }

// reaction is a compiled low chunk of reaction id of the given type and
// function, with the reaction body's other keys after it.
func reaction(id, state, fun string, body ...any) *event.Chunk {
	kv := []any{"state", state, "__id__", id, "name", id, "__sls__", "/srv/reactor/" + id + ".sls", "order", int64(10000), "fun", fun}
	return chunk(append(kv, body...)...)
}

// data decodes an event's data as the reactor does (event.DecodeData).
func data(t *testing.T, s string) map[string]any {
	t.Helper()
	d, err := event.DecodeData([]byte(s))
	if err != nil {
		t.Fatalf("data %s: %v", s, err)
	}
	return d
}

// TestParseJob reads the three job events Salt's master publishes, and
// refuses every other event.
func TestParseJob(t *testing.T) {
	seen := at(12*time.Second + 300*time.Millisecond)
	stamp := at(12 * time.Second)
	cases := []struct {
		name string
		tag  string
		data string
		want Job
		ok   bool
	}{
		{"local", "salt/job/20261122010012000001/new",
			`{"jid":"20261122010012000001","tgt_type":"glob","tgt":"web*","user":"root","fun":"state.apply","arg":["nginx",{"__kwarg__":true,"test":true}],"minions":["web1","web2"],"missing":[],"_stamp":"2026-11-22T01:00:12.000000"}`,
			Job{JID: "20261122010012000001", Kind: "local", Fun: "state.apply", Tgt: "web*", TgtType: "glob",
				Arg: []any{"nginx", map[string]any{"__kwarg__": true, "test": true}}, User: "root", Minions: []string{"web1", "web2"}, Stamp: stamp, Seen: seen}, true},
		{"local list target, no tgt_type, minion not a string", "salt/job/20261122010012000002/new",
			`{"tgt":["web1","web2"],"user":"root","fun":"test.ping","minions":["web1",7],"_stamp":"2026-11-22T01:00:12.000000"}`,
			Job{JID: "20261122010012000002", Kind: "local", Fun: "test.ping", Tgt: []any{"web1", "web2"}, User: "root", Minions: []string{"web1"}, Stamp: stamp, Seen: seen}, true},
		{"runner", "salt/run/20261122010012000003/new",
			`{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"target":"web1","n":3}}],"jid":"20261122010012000003","user":"Reactor","_stamp":"2026-11-22T01:00:12.000000"}`,
			Job{JID: "20261122010012000003", Kind: "runner", Fun: "state.orchestrate",
				Arg: []any{map[string]any{"mods": "orch.x", "pillar": map[string]any{"target": "web1", "n": int64(3)}}}, User: "Reactor", Stamp: stamp, Seen: seen}, true},
		{"wheel", "salt/wheel/20261122010012000004/new",
			`{"fun":"wheel.key.accept","fun_args":["web1",{"include_denied":false,"include_rejected":false}],"jid":"20261122010012000004","user":"Reactor","_stamp":"2026-11-22T01:00:12.000000"}`,
			Job{JID: "20261122010012000004", Kind: "wheel", Fun: "key.accept",
				Arg: []any{"web1", map[string]any{"include_denied": false, "include_rejected": false}}, User: "Reactor", Stamp: stamp, Seen: seen}, true},
		{"no stamp", "salt/run/20261122010012000005/new", `{"fun":"runner.jobs.active","user":"Reactor"}`,
			Job{JID: "20261122010012000005", Kind: "runner", Fun: "jobs.active", User: "Reactor", Seen: seen}, true},
		{"job return", "salt/job/20261122010012000001/ret/web1", `{"fun":"state.apply","user":"root"}`, Job{}, false},
		{"runner return", "salt/run/20261122010012000003/ret", `{"fun":"runner.state.orchestrate","user":"Reactor"}`, Job{}, false},
		{"minion event", "salt/minion/web1/start", `{"fun":"x"}`, Job{}, false},
		{"other client", "salt/cloud/20261122010012000006/new", `{"fun":"cloud.create"}`, Job{}, false},
		{"not salt", "acme/job/20261122010012000007/new", `{"fun":"state.apply"}`, Job{}, false},
		{"no function", "salt/job/20261122010012000008/new", `{"tgt":"*","user":"root"}`, Job{}, false},
		{"prefix alone", "salt/run/20261122010012000009/new", `{"fun":"runner.","user":"Reactor"}`, Job{}, false},
		{"function not a string", "salt/wheel/20261122010012000010/new", `{"fun":["wheel.key.accept"],"user":"Reactor"}`, Job{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseJob(c.tag, data(t, c.data), seen)
			if ok != c.ok {
				t.Fatalf("ParseJob(%q) ok = %v, want %v", c.tag, ok, c.ok)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseJob(%q)\n got %#v\nwant %#v", c.tag, got, c.want)
			}
		})
	}
}

// TestStamp reads Salt's _stamp (naive, microseconds, as UTC) and RFC 3339.
func TestStamp(t *testing.T) {
	cases := []struct {
		name  string
		stamp any
		want  time.Time
	}{
		{"salt", "2026-11-22T01:00:12.000000", at(12 * time.Second)},
		{"salt microseconds", "2026-11-22T01:00:12.123456", at(12*time.Second + 123456*time.Microsecond)},
		// Python's isoformat leaves the fraction out when it is zero.
		{"salt whole second", "2026-11-22T01:00:12", at(12 * time.Second)},
		{"rfc 3339", "2026-11-22T02:00:12.5+01:00", at(12*time.Second + 500*time.Millisecond)},
		{"missing", nil, time.Time{}},
		{"not a string", int64(1763773212), time.Time{}},
		{"garbage", "yesterday", time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := map[string]any{}
			if c.stamp != nil {
				d["_stamp"] = c.stamp
			}
			if got := Stamp(d); !got.Equal(c.want) {
				t.Errorf("Stamp(%v) = %v, want %v", c.stamp, got, c.want)
			}
		})
	}
}

// TestExpected sorts the verdicts into comparisons and the gates reactord
// applies on purpose.
func TestExpected(t *testing.T) {
	want := map[string]bool{Agree: false, Differ: false, ReactordOnly: false, SaltOnly: false, Ambiguous: false,
		HeldLoop: true, HeldHops: true, HeldForged: true, HeldThrottle: true, HeldDebounce: true, HeldCollect: true}
	if len(Verdicts) != len(want) {
		t.Fatalf("Verdicts = %v, want the %d of this test", Verdicts, len(want))
	}
	for _, v := range Verdicts {
		e, ok := want[v]
		if !ok {
			t.Errorf("verdict %q is not known to this test", v)
		}
		if Expected(v) != e {
			t.Errorf("Expected(%q) = %v, want %v", v, !e, e)
		}
	}
}

// TestRecord keeps everything of a non-agreement (the chunk, Salt's job,
// the reason, the event's stamp) and the verdict alone of an agreement.
func TestRecord(t *testing.T) {
	ch := reaction("highstate", "local", "state.apply", "tgt", "web1")
	d := &Decision{EventID: "ev1", Tag: "salt/minion/web1/start", Minion: "web1", Stamp: at(0), Seen: at(time.Second),
		Rule: "salt/minion/*/start", File: "/srv/reactor/highstate.sls", ReactionID: "highstate", Chunk: ch}
	j := &Job{JID: "j1", Kind: "local", Fun: "state.apply", Tgt: "web2", TgtType: "glob", Arg: []any{}, User: "root",
		Minions: []string{"web2"}, Stamp: at(2 * time.Second), Seen: at(3 * time.Second)}
	n := &Note{EventID: "ev2", Tag: "salt/minion/web2/start", Minion: "web2", Stamp: at(time.Second), Rule: "salt/minion/*/start", Note: "throttle: x"}
	const chunkJSON = `{"state":"local","__id__":"highstate","name":"highstate","__sls__":"/srv/reactor/highstate.sls","order":10000,"fun":"state.apply","tgt":"web1"}`
	const jobJSON = `{"jid":"j1","kind":"local","fun":"state.apply","tgt":"web2","tgt_type":"glob","arg":[],"user":"root","minions":["web2"],"stamp":"2026-11-22T01:00:02Z"}`
	cases := []struct {
		name string
		v    Verdict
		rule string
		want string
	}{
		{"agree", Verdict{Verdict: Agree, Decision: d, Job: j, Reason: "kept out"}, "salt/minion/*/start",
			`{"verdict":"agree"}`},
		{"held agreement", Verdict{Verdict: Agree, Decision: d, Reason: "loop; Salt's reactor did not run it either"}, "salt/minion/*/start",
			`{"verdict":"agree"}`},
		{"differ", Verdict{Verdict: Differ, Decision: d, Job: j, Reason: "why"}, "salt/minion/*/start",
			`{"verdict":"differ","reason":"why","event_stamp":"2026-11-22T01:00:00Z","chunk":` + chunkJSON + `,"salt":` + jobJSON + `}`},
		{"reactord-only", Verdict{Verdict: ReactordOnly, Decision: d, Reason: "why"}, "salt/minion/*/start",
			`{"verdict":"reactord-only","reason":"why","event_stamp":"2026-11-22T01:00:00Z","chunk":` + chunkJSON + `}`},
		{"held by a note", Verdict{Verdict: HeldThrottle, Job: j, Note: n, Reason: "why"}, "salt/minion/*/start",
			`{"verdict":"held-throttle","reason":"why","event_stamp":"2026-11-22T01:00:01Z","salt":` + jobJSON + `}`},
		{"salt-only alone", Verdict{Verdict: SaltOnly, Job: j, Reason: "why"}, "",
			`{"verdict":"salt-only","reason":"why","salt":` + jobJSON + `}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(c.v.Record())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("Record\n got %s\nwant %s", got, c.want)
			}
			if r := c.v.Rule(); r != c.rule {
				t.Errorf("Rule() = %q, want %q", r, c.rule)
			}
		})
	}
}

// TestCalls reduces chunks and jobs to what pairing compares: the pairs
// here are the same call or not.
func TestCalls(t *testing.T) {
	cases := []struct {
		name  string
		chunk *event.Chunk
		tag   string
		data  string
		same  bool
	}{
		{"local target and glob default", reaction("ping", "local", "test.ping", "tgt", "web1"),
			"salt/job/j/new", `{"fun":"test.ping","tgt":"web1","tgt_type":"glob","arg":[],"user":"root"}`, true},
		{"local other target type", reaction("ping", "local", "test.ping", "tgt", "web1", "tgt_type", "list"),
			"salt/job/j/new", `{"fun":"test.ping","tgt":"web1","tgt_type":"glob","arg":[],"user":"root"}`, false},
		{"local list target", reaction("ping", "local", "test.ping", "tgt", []any{"web1", "web2"}, "tgt_type", "list"),
			"salt/job/j/new", `{"fun":"test.ping","tgt":["web1","web2"],"tgt_type":"list","arg":[],"user":"root"}`, true},
		{"local arg and kwarg", reaction("run", "local", "cmd.run", "tgt", "web1", "arg", []any{"uptime"}, "kwarg", m("runas", "root", "timeout", int64(5))),
			"salt/job/j/new", `{"fun":"cmd.run","tgt":"web1","tgt_type":"glob","arg":["uptime",{"timeout":5,"runas":"root","__kwarg__":true}],"user":"root"}`, true},
		{"local kwargs without __kwarg__", reaction("run", "local", "cmd.run", "tgt", "web1", "arg", []any{"uptime"}, "kwarg", m("runas", "root")),
			"salt/job/j/new", `{"fun":"cmd.run","tgt":"web1","tgt_type":"glob","arg":["uptime",{"runas":"root"}],"user":"root"}`, false},
		{"local args (new schema) are keyword arguments", reaction("zsh", "local", "pkg.install", "tgt", "web1", "args", []any{m("name", "zsh")}),
			"salt/job/j/new", `{"fun":"pkg.install","tgt":"web1","tgt_type":"glob","arg":[{"__kwarg__":true,"name":"zsh"}],"user":"root"}`, true},
		{"local positional order matters", reaction("cp", "local", "file.copy", "tgt", "web1", "arg", []any{"/a", "/b"}),
			"salt/job/j/new", `{"fun":"file.copy","tgt":"web1","arg":["/b","/a"],"user":"root"}`, false},
		{"wheel key.accept", reaction("accept", "wheel", "key.accept", "args", []any{m("match", "web1")}),
			"salt/wheel/j/new", `{"fun":"wheel.key.accept","fun_args":["web1",{"include_denied":false,"include_rejected":false}],"user":"Reactor"}`, true},
		{"wheel key.accept other minion", reaction("accept", "wheel", "key.accept", "args", []any{m("match", "web2")}),
			"salt/wheel/j/new", `{"fun":"wheel.key.accept","fun_args":["web1",{"include_denied":false,"include_rejected":false}],"user":"Reactor"}`, false},
		{"wheel default that is not false", reaction("gen", "wheel", "key.gen_accept", "args", []any{m("id_", "web1")}),
			"salt/wheel/j/new", `{"fun":"wheel.key.gen_accept","fun_args":["web1",{"keysize":2048,"force":false}],"user":"Reactor"}`, false},
		{"runner orchestrate kwargs", reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x"), m("pillar", m("target", "web1", "n", int64(3)))}),
			"salt/run/j/new", `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"n":3,"target":"web1"}}],"user":"Reactor"}`, true},
		{"runner orchestrate mods positional", reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x"), m("pillar", m("target", "web1"))}),
			"salt/run/j/new", `{"fun":"runner.state.orchestrate","fun_args":["orch.x",{"pillar":{"target":"web1"},"saltenv":null,"test":null}],"user":"Reactor"}`, true},
		{"runner orchestrate old schema", reaction("orch", "runner", "state.orchestrate", "arg", []any{"orch.x"}, "kwarg", m("pillar", m("target", "web1"))),
			"salt/run/j/new", `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"target":"web1"}}],"user":"Reactor"}`, true},
		{"runner orchestrate other pillar", reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x"), m("pillar", m("target", "web2"))}),
			"salt/run/j/new", `{"fun":"runner.state.orchestrate","fun_args":[{"mods":"orch.x","pillar":{"target":"web1"}}],"user":"Reactor"}`, false},
		{"runner positional mapping", reaction("set", "runner", "x.y", "arg", []any{m("a", int64(1))}),
			"salt/run/j/new", `{"fun":"runner.x.y","fun_args":[{"a":1}],"user":"Reactor"}`, true},
		{"runner empty defaults", reaction("set", "runner", "x.y", "args", []any{m("a", int64(1)), m("b", "")}),
			"salt/run/j/new", `{"fun":"runner.x.y","fun_args":[1,{"c":"","d":[],"e":{},"f":null,"g":false}],"user":"Reactor"}`, true},
		{"runner true is no default", reaction("set", "runner", "x.y", "args", []any{m("a", int64(1))}),
			"salt/run/j/new", `{"fun":"runner.x.y","fun_args":[1,{"g":true}],"user":"Reactor"}`, false},
		{"runner other function", reaction("orch", "runner", "state.orchestrate", "args", []any{m("mods", "orch.x")}),
			"salt/run/j/new", `{"fun":"runner.state.orch","fun_args":[{"mods":"orch.x"}],"user":"Reactor"}`, false},
		{"wheel is not runner", reaction("accept", "wheel", "key.accept", "args", []any{m("match", "web1")}),
			"salt/run/j/new", `{"fun":"runner.key.accept","fun_args":["web1"],"user":"Reactor"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, ok := ParseJob(c.tag, data(t, c.data), t0)
			if !ok {
				t.Fatalf("ParseJob(%q) refused it", c.tag)
			}
			ch, err := callOfChunk(c.chunk)
			if err != nil {
				t.Fatal(err)
			}
			cj := callOfJob(&j)
			if same := ch.exact() == cj.exact(); same != c.same {
				t.Errorf("same = %v, want %v\nchunk %q\n  job %q", same, c.same, ch.exact(), cj.exact())
			}
		})
	}
}
