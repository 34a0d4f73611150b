package engine

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
)

// minionSent is the data a master fires for an event a minion sent it
// (recorded 3007.1 shape: the request itself, cmd and verified id).
func minionSent(id, tag string) map[string]any {
	return map[string]any{"id": id, "cmd": "_minion_event", "pretag": nil, "tag": tag, "data": "Minion " + id + " started", "_stamp": "2026-11-26T15:00:00.000000"}
}

func TestOriginOf(t *testing.T) {
	for _, tc := range []struct {
		name, tag   string
		data        map[string]any
		minion, why string
	}{
		{"a minion's own start", "salt/minion/web2/start", minionSent("web2", "salt/minion/web2/start"), "web2", ""},
		{"legacy minion_start", "minion_start", minionSent("web2", "minion_start"), "web2", ""},
		{"a minion's own beacon", "salt/beacon/web2/inotify//etc/x", minionSent("web2", "salt/beacon/web2/inotify//etc/x"), "web2", ""},
		{"a minion's own event.send", "myco/deploy/done", minionSent("web2", "myco/deploy/done"), "web2", ""},
		{"a schedule event with no minion in the tag", "salt/minion/minion_schedule_add_complete", minionSent("web2", "salt/minion/minion_schedule_add_complete"), "web2", ""},
		{"another minion's start", "salt/minion/web1/start", minionSent("web2", "salt/minion/web1/start"), "web2", "minion web2 sent an event naming minion web1"},
		{"another minion's beacon", "salt/beacon/web1/inotify//etc/x", minionSent("web2", ""), "web2", "minion web2 sent an event naming minion web1"},
		{"a job return it never ran", "salt/job/20261126150000000000/ret/web2", minionSent("web2", ""), "web2", "minion web2 sent a salt/job event, which only the master fires"},
		{"its own state progress", "salt/job/20261126150000000000/prog/web2/0", minionSent("web2", ""), "web2", ""},
		{"another's state progress", "salt/job/20261126150000000000/prog/web1/0", minionSent("web2", ""), "web2", "minion web2 sent an event naming minion web1"},
		{"salt/auth", "salt/auth", minionSent("web2", ""), "web2", "minion web2 sent a salt/auth event, which only the master fires"},
		{"a key event", "salt/key", minionSent("web2", ""), "web2", "minion web2 sent a salt/key event, which only the master fires"},
		{"a runner's", "salt/run/20261126150000000000/new", minionSent("web2", ""), "web2", "minion web2 sent a salt/run event, which only the master fires"},
		{"presence", "salt/presence/change", minionSent("web2", ""), "web2", "minion web2 sent a salt/presence event, which only the master fires"},
		{"the sender's id missing", "salt/minion/web1/start", map[string]any{"cmd": "_minion_event"}, "?", "a minion event without the sender's id"},
		{"a master's job return", "salt/job/20261126150000000000/ret/web1", map[string]any{"cmd": "_return", "id": "web1", "return": true}, "", ""},
		{"a batched beacon (no sender)", "salt/beacon/web1/inotify//etc/x", map[string]any{"path": "/etc/x", "change": "IN_MODIFY", "id": "web1"}, "", ""},
		{"salt/auth from the master", "salt/auth", map[string]any{"act": "pend", "id": "web1", "result": true}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := OriginOf(tc.tag, tc.data)
			if o.Minion != tc.minion || o.Forged != tc.why {
				t.Errorf("OriginOf(%q) = minion %q forged %q; want %q %q", tc.tag, o.Minion, o.Forged, tc.minion, tc.why)
			}
		})
	}
}

// TestFromOption: which rules react to which event, by the rule's from
// option, and why the others do not.
func TestFromOption(t *testing.T) {
	dir := t.TempDir()
	conf := `reactor:
  - '*':
      id: default
      sls: r.sls
  - '*':
      id: any
      sls: r.sls
      from: any
  - '*':
      id: master
      sls: r.sls
      from: master
  - '*':
      id: minion
      sls: r.sls
      from: minion
`
	writeTestFile(t, filepath.Join(dir, "reactor.conf"), conf)
	writeTestFile(t, filepath.Join(dir, "r.sls"), "#!gotmpl|yaml\nr_{{ .tag | replace \"/\" \"_\" }}:\n  local.test.ping:\n    - tgt: web1\n")
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	eng := MustNew(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, tc := range []struct {
		name  string
		ev    event.Event
		react []string // rule ids that react
	}{
		{"genuine minion start", event.Event{Tag: "salt/minion/web2/start", Data: minionSent("web2", "salt/minion/web2/start")}, []string{"default", "any", "minion"}},
		{"forged minion start", event.Event{Tag: "salt/minion/web1/start", Data: minionSent("web2", "salt/minion/web1/start")}, []string{"any"}},
		{"forged job return", event.Event{Tag: "salt/job/20261126150000000000/ret/web1", Data: minionSent("web2", "")}, []string{"any"}},
		{"the master's job return", event.Event{Tag: "salt/job/20261126150000000000/ret/web1", Data: map[string]any{"cmd": "_return", "id": "web1"}}, []string{"default", "any", "master"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := eng.Process(context.Background(), tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			refused := map[int]string{}
			for _, n := range res.Notes {
				refused[n.Rule] = n.Note
			}
			var reacted []string
			for _, ri := range res.Rules {
				if _, no := refused[ri]; !no {
					reacted = append(reacted, cfg.Rules[ri].ID)
				}
			}
			if !slices.Equal(reacted, tc.react) {
				t.Errorf("rules reacting: %v, want %v (notes %v)", reacted, tc.react, refused)
			}
			if want := len(tc.react) == 1; (res.Forged != "") != want {
				t.Errorf("Forged %q, want forged %v", res.Forged, want)
			}
			if len(res.Chunks) != 1 {
				t.Errorf("%d chunks, want 1 (the reacting rules share one reaction id)", len(res.Chunks))
			}
		})
	}
	// Logged once per minion and family, not once per event or rule.
	if n := strings.Count(logs.String(), "forged event: no reaction"); n != 2 {
		t.Errorf("forged events logged %d times, want 2 (salt/minion and salt/job from web2):\n%s", n, logs.String())
	}
}

// TestNoFalseRefusals: no event of the recorded real traffic (Salt 3006.8
// and 3007.1: what reached NATS in the recipes, salt-api's event stream),
// the shipped sample catalogue and the examples is refused by the default
// policy, and the minion-sent ones among them are read as such.
func TestNoFalseRefusals(t *testing.T) {
	var files []string
	for _, g := range []string{"../testdata/salt/*/e2e/*.jsonl", "../testdata/salt/*/api_events.sse.gz", "samples/catalogue.jsonl", "../examples/reactor/events.jsonl"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	total, fromMinions := 0, 0
	for _, f := range files {
		for _, ev := range readRecorded(t, f) {
			total++
			o := OriginOf(ev.Tag, ev.Data)
			if o.Minion != "" {
				fromMinions++
			}
			if ok, why := o.admits(""); !ok {
				t.Errorf("%s: %s refused: %s", f, ev.Tag, why)
			}
		}
	}
	t.Logf("%d events from %d files, %d sent by minions: none refused", total, len(files), fromMinions)
	if len(files) < 8 || fromMinions < 20 {
		t.Errorf("read %d files, %d minion-sent events: the recordings are not where the test looks", len(files), fromMinions)
	}
}

// readRecorded reads {"tag","data"} lines, or salt-api's SSE stream
// (data: lines holding {"tag","data"}), gzipped or not.
func readRecorded(t *testing.T, path string) []event.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := out.ReadFrom(zr); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	var evs []event.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(path, ".sse") {
			var ok bool
			if line, ok = strings.CutPrefix(line, "data: "); !ok {
				continue
			}
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		var ev event.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
