package archtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestChecksSeeDrift: the comparisons fail on docs that drifted from the
// code, and pass on docs that match it, with packages and imports made up
// for the purpose.
func TestChecksSeeDrift(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/a", Imports: []string{module + "/b", module + "/internal/x", "fmt"}},
		{ImportPath: module + "/b", Imports: []string{module + "/internal/x"}},
		{ImportPath: module + "/internal/x"},
	}
	table := "| package | role |\n| --- | --- |\n| `a` | top |\n| `b` | under a |\n| `internal/x` | helper |\n"
	picture := "```imports\na → b\nb →\n* → internal/*\n```\n"
	for _, tc := range []struct {
		name, table, picture string
		want                 []string // a substring of each problem, in order
	}{
		{"in step", table, picture, nil},
		{"row missing", strings.Replace(table, "| `b` | under a |\n", "", 1), picture, []string{"package b has no row"}},
		{"row for nothing", table + "| `c` | gone |\n", picture, []string{"c is not a package"}},
		{"import without arrow", table, strings.Replace(picture, "a → b", "a →", 1), []string{"a imports b, and the picture has no arrow"}},
		{"arrow without import", table, strings.Replace(picture, "b →", "b → a", 1), []string{"arrow b → a, but b does not import a"}},
		{"arrow to nothing", table, strings.Replace(picture, "a → b", "a → b, c", 1), []string{"c is not a package"}},
		{"helpers not allowed", table, strings.Replace(picture, "* → internal/*\n", "", 1), []string{"a imports internal/x", "b imports internal/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := layoutTable([]byte(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			edges, listed, err := pictureEdges([]byte(tc.picture))
			if err != nil {
				t.Fatal(err)
			}
			got := append(compareTable(rows, pkgs), comparePicture(edges, listed, pkgs)...)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d (%q)", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// TestMalformedDocs: a picture or table the checks cannot read is an
// error, not an empty map that checks nothing.
func TestMalformedDocs(t *testing.T) {
	for name, doc := range map[string]string{
		"no block":     "a → b\n",
		"not closed":   "```imports\na → b\n",
		"no arrow":     "```imports\na b\n```\n",
		"twice a line": "```imports\na → b\na → c\n```\n",
	} {
		if _, _, err := pictureEdges([]byte(doc)); err == nil {
			t.Errorf("picture %s: no error", name)
		}
	}
	for name, doc := range map[string]string{
		"no table":  "# Layout\n",
		"duplicate": "| `a` | x |\n| `a` | y |\n",
	} {
		if _, err := layoutTable([]byte(doc)); err == nil {
			t.Errorf("table %s: no error", name)
		}
	}
}

// TestSizeLimits: a file or function over its limit is reported, one at
// the limit is not.
func TestSizeLimits(t *testing.T) {
	body := func(lines int) string { // a function of exactly lines lines
		return "func f() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	lit := func(lines int) string { // a func literal of exactly lines lines
		return "var g = func() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"at the limits", "package p\n\n" + body(maxFuncLines) + lit(maxFuncLines), nil},
		{"long function", "package p\n\n" + body(maxFuncLines+1), []string{"f is 81 lines"}},
		{"long literal", "package p\n\n" + lit(maxFuncLines+1), []string{"func literal is 81 lines"}},
		{"long file", "package p\n" + strings.Repeat("\n", maxFileLines), []string{fmt.Sprintf("%d lines, more than %d", maxFileLines+1, maxFileLines)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sizeProblems("p.go", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
