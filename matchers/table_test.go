package matchers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteForce is the obvious implementation Table.Match must agree with.
func bruteForce(patterns []string, tag string) []int {
	var out []int
	for i, p := range patterns {
		if Match(p, tag) {
			out = append(out, i)
		}
	}
	return out
}

func TestTableOrderAndDuplicates(t *testing.T) {
	patterns := []string{
		"salt/*",         // 0
		"salt/auth",      // 1
		"*",              // 2
		"salt/auth",      // 3 duplicate of 1
		"[z-a]",          // 4 never matches
		"salt/a*",        // 5
		"other",          // 6
		"salt/*",         // 7 duplicate of 0
		"sa",             // 8
		"salt/auth/more", // 9
		"?alt/auth",      // 10
	}
	tbl := NewTable(patterns)
	if tbl.Len() != len(patterns) {
		t.Fatalf("Len() = %d, want %d", tbl.Len(), len(patterns))
	}
	cases := []struct {
		tag  string
		want []int
	}{
		{"salt/auth", []int{0, 1, 2, 3, 5, 7, 10}},
		{"salt/auth/more", []int{0, 2, 5, 7, 9}},
		{"salt/x", []int{0, 2, 7}},
		{"sa", []int{2, 8}},
		{"s", []int{2}},
		{"", []int{2}},
		{"other", []int{2, 6}},
		{"z", []int{2}},
	}
	for _, tc := range cases {
		if got := tbl.Match(tc.tag, nil); !slices.Equal(got, tc.want) {
			t.Errorf("Match(%q) = %v, want %v", tc.tag, got, tc.want)
		}
	}
}

func TestTableAppendsToDst(t *testing.T) {
	tbl := NewTable([]string{"a*", "*b"})
	dst := []int{42}
	got := tbl.Match("ab", dst)
	if want := []int{42, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("Match = %v, want %v", got, want)
	}
	if got := tbl.Match("zz", dst[:1]); !slices.Equal(got, []int{42}) {
		t.Fatalf("Match = %v, want [42]", got)
	}
}

func TestEmptyTable(t *testing.T) {
	tbl := NewTable(nil)
	if tbl.Len() != 0 {
		t.Fatalf("Len() = %d", tbl.Len())
	}
	if got := tbl.Match("salt/auth", nil); len(got) != 0 {
		t.Fatalf("Match = %v", got)
	}
}

// TestTableAgreesWithGlobs runs every pattern of the CPython cases as one
// table and compares it with matching the patterns one by one.
func TestTableAgreesWithGlobs(t *testing.T) {
	var patterns, tags []string
	for _, tc := range fnmatchCases {
		patterns = append(patterns, tc.pattern)
		tags = append(tags, tc.s)
	}
	tbl := NewTable(patterns)
	for _, tag := range tags {
		if got, want := tbl.Match(tag, nil), bruteForce(patterns, tag); !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %v, want %v", tag, got, want)
		}
	}
}

// TestTableRandomPrefixes stresses the prefix tree with many patterns that
// share, nest and split literal prefixes.
func TestTableRandomPrefixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	word := func(n int) string {
		const alphabet = "ab/é*?[]!-"
		rs := []rune(alphabet)
		b := make([]rune, rng.IntN(n+1))
		for i := range b {
			r := rs[rng.IntN(len(rs))]
			// Keep literals common so that prefixes are long.
			if rng.IntN(3) != 0 {
				r = rs[rng.IntN(3)]
			}
			b[i] = r
		}
		return string(b)
	}
	for round := range 50 {
		patterns := make([]string, 1+rng.IntN(40))
		for i := range patterns {
			patterns[i] = word(8)
		}
		tbl := NewTable(patterns)
		for range 200 {
			tag := word(9)
			if got, want := tbl.Match(tag, nil), bruteForce(patterns, tag); !slices.Equal(got, want) {
				t.Fatalf("round %d: patterns %q: Match(%q) = %v, want %v", round, patterns, tag, got, want)
			}
		}
	}
}

// benchPatterns returns the 60 rule table used by the benchmarks.
func benchPatterns() []string {
	patterns := []string{
		"salt/minion/*/start",
		"salt/beacon/*/inotify//etc/important_file",
		"salt/auth",
		"salt/job/*/ret/*",
		"salt/beacon/*/diskusage/*",
		"salt/presence/change",
		"myco/deploy/*/done",
	}
	for i := 0; len(patterns) < 60; i++ {
		if i%2 == 0 {
			patterns = append(patterns, fmt.Sprintf("myco/app%d/*/event", i))
		} else {
			patterns = append(patterns, fmt.Sprintf("myco/svc%d/[ab]*/alert?", i))
		}
	}
	return patterns
}

func TestTableMatchAllocs(t *testing.T) {
	tbl := NewTable(benchPatterns())
	dst := make([]int, 0, 8)
	tags := []string{
		"salt/job/20261122010001144547/ret/web1",
		"myco/svc7/api/alert1",
		"myco/app8/x/event",
		"unrelated/tag",
	}
	for _, tag := range tags {
		allocs := testing.AllocsPerRun(100, func() {
			dst = tbl.Match(tag, dst[:0])
		})
		if allocs != 0 {
			t.Errorf("Match(%q) allocates %v times per call", tag, allocs)
		}
	}
	if got := tbl.Match("salt/job/20261122010001144547/ret/web1", nil); !slices.Equal(got, []int{3}) {
		t.Errorf("job return matched %v, want [3]", got)
	}
	if got := tbl.Match("myco/svc7/api/alert1", nil); len(got) != 1 {
		t.Errorf("svc alert matched %v, want one rule", got)
	}
}
