// Package reactor holds reactord's example recipes; this test renders each
// recipe's sample events and compares the low chunks and errors with the
// expected files next to them.
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
	"github.com/reactord/reactord/schemas"
)

var update = flag.Bool("update", false, "rewrite the expected files")

// TestRecipes renders events/*.json of every recipe through its
// reactor.conf and compares with expected/<event>.json (the chunks, with the
// recipe folder spelled $RECIPE) and expected/<event>.err (errors, if any).
func TestRecipes(t *testing.T) {
	recipes, _ := filepath.Glob("*/reactor.conf")
	if len(recipes) < 4 {
		t.Fatalf("found %d recipes, want at least 4", len(recipes))
	}
	for _, conf := range recipes {
		recipe := filepath.Dir(conf)
		t.Run(recipe, func(t *testing.T) {
			abs, _ := filepath.Abs(recipe)
			if rep := engine.Check(conf, ""); len(rep.Problems) > 0 {
				t.Fatalf("reactord check: %v", rep.Problems)
			}
			cfg, err := config.Load(conf)
			if err != nil {
				t.Fatal(err)
			}
			eng := engine.MustNew(cfg, engine.Options{})
			events, _ := filepath.Glob(filepath.Join(recipe, "events", "*.json"))
			if len(events) == 0 {
				t.Fatal("recipe has no sample events")
			}
			for _, evPath := range events {
				name := strings.TrimSuffix(filepath.Base(evPath), ".json")
				t.Run(name, func(t *testing.T) {
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
					errPath := filepath.Join(recipe, "expected", name+".err")
					if *update {
						_ = os.MkdirAll(filepath.Dir(wantPath), 0o755)
						_ = os.WriteFile(wantPath, []byte(got), 0o644)
						_ = os.Remove(errPath)
						if errs.Len() > 0 {
							_ = os.WriteFile(errPath, []byte(errs.String()), 0o644)
						}
						return
					}
					want, err := os.ReadFile(wantPath)
					if err != nil {
						t.Fatalf("missing expected file (run with -update): %v", err)
					}
					if got != string(want) {
						t.Errorf("chunks differ\n--- want\n%s--- got\n%s", want, got)
					}
					wantErr, _ := os.ReadFile(errPath)
					if errs.String() != string(wantErr) {
						t.Errorf("errors differ\n--- want\n%s--- got\n%s", wantErr, errs.String())
					}
				})
			}
		})
	}
}
