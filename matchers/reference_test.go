package matchers

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// This file holds an independent reference implementation: a port of
// CPython's fnmatch.translate that produces the same Python regular
// expression text, plus a converter from that text to Go regexp syntax.
// The matcher under test never builds regular expressions, so agreement
// between the two is meaningful.

// pyEscapeSet lists the characters Python's re.escape backslash-escapes.
const pyEscapeSet = "()[]{}?*+-|^$\\.&~# \t\n\r\v\f"

// pyEscape mirrors re.escape for a single character.
func pyEscape(r rune) string {
	if strings.ContainsRune(pyEscapeSet, r) {
		return `\` + string(r)
	}
	return string(r)
}

// pyTranslate returns the regular expression CPython 3.11's
// fnmatch.translate builds for pat, character for character.
func pyTranslate(pat string) string {
	const star = "\x00STAR" // cannot collide: real entries are escaped text
	pr := []rune(pat)
	var res []string
	n := len(pr)
	i := 0
	for i < n {
		c := pr[i]
		i++
		switch c {
		case '*':
			if len(res) == 0 || res[len(res)-1] != star {
				res = append(res, star)
			}
		case '?':
			res = append(res, ".")
		case '[':
			j := i
			if j < n && pr[j] == '!' {
				j++
			}
			if j < n && pr[j] == ']' {
				j++
			}
			for j < n && pr[j] != ']' {
				j++
			}
			if j >= n {
				res = append(res, `\[`)
				continue
			}
			var stuff string
			if !strings.ContainsRune(string(pr[i:j]), '-') {
				stuff = strings.ReplaceAll(string(pr[i:j]), `\`, `\\`)
			} else {
				var chunks []string
				k := i + 1
				if pr[i] == '!' {
					k = i + 2
				}
				for {
					k = pyFind(pr, '-', k, j)
					if k < 0 {
						break
					}
					chunks = append(chunks, string(pr[i:k]))
					i = k + 1
					k += 3
				}
				if chunk := string(pr[i:j]); chunk != "" {
					chunks = append(chunks, chunk)
				} else {
					chunks[len(chunks)-1] += "-"
				}
				for k := len(chunks) - 1; k > 0; k-- {
					prev, cur := []rune(chunks[k-1]), []rune(chunks[k])
					if prev[len(prev)-1] > cur[0] {
						chunks[k-1] = string(prev[:len(prev)-1]) + string(cur[1:])
						chunks = append(chunks[:k], chunks[k+1:]...)
					}
				}
				parts := make([]string, len(chunks))
				for x, s := range chunks {
					s = strings.ReplaceAll(s, `\`, `\\`)
					parts[x] = strings.ReplaceAll(s, `-`, `\-`)
				}
				stuff = strings.Join(parts, "-")
			}
			var b strings.Builder
			for _, r := range stuff {
				if r == '&' || r == '~' || r == '|' {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
			stuff = b.String()
			i = j + 1
			switch {
			case stuff == "":
				res = append(res, "(?!)")
			case stuff == "!":
				res = append(res, ".")
			default:
				if stuff[0] == '!' {
					stuff = "^" + stuff[1:]
				} else if stuff[0] == '^' || stuff[0] == '[' {
					stuff = `\` + stuff
				}
				res = append(res, "["+stuff+"]")
			}
		default:
			res = append(res, pyEscape(c))
		}
	}

	var out strings.Builder
	i, n = 0, len(res)
	for i < n && res[i] != star {
		out.WriteString(res[i])
		i++
	}
	for i < n {
		i++ // the star
		if i == n {
			out.WriteString(".*")
			break
		}
		var fixed strings.Builder
		for i < n && res[i] != star {
			fixed.WriteString(res[i])
			i++
		}
		if i == n {
			out.WriteString(".*" + fixed.String())
		} else {
			out.WriteString("(?>.*?" + fixed.String() + ")")
		}
	}
	return `(?s:` + out.String() + `)\Z`
}

// pyFind mirrors str.find(sub, start, end) for a single rune.
func pyFind(rs []rune, r rune, start, end int) int {
	for x := start; x < end && x < len(rs); x++ {
		if rs[x] == r {
			return x
		}
	}
	return -1
}

// goRegexp converts the output of pyTranslate into an equivalent anchored
// Go regular expression. Every literal becomes \x{...}, so nothing in the
// input can be misread by Go's parser (for example "[:" or "\d").
func goRegexp(py string) (string, error) {
	body, ok := strings.CutPrefix(py, "(?s:")
	if ok {
		body, ok = strings.CutSuffix(body, `)\Z`)
	}
	if !ok {
		return "", fmt.Errorf("unexpected translation %q", py)
	}
	rs := []rune(body)
	lit := func(r rune) string { return fmt.Sprintf(`\x{%x}`, r) }
	var b strings.Builder
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '\\':
			i++
			b.WriteString(lit(rs[i]))
		case '(':
			rest := string(rs[i:])
			switch {
			case strings.HasPrefix(rest, "(?!)"):
				b.WriteString(`[^\x{0}-\x{10ffff}]`)
				i += 3
			case strings.HasPrefix(rest, "(?>"):
				// The atomic group only prunes backtracking; for
				// fixed-width contents it matches the same strings.
				b.WriteString("(?:")
				i += 2
			default:
				return "", fmt.Errorf("unexpected group in %q", py)
			}
		case ')', '.', '*', '?':
			b.WriteRune(c)
		case '[':
			b.WriteByte('[')
			i++
			if rs[i] == '^' {
				b.WriteByte('^')
				i++
			}
			for first := true; ; first = false {
				if i >= len(rs) {
					return "", fmt.Errorf("unterminated set in %q", py)
				}
				r := rs[i]
				if r == ']' && !first {
					b.WriteByte(']')
					break
				}
				switch r {
				case '\\':
					i++
					b.WriteString(lit(rs[i]))
				case '-':
					b.WriteByte('-')
				default:
					b.WriteString(lit(r))
				}
				i++
			}
		default:
			b.WriteString(lit(c))
		}
	}
	return `\A(?s:` + b.String() + `)\z`, nil
}

// referenceMatcher compiles the reference regular expression for pattern.
func referenceMatcher(pattern string) (*regexp.Regexp, error) {
	expr, err := goRegexp(pyTranslate(pattern))
	if err != nil {
		return nil, err
	}
	return regexp.Compile(expr)
}

// referenceMatch matches s with re, decoding each invalid UTF-8 byte of s
// as U+FFFD first, which is the documented meaning of such bytes.
func referenceMatch(re *regexp.Regexp, s string) bool {
	return re.MatchString(string([]rune(s)))
}

func TestPyTranslateAgreesWithCPython(t *testing.T) {
	// Expected values printed by CPython 3.11.7's fnmatch.translate.
	cases := map[string]string{
		"[!]a-]":      `(?s:[^]a\-])\Z`,
		"[z-a!b]":     `(?s:[^b])\Z`,
		"[z-a!]":      `(?s:.)\Z`,
		"[c-bz-a]":    `(?s:(?!))\Z`,
		"[]-a]":       `(?s:[]-a])\Z`,
		"[!--/]":      `(?s:[^\--/])\Z`,
		"[a--b]":      `(?s:[b])\Z`,
		`\*`:          `(?s:\\.*)\Z`,
		"[^0-9]":      `(?s:[\^0-9])\Z`,
		"[[:alpha:]]": `(?s:[\[:alpha:]\])\Z`,
		"a*b?c*d":     `(?s:a(?>.*?b.c).*d)\Z`,
		"**a**":       `(?s:(?>.*?a).*)\Z`,
		"[&~|]x":      `(?s:[\&\~\|]x)\Z`,
	}
	for pat, want := range cases {
		if got := pyTranslate(pat); got != want {
			t.Errorf("pyTranslate(%q) = %q, want %q", pat, got, want)
		}
	}
}

func TestMatchAgreesWithReferenceOnCases(t *testing.T) {
	for _, tc := range fnmatchCases {
		re, err := referenceMatcher(tc.pattern)
		if err != nil {
			t.Fatalf("reference for %q: %v", tc.pattern, err)
		}
		if got := referenceMatch(re, tc.s); got != tc.want {
			t.Errorf("reference(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestMatchAgreesWithReferenceExhaustive compares every pattern of up to
// four characters over a small alphabet with the reference.
func TestMatchAgreesWithReferenceExhaustive(t *testing.T) {
	const alphabet = "a-!^[]*?\\z"
	subjects := []string{"", "a", "-", "!", "^", "[", "]", "\\", "z", "b", "aa", "a-", "-a", "[]", "az", "za", "a\n", "\xff"}
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
	depth := 4
	if testing.Short() {
		depth = 3
	}
	gen("", depth)
	for _, p := range patterns {
		re, err := referenceMatcher(p)
		if err != nil {
			t.Fatalf("reference for %q: %v", p, err)
		}
		g := Compile(p)
		for _, s := range subjects {
			if got, want := g.Match(s), referenceMatch(re, s); got != want {
				t.Errorf("Compile(%q).Match(%q) = %v, reference says %v (regexp %s)", p, s, got, want, re)
			}
		}
	}
}

func FuzzMatchAgainstReference(f *testing.F) {
	for _, tc := range fnmatchCases {
		f.Add(tc.pattern, tc.s)
	}
	f.Add("[!]a-]", "]")
	f.Add("[z-a!b]", "c")
	f.Add("*[a-]?*", "x-y")
	f.Add("\xff*", "\xfe\xe2\x82")
	f.Add("*?\xe2\x82\xac", "\xe2\xe2\x82\xac")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := referenceMatcher(pattern)
		if err != nil {
			// Go's regexp refuses some very large expressions; Python
			// never fails, so anything else is a bug in the reference.
			if strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "nesting depth") {
				t.Skip(err)
			}
			t.Fatalf("reference for %q: %v", pattern, err)
		}
		if got, want := Compile(pattern).Match(s), referenceMatch(re, s); got != want {
			t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v (regexp %s)", pattern, s, got, want, re)
		}
	})
}
