// This file is not part of the reactord build (it lives under testdata):
// run.sh copies it into a scratch module together with the matchers package
// to compare matchers with github.com/gobwas/glob (issue 10 #19). The gobwas
// side must agree with matchers on every case before its figures count.

package matchers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/gobwas/glob"
)

func mustGobwas(t testing.TB, p string) *glob.Pattern {
	t.Helper()
	g, err := CompileGobwas(p)
	if err != nil {
		t.Fatalf("gobwas(%q -> %q): %v", p, ToGobwas(p), err)
	}
	return g
}

func TestGobwasCases(t *testing.T) {
	for _, tc := range fnmatchCases {
		if got := mustGobwas(t, tc.pattern).Match(tc.s); got != tc.want {
			t.Errorf("gobwas(%q -> %q).Match(%q) = %v, CPython %v", tc.pattern, ToGobwas(tc.pattern), tc.s, got, tc.want)
		}
	}
}

func TestGobwasGolden(t *testing.T) {
	f, err := os.Open("testdata/fnmatch_golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var rec [3]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		p, s, want := rec[0].(string), rec[1].(string), rec[2].(bool)
		n++
		if got := mustGobwas(t, p).Match(s); got != want {
			t.Errorf("gobwas(%q -> %q).Match(%q) = %v, CPython %v", p, ToGobwas(p), s, got, want)
		}
	}
	t.Logf("%d golden records", n)
}

func TestGobwasExhaustive(t *testing.T) {
	const alphabet = "a-!^[]*?\\z{},"
	subjects := []string{"", "a", "-", "!", "^", "[", "]", "\\", "z", "b", "aa", "a-", "-a", "[]", "az", "za", "a\n", "\xff", "{", "}", ",", "\uFFFD", "a\xff"}
	var patterns []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		patterns = append(patterns, prefix)
		if depth == 0 {
			return
		}
		for _, r := range alphabet {
			gen(prefix+string(r), depth-1)
		}
	}
	gen("", 4)
	bad := 0
	for _, p := range patterns {
		g := Compile(p)
		gb := mustGobwas(t, p)
		for _, s := range subjects {
			if got, want := gb.Match(s), g.Match(s); got != want {
				bad++
				if bad < 30 {
					t.Errorf("gobwas(%q -> %q).Match(%q) = %v, ours %v", p, ToGobwas(p), s, got, want)
				}
			}
		}
	}
	t.Logf("%d patterns x %d subjects, %d disagreements", len(patterns), len(subjects), bad)
}

func TestGobwasRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 10))
	bad, matched := 0, 0
	const n = 300000
	for range n {
		p := randomText(rng, 10)
		s := randomText(rng, 8)
		if rng.IntN(2) == 0 {
			s = strings.NewReplacer("*", randomText(rng, 3), "?", "a", "[", "", "]", "").Replace(p)
		}
		if rng.IntN(20) == 0 {
			s += "\xff"
		}
		want := Compile(p).Match(s)
		if want {
			matched++
		}
		if got := mustGobwas(t, p).Match(s); got != want {
			bad++
			if bad < 30 {
				t.Errorf("gobwas(%q -> %q).Match(%q) = %v, ours %v", p, ToGobwas(p), s, got, want)
			}
		}
	}
	t.Logf("%d random pairs (%d matching), %d disagreements", n, matched, bad)
}

func FuzzGobwasAgainstOurs(f *testing.F) {
	for _, tc := range fnmatchCases {
		f.Add(tc.pattern, tc.s)
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		g, err := CompileGobwas(p)
		if err != nil {
			t.Fatalf("gobwas(%q -> %q): %v", p, ToGobwas(p), err)
		}
		if got, want := g.Match(s), Compile(p).Match(s); got != want {
			t.Fatalf("gobwas(%q -> %q).Match(%q) = %v, ours %v", p, ToGobwas(p), s, got, want)
		}
	})
}

// gobwasTable is the rule table with gobwas doing the per-rule matching.
// matchLinear runs every rule; matchIndexed keeps Table's radix index of
// literal prefixes and runs gobwas on its candidates only, the fairest use
// of gobwas (it has no index of its own).
type gobwasTable struct {
	idx   *Table
	globs []*glob.Pattern
}

func newGobwasTable(t testing.TB, patterns []string) *gobwasTable {
	gt := &gobwasTable{idx: NewTable(patterns), globs: make([]*glob.Pattern, len(patterns))}
	for i, p := range patterns {
		gt.globs[i] = mustGobwas(t, p)
	}
	return gt
}

func (gt *gobwasTable) matchLinear(tag string, dst []int) []int {
	for i, g := range gt.globs {
		if g.Match(tag) {
			dst = append(dst, i)
		}
	}
	return dst
}

// matchIndexed walks the same radix tree as Table.Match.
func (gt *gobwasTable) matchIndexed(tag string, dst []int) []int {
	t := gt.idx
	n := t.root
	rest := tag
	for len(rest) > 0 {
		i := strings.IndexByte(n.firsts, rest[0])
		if i < 0 {
			break
		}
		kid := n.kids[i]
		if !strings.HasPrefix(rest, kid.label) {
			break
		}
		rest = rest[len(kid.label):]
		n = kid
	}
	for _, ri := range n.cands {
		if gt.globs[ri].Match(tag) {
			dst = append(dst, int(ri))
		}
	}
	return dst
}

// sizedPatterns extends benchPatterns' rules to n rules.
func sizedPatterns(n int) []string {
	patterns := []string{
		"salt/minion/*/start",
		"salt/beacon/*/inotify//etc/important_file",
		"salt/auth",
		"salt/job/*/ret/*",
		"salt/beacon/*/diskusage/*",
		"salt/presence/change",
		"myco/deploy/*/done",
	}
	for i := 0; len(patterns) < n; i++ {
		if i%2 == 0 {
			patterns = append(patterns, fmt.Sprintf("myco/app%d/*/event", i))
		} else {
			patterns = append(patterns, fmt.Sprintf("myco/svc%d/[ab]*/alert?", i))
		}
	}
	return patterns[:n]
}

var sizedTags = []struct{ name, tag string }{
	{"job_ret", "salt/job/20261122010001144547/ret/web1"},
	{"svc_alert", "myco/svc7/api/alert1"},
	{"app_event", "myco/app8/x/event"},
	{"miss", "myco/unknown/thing"},
}

func TestGobwasTablesAgree(t *testing.T) {
	for _, n := range []int{10, 1000, 10000} {
		pats := sizedPatterns(n)
		ours := NewTable(pats)
		gt := newGobwasTable(t, pats)
		for _, c := range sizedTags {
			a := ours.Match(c.tag, nil)
			b := gt.matchLinear(c.tag, nil)
			d := gt.matchIndexed(c.tag, nil)
			if fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(a) != fmt.Sprint(d) {
				t.Errorf("n=%d %s: ours %v, gobwas linear %v, indexed %v", n, c.name, a, b, d)
			}
		}
	}
}

func BenchmarkRuleTable(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		pats := sizedPatterns(n)
		ours := NewTable(pats)
		gt := newGobwasTable(b, pats)
		impls := []struct {
			name string
			f    func(string, []int) []int
		}{
			{"impl=ours", ours.Match},
			{"impl=gobwas_indexed", gt.matchIndexed},
			{"impl=gobwas_linear", gt.matchLinear},
		}
		for _, im := range impls {
			for _, c := range sizedTags {
				b.Run(fmt.Sprintf("rules=%d/%s/tag=%s", n, im.name, c.name), func(b *testing.B) {
					b.ReportAllocs()
					dst := make([]int, 0, n)
					for b.Loop() {
						dst = im.f(c.tag, dst[:0])
					}
				})
			}
		}
	}
}

func BenchmarkRuleTableBuild(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		pats := sizedPatterns(n)
		b.Run(fmt.Sprintf("rules=%d/impl=ours", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = NewTable(pats)
			}
		})
		b.Run(fmt.Sprintf("rules=%d/impl=gobwas", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range pats {
					if _, err := CompileGobwas(p); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkCompileOne(b *testing.B) {
	const p = "myco/svc7/[ab]*/alert?"
	b.Run("impl=ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Compile(p)
		}
	})
	b.Run("impl=gobwas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = CompileGobwas(p)
		}
	})
}
