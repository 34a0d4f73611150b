// Package reactor holds reactord's example recipes; this test renders each
// recipe's sample events and compares the low chunks and errors with the
// expected files next to them, and runs each recipe's reactions_test.yaml.
package reactor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/reactions"
	"github.com/reactord/reactord/ruletest"
	"github.com/reactord/reactord/schemas"
)

var update = flag.Bool("update", false, "rewrite the expected files")

// TestRecipes renders events/*.json of every recipe through its
// reactor.conf, and through jinja/reactor.conf (the same recipe in Salt's
// Jinja) when it has one, and compares with expected/<event>.json (the
// chunks, with the folder of the reactor.conf spelled $RECIPE: both
// versions must give the same) and expected/<event>.err beside that
// reactor.conf (errors, if any: each version words its own). The Salt
// calls a recipe's files make are answered by the stubs of its
// reactions_test.yaml.
func TestRecipes(t *testing.T) {
	recipes, _ := filepath.Glob("*/reactor.conf")
	jinja, _ := filepath.Glob("*/jinja/reactor.conf")
	if len(recipes) < 4 || len(jinja) < 4 {
		t.Fatalf("found %d recipes and %d Jinja versions, want at least 4 of each", len(recipes), len(jinja))
	}
	for _, conf := range append(recipes, jinja...) {
		dir := filepath.Dir(conf)
		recipe := strings.TrimSuffix(dir, string(filepath.Separator)+"jinja")
		t.Run(dir, func(t *testing.T) {
			if rep := engine.Check(conf, ""); len(rep.Problems) > 0 {
				t.Fatalf("reactord check: %v", rep.Problems)
			}
			cfg, err := config.Load(conf)
			if err != nil {
				t.Fatal(err)
			}
			stubs, err := ruletest.LoadStubs(filepath.Join(recipe, "reactions_test.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			eng, err := ruletest.NewEngine(cfg, stubs, reactions.ReadOnlySaltCalls, nil)
			if err != nil {
				t.Fatal(err)
			}
			events, _ := filepath.Glob(filepath.Join(recipe, "events", "*.json"))
			if len(events) == 0 {
				t.Fatal("recipe has no sample events")
			}
			for _, evPath := range events {
				name := strings.TrimSuffix(filepath.Base(evPath), ".json")
				t.Run(name, func(t *testing.T) { golden(t, eng, recipe, dir, evPath) })
			}
		})
	}
}

// golden renders one sample event of a recipe with the reactor.conf in
// dir (the recipe's folder or its jinja/) and compares (see TestRecipes).
func golden(t *testing.T, eng *engine.Engine, recipe, dir, evPath string) {
	name := strings.TrimSuffix(filepath.Base(evPath), ".json")
	abs, _ := filepath.Abs(dir)
	src, err := os.ReadFile(evPath)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Decode(src)
	if err != nil {
		t.Fatal(err)
	}
	var plain any
	_ = json.Unmarshal(src, &plain)
	if err := schemas.Validate(schemas.Event, plain); err != nil {
		t.Fatalf("sample event fails the event schema: %v", err)
	}
	res, err := eng.Process(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, len(res.Chunks))
	for i, c := range res.Chunks {
		list[i] = c
	}
	raw, _ := event.AppendJSON(nil, list)
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, raw, "", "  ")
	pretty.WriteByte('\n')
	got := strings.ReplaceAll(pretty.String(), abs, "$RECIPE")
	var errs strings.Builder
	for _, e := range res.Errors() {
		errs.WriteString(strings.ReplaceAll(e.Error(), abs, "$RECIPE") + "\n")
	}
	wantPath := filepath.Join(recipe, "expected", name+".json")
	errPath := filepath.Join(dir, "expected", name+".err")
	if *update {
		if dir == recipe { // the Jinja version is compared, never written
			_ = os.MkdirAll(filepath.Dir(wantPath), 0o755)
			_ = os.WriteFile(wantPath, []byte(got), 0o644)
		}
		_ = os.Remove(errPath)
		if errs.Len() > 0 {
			_ = os.MkdirAll(filepath.Dir(errPath), 0o755)
			_ = os.WriteFile(errPath, []byte(errs.String()), 0o644)
		}
		return
	}
	want, err := os.ReadFile(wantPath)
	if err != nil {
		t.Fatalf("missing expected file (run with -update): %v", err)
	}
	if got != string(want) {
		t.Errorf("chunks differ\n--- want (%s)\n%s--- got\n%s", wantPath, want, got)
	}
	wantErr, _ := os.ReadFile(errPath)
	if errs.String() != string(wantErr) {
		t.Errorf("errors differ\n--- want (%s)\n%s--- got\n%s", errPath, wantErr, errs.String())
	}
}
