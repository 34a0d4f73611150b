package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/reactions"
)

// masterCaller answers as a master would: its grains, its configuration
// and salt.cmd functions (the real callers run on real masters in
// test/salt).
type masterCaller struct{ calls []string }

func (m *masterCaller) SaltCall(_ context.Context, fun string, args []any, _ map[string]any) (any, error) {
	m.calls = append(m.calls, fun)
	switch fun {
	case "grains.items":
		return map[string]any{"id": "master1", "roles": []any{"salt"}}, nil
	case "config.items":
		return map[string]any{"master_id": "m1"}, nil
	case "saltutil.runner":
		return []any{"web1", "web2"}, nil
	}
	return nil, nil
}

// TestSaltDictsAndRunners: a Salt Jinja file reading grains and opts as
// dicts and calling saltutil.runner renders through the engine's Salt
// calls; grains is asked once per render; without a caller the render
// fails naming the call.
func TestSaltDictsAndRunners(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "reactor.conf"), "reactor:\n  - 'x/*':\n    - "+dir+"/f.sls\n")
	writeTestFile(t, filepath.Join(dir, "f.sls"), `{% set up = salt['saltutil.runner']('manage.up') %}
r:
  local.test.arg:
    - tgt: {{ grains['id'] }}
    - arg:
      - {{ grains.get('roles')[0] }}
      - {{ opts['master_id'] }}
      - {{ up|length }}
`)
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	eng := MustNew(cfg, Options{})
	ev := event.Event{Tag: "x/y", Data: map[string]any{"id": "web1"}}
	res, err := eng.Process(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "f.sls:1:") || !strings.Contains(errs[0].Error(), "no driver that reaches the master") {
		t.Fatalf("without a caller: %v", errs)
	}
	mc := &masterCaller{}
	eng = MustNew(cfg, Options{SaltCalls: &reactions.SaltCalls{Caller: mc, Allow: reactions.ReadOnlySaltCalls}})
	res, err = eng.Process(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := summarize(res.Chunks); got != `local test.arg tgt="master1" arg=["salt","m1",2]` || len(res.Errors()) > 0 {
		t.Fatalf("rendered %s, errors %v", got, res.Errors())
	}
	if strings.Join(mc.calls, " ") != "saltutil.runner grains.items config.items" {
		t.Errorf("calls %v, want grains.items asked once", mc.calls)
	}
}

// failingCaller fails every call the way a salt-run that printed a
// traceback does.
type failingCaller struct{}

func (failingCaller) SaltCall(context.Context, string, []any, map[string]any) (any, error) {
	return nil, errors.New("salt-run salt.cmd pillar.get: context deadline exceeded\nTraceback (most recent call last):\n  File x")
}

// TestSaltCallErrorsSpeakJinja: a failed Salt call and a key missing from
// the master's grains are reported as Jinja would, at their line.
func TestSaltCallErrorsSpeakJinja(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "reactor.conf"), "reactor:\n  - 'x/*':\n    - "+dir+"/f.sls\n  - 'y/*':\n    - "+dir+"/g.sls\n")
	writeTestFile(t, filepath.Join(dir, "f.sls"), "r:\n  local.test.arg:\n    - tgt: w\n    - arg:\n      - {{ salt['pillar.get']('minions', pillarenv=salt['environ.get']('P')) }}\n")
	writeTestFile(t, filepath.Join(dir, "g.sls"), "{% if grains['node_type'] != 'ns' %}\nr:\n  local.test.ping:\n    - tgt: w\n{% endif %}\n")
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	eng := MustNew(cfg, Options{SaltCalls: &reactions.SaltCalls{Caller: failingCaller{}, Allow: reactions.ReadOnlySaltCalls}})
	res, _ := eng.Process(context.Background(), event.Event{Tag: "x/1", Data: map[string]any{}})
	if errs := res.Errors(); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), filepath.Join(dir, "f.sls")+":5:") ||
		!strings.Contains(errs[0].Error(), "salt['environ.get'](...): salt-run salt.cmd pillar.get: context deadline exceeded") {
		t.Errorf("failed call: %v", errs)
	}
	eng = MustNew(cfg, Options{SaltCalls: &reactions.SaltCalls{Caller: &masterCaller{}, Allow: reactions.ReadOnlySaltCalls}})
	res, _ = eng.Process(context.Background(), event.Event{Tag: "y/1", Data: map[string]any{}})
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "g.sls:1:") || !strings.Contains(errs[0].Error(), "node_type") {
		t.Errorf("missing grain: %v", errs)
	}
	for _, e := range res.Errors() {
		for _, goSpeak := range []string{"executing", "error calling", "map has no entry", "<"} {
			if strings.Contains(e.Error(), goSpeak) {
				t.Errorf("error speaks Go (%q): %s", goSpeak, e)
			}
		}
	}
}

// TestSaltDictsAsJinjaSeesThem: grains is always defined (and kept by
// default), a file changing its copy of it changes no other render's, and
// a missing data['data'] is still worded for the event.
func TestSaltDictsAsJinjaSeesThem(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "reactor.conf"), "reactor:\n  - 'x/*':\n    - "+dir+"/f.sls\n  - 'y/*':\n    - "+dir+"/g.sls\n")
	writeTestFile(t, filepath.Join(dir, "f.sls"), `{% set g = grains|default({}) %}{% do g.update({'id': 'changed'}) %}
r:
  local.test.arg:
    - tgt: {{ grains['id'] }}
    - arg:
      - {{ grains is defined }}
      - {{ g['id'] }}
`)
	writeTestFile(t, filepath.Join(dir, "g.sls"), "r:\n  local.test.arg:\n    - tgt: {{ data['data']['x'] }}\n")
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	eng := MustNew(cfg, Options{SaltCalls: &reactions.SaltCalls{Caller: &masterCaller{}, Allow: reactions.ReadOnlySaltCalls}})
	for range 2 { // the second render is answered from the cache
		res, err := eng.Process(context.Background(), event.Event{Tag: "x/1", Data: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if got := summarize(res.Chunks); got != `local test.arg tgt="master1" arg=[true,"changed"]` {
			t.Fatalf("rendered %s, errors %v", got, res.Errors())
		}
	}
	res, _ := eng.Process(context.Background(), event.Event{Tag: "y/1", Data: map[string]any{}})
	if errs := res.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "data['data'] is undefined: 'dict object' has no attribute 'data'") {
		t.Errorf("missing data['data']: %v", errs)
	}
}
