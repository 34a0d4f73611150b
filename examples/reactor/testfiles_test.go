package reactor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/ruletest"
)

// TestRecipeTestFiles runs every recipe's reactions_test.yaml as
// `reactord test` does: each passes, and each holds an event that reacts
// and one that does not (or fails), so a recipe is tested both ways.
func TestRecipeTestFiles(t *testing.T) {
	recipes, _ := filepath.Glob("*/reactor.conf")
	files, _ := filepath.Glob("*/reactions_test.yaml")
	if len(files) != len(recipes) {
		t.Fatalf("%d recipes and %d reactions_test.yaml: every recipe ships its test file", len(recipes), len(files))
	}
	suites, err := ruletest.LoadAll(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range suites {
		positive, negative := false, false
		for _, tc := range s.Tests {
			positive = positive || len(tc.Expect) > 0
			negative = negative || tc.Expect != nil && len(tc.Expect) == 0 || tc.Error != ""
		}
		if !positive || !negative {
			t.Errorf("%s: want a test whose event reacts and one whose event does not (expect: [] or error:)", s.Path)
		}
	}
	rep := ruletest.Run(context.Background(), suites, ruletest.Options{})
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if rep.Failed() > 0 || rep.Total() < 3*len(files) {
		t.Errorf("reactord test %s: %d of %d failed\n%s", strings.Join(files, " "), rep.Failed(), rep.Total(), out.String())
	}
}
