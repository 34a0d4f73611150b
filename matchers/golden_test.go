package matchers

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMatchGolden checks a pattern by subject grid whose expected results
// were recorded from CPython's fnmatch by testdata/gen_golden.py.
func TestMatchGolden(t *testing.T) {
	f, err := os.Open("testdata/fnmatch_golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	globs := map[string]*Glob{}
	for sc.Scan() {
		lines++
		var rec [3]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		p, pok := rec[0].(string)
		s, sok := rec[1].(string)
		want, wok := rec[2].(bool)
		if !pok || !sok || !wok {
			t.Fatalf("line %d: malformed record %s", lines, sc.Text())
		}
		g := globs[p]
		if g == nil {
			g = Compile(p)
			globs[p] = g
		}
		if got := g.Match(s); got != want {
			t.Errorf("Compile(%q).Match(%q) = %v, CPython says %v", p, s, got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines < 1000 {
		t.Fatalf("golden file has only %d records", lines)
	}
}

// pythonCheck reads a JSON list of [pattern, subject] pairs on stdin and
// prints the list of fnmatch.fnmatch results.
const pythonCheck = `
import fnmatch, json, sys, warnings
warnings.simplefilter("ignore")
pairs = json.load(sys.stdin)
json.dump([fnmatch.fnmatch(s, p) for p, s in pairs], sys.stdout)
`

// randomText returns a short string biased towards fnmatch metacharacters.
func randomText(rng *rand.Rand, maxLen int) string {
	const pieces = "ab/-!^[]*?\\z\n.é日" + "\U0001F600"
	rs := []rune(pieces)
	n := rng.IntN(maxLen + 1)
	var b strings.Builder
	for range n {
		b.WriteRune(rs[rng.IntN(len(rs))])
	}
	return b.String()
}

// TestMatchAgreesWithPython cross-checks random pattern and subject pairs
// against the python3 on this machine, if there is one.
func TestMatchAgreesWithPython(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping python3 cross-check in short mode")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not available")
	}
	rng := rand.New(rand.NewPCG(20261122, 1))
	pairs := make([][2]string, 0, 1000)
	for len(pairs) < cap(pairs) {
		p := randomText(rng, 8)
		s := randomText(rng, 6)
		// Half of the subjects are derived from the pattern so that a
		// useful share of the pairs match.
		if rng.IntN(2) == 0 {
			s = strings.NewReplacer("*", randomText(rng, 3), "?", "a", "[", "", "]", "").Replace(p)
		}
		pairs = append(pairs, [2]string{p, s})
	}
	in, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", pythonCheck)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want []bool
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("python3 output: %v", err)
	}
	if len(want) != len(pairs) {
		t.Fatalf("python3 returned %d results for %d pairs", len(want), len(pairs))
	}
	matched := 0
	for i, pr := range pairs {
		got := Match(pr[0], pr[1])
		if got != want[i] {
			t.Errorf("Match(%q, %q) = %v, python3 says %v", pr[0], pr[1], got, want[i])
		}
		if want[i] {
			matched++
		}
	}
	t.Logf("%d pairs, %d matching", len(pairs), matched)
}
