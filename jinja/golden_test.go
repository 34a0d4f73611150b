package jinja

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
)

var update = flag.Bool("update", false, "rewrite the expected outputs of testdata/*.txtar")

// TestConvertGolden runs testdata/*.test: each holds a Jinja reaction file
// after "-- in --" and, after "-- out --", the Go template it converts to,
// or, after "-- err --", the positioned problems that refuse it.
func TestConvertGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			in, want, kind := splitGolden(t, string(raw))
			out, cerr := Convert("x.sls", []byte(in))
			var got, gotKind string
			if cerr != nil {
				got, gotKind = cerr.Error()+"\n", "err"
			} else {
				got, gotKind = string(out), "out"
				// The output must be a valid Go template.
				if _, err := template.New("x").Funcs(stubFuncs()).Option("missingkey=error").Parse(got); err != nil {
					t.Errorf("output does not parse as a Go template: %v", err)
				}
			}
			if *update {
				if err := os.WriteFile(path, []byte("-- in --\n"+in+"-- "+gotKind+" --\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if gotKind != kind || got != want {
				t.Errorf("got -- %s --\n%s\nwant -- %s --\n%s", gotKind, got, kind, want)
			}
		})
	}
}

func splitGolden(t *testing.T, s string) (in, want, kind string) {
	t.Helper()
	rest, ok := strings.CutPrefix(s, "-- in --\n")
	if !ok {
		t.Fatal("golden file must start with -- in --")
	}
	for _, k := range []string{"out", "err"} {
		if a, b, ok := strings.Cut(rest, "-- "+k+" --\n"); ok {
			return a, b, k
		}
	}
	t.Fatal("golden file needs -- out -- or -- err --")
	return
}

// stubFuncs declares the helper names so that outputs parse.
func stubFuncs() template.FuncMap {
	fm := template.FuncMap{}
	for _, n := range strings.Fields(`pyEq pyNe pyLt pyLe pyGt pyGe pyIn pyTruth pyStr pyRepr pyAdd pyConcat getOr pyLength pyJoin pyFirst pyLast pyUnique pySplit pySlice pyReplace pyLower pyUpper pyStrip startsWith endsWith pyItems pyKeys pyValues jsonEncode tojsonEncode yamlDquote yamlSquote yamlEncode loadJson regexSearch pyNone pyChars pySub pyMul pyDiv pyFloorDiv pyMod pyNeg pyInt pyFloat pyRound pyPercent pyFormat pyIs pyIndex pySliceStep pyOrdered pyMap pySelectAttr pyRejectAttr regexMatchPy pyValue pyPprint pyHasIndex pyIndexOr saltCall
		hasKey fail list dict append concat set kindIs ternary until untilStep add sub mul subf mulf int float64`) {
		fm[n] = func(...any) any { return nil }
	}
	return fm
}
