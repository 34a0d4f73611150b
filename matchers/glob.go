// Package matchers implements Salt reactor tag matching.
//
// Salt matches event tags against reactor patterns with Python's
// fnmatch.fnmatch. On POSIX systems that function does not normalise case,
// so matching is case-sensitive, and it translates the pattern into an
// anchored regular expression compiled with DOTALL. This package reproduces
// those semantics exactly without using regular expressions:
//
//   - "*" matches any run of characters, including "/" and newlines.
//     Consecutive stars behave like a single star.
//   - "?" matches exactly one character, including "/" and newlines.
//   - "[...]" matches one character from a set. A leading "!" negates the
//     set, a "]" right after the opening bracket (or after the "!") is a
//     literal, and "a-z" denotes a range. A leading "^" is a literal
//     character, not a negation. Ranges whose end is below their start are
//     dropped the way CPython drops them, so "[z-a]" never matches and
//     "[!z-a]" matches any single character.
//   - A "[" without a closing "]" is a literal "[".
//   - A backslash is an ordinary character; there is no escaping.
//   - Every other character matches itself.
//
// The whole tag must match the pattern. Characters are Unicode code points.
// Bytes that are not valid UTF-8 count as one character each with the value
// U+FFFD, both in patterns and in tags. No pattern is ever rejected.
//
// The design allowed github.com/gobwas/glob here instead (compiled with no
// separators, patterns translated from fnmatch). A translation that agrees
// with this package on every test case was measured on the rule table at
// 10, 1,000 and 10,000 rules (issue 10 #19). Behind the same prefix index
// gobwas was level at 10 rules but about 1.5 times slower at 1,000 and
// 10,000 (4 times on the rule with a "[...]" class); without the index
// (gobwas has none) a lookup grew with the rule count, to about 0.1 ms at
// 10,000 rules. Compiling costs the same. This package is kept;
// matchers/testdata/gobwas/run.sh repeats the comparison outside the module,
// so go.mod does not need gobwas/glob.
package matchers

import (
	"strings"
	"unicode/utf8"
)

// kind identifies what a compiled token matches.
type kind uint8

const (
	// kLit is a literal run of valid UTF-8 without U+FFFD, which can be
	// compared byte by byte.
	kLit kind = iota
	// kRune is a single literal code point that must be compared after
	// decoding (used for U+FFFD, which also stands for invalid bytes).
	kRune
	// kAny matches any one character.
	kAny
	// kClass matches one character of a bracket expression.
	kClass
	// kNever never matches (a bracket expression with an empty set).
	kNever
	// kStar only exists while compiling; it separates segments.
	kStar
)

// token is one element of a compiled pattern.
type token struct {
	kind kind
	r    rune
	lit  string
	cls  *class
}

// segment is a run of fixed-width tokens between stars. It always matches
// exactly the same number of characters.
type segment struct {
	toks     []token
	minBytes int
}

// Glob is a compiled Salt tag glob.
//
// A Glob is immutable once compiled and safe for concurrent use.
type Glob struct {
	pattern string
	// prefix is the leading literal of the pattern; every match starts
	// with these bytes.
	prefix string
	// head holds the tokens after prefix up to the first star, or all
	// remaining tokens when the pattern has no star.
	head segment
	// mids holds the segments between stars.
	mids []segment
	// tail holds the tokens after the last star.
	tail segment
	// star reports whether the pattern contains at least one star.
	star bool
	// never reports whether the pattern can match nothing at all.
	never bool
	// minLen is a lower bound on the byte length of a matching string.
	minLen int
}

// Compile compiles a Salt tag glob. It never fails: every string is a valid
// pattern, exactly as in Python's fnmatch.
func Compile(pattern string) *Glob {
	g := &Glob{pattern: pattern}
	var groups [][]token
	cur := []token{}
	for _, t := range parse(pattern) {
		if t.kind == kStar {
			groups = append(groups, cur)
			cur = []token{}
			continue
		}
		cur = append(cur, t)
	}
	groups = append(groups, cur)
	segs := make([]segment, len(groups))
	for i, grp := range groups {
		segs[i] = newSegment(grp)
		g.minLen += segs[i].minBytes
		for _, t := range segs[i].toks {
			if t.kind == kNever {
				g.never = true
			}
		}
	}
	head := segs[0]
	if len(head.toks) > 0 && head.toks[0].kind == kLit {
		g.prefix = head.toks[0].lit
		head.minBytes -= len(g.prefix)
		head.toks = head.toks[1:]
	}
	g.head = head
	if len(segs) > 1 {
		g.star = true
		g.mids = segs[1 : len(segs)-1]
		g.tail = segs[len(segs)-1]
	}
	return g
}

// Match reports whether pattern matches s with Python fnmatch semantics. It
// compiles pattern on every call; use Compile or NewTable for repeated use.
func Match(pattern, s string) bool {
	return Compile(pattern).Match(s)
}

// String returns the source pattern of g.
func (g *Glob) String() string {
	return g.pattern
}

// Match reports whether the whole of s matches g.
func (g *Glob) Match(s string) bool {
	if g.never || len(s) < g.minLen || !strings.HasPrefix(s, g.prefix) {
		return false
	}
	return g.matchRest(s)
}

// matchRest matches s, which is known to start with g.prefix and to be at
// least g.minLen bytes long, against the rest of g.
func (g *Glob) matchRest(s string) bool {
	p, ok := g.head.matchAt(s, len(g.prefix))
	if !ok {
		return false
	}
	if !g.star {
		return p == len(s)
	}
	// The tail matches a fixed number of characters at the very end.
	q, ok := g.tail.matchBefore(s, len(s))
	if !ok || q < p {
		return false
	}
	// Each middle segment takes its leftmost occurrence. Because segments
	// have a fixed width, this never needs to backtrack.
	s = s[:q]
	for i := range g.mids {
		if p, ok = g.mids[i].find(s, p); !ok {
			return false
		}
	}
	return true
}

// parse turns a pattern into tokens following CPython's fnmatch.translate.
// Literals are returned one code point at a time as kRune tokens.
func parse(pattern string) []token {
	pr := []rune(pattern)
	var out []token
	n := len(pr)
	// CPython rescans to the end of the pattern for every unclosed "[",
	// which is quadratic; knowing where the last "]" is avoids that.
	lastClose := -1
	for i := n - 1; i >= 0; i-- {
		if pr[i] == ']' {
			lastClose = i
			break
		}
	}
	for i := 0; i < n; {
		c := pr[i]
		i++
		switch c {
		case '*':
			if len(out) == 0 || out[len(out)-1].kind != kStar {
				out = append(out, token{kind: kStar})
			}
		case '?':
			out = append(out, token{kind: kAny})
		case '[':
			j := i
			if j >= lastClose {
				// No "]" can close this bracket: it is a literal.
				out = append(out, token{kind: kRune, r: '['})
				continue
			}
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
				out = append(out, token{kind: kRune, r: '['})
				continue
			}
			out = append(out, bracket(pr[i:j:j]))
			i = j + 1
		default:
			out = append(out, token{kind: kRune, r: c})
		}
	}
	return out
}

// newSegment merges adjacent literal code points into byte-comparable runs
// and computes the minimum byte width of the segment.
func newSegment(toks []token) segment {
	var seg segment
	var run []byte
	flush := func() {
		if len(run) > 0 {
			seg.toks = append(seg.toks, token{kind: kLit, lit: string(run)})
			seg.minBytes += len(run)
			run = run[:0]
		}
	}
	for _, t := range toks {
		if t.kind == kRune && t.r != utf8.RuneError {
			run = utf8.AppendRune(run, t.r)
			continue
		}
		flush()
		seg.toks = append(seg.toks, t)
		seg.minBytes++
	}
	flush()
	return seg
}

// next returns the code point at s[p] and its width in bytes. Invalid UTF-8
// yields utf8.RuneError with width 1. p must be less than len(s).
func next(s string, p int) (rune, int) {
	if c := s[p]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[p:])
}

// prev returns the code point that ends at s[e] (exclusive) and its width.
// Decoding backwards agrees with decoding forwards for every string, valid
// or not. e must be positive.
func prev(s string, e int) (rune, int) {
	if c := s[e-1]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeLastRuneInString(s[:e])
}

// matches reports whether the single-character token t accepts r.
func (t *token) matches(r rune) bool {
	switch t.kind {
	case kAny:
		return true
	case kRune:
		return r == t.r
	case kClass:
		return t.cls.has(r)
	}
	return false
}

// matchAt matches seg against s starting at byte offset p and returns the
// offset just after the match.
func (seg *segment) matchAt(s string, p int) (int, bool) {
	for i := range seg.toks {
		t := &seg.toks[i]
		if t.kind == kLit {
			if len(s)-p < len(t.lit) || s[p:p+len(t.lit)] != t.lit {
				return 0, false
			}
			p += len(t.lit)
			continue
		}
		if p >= len(s) {
			return 0, false
		}
		r, w := next(s, p)
		if !t.matches(r) {
			return 0, false
		}
		p += w
	}
	return p, true
}

// matchBefore matches seg against s so that the match ends at byte offset e
// and returns the offset where the match starts.
func (seg *segment) matchBefore(s string, e int) (int, bool) {
	for i := len(seg.toks) - 1; i >= 0; i-- {
		t := &seg.toks[i]
		if t.kind == kLit {
			if e < len(t.lit) || s[e-len(t.lit):e] != t.lit {
				return 0, false
			}
			e -= len(t.lit)
			continue
		}
		if e <= 0 {
			return 0, false
		}
		r, w := prev(s, e)
		if !t.matches(r) {
			return 0, false
		}
		e -= w
	}
	return e, true
}

// find returns the end of the leftmost match of seg in s at or after byte
// offset p, which must be a character boundary.
func (seg *segment) find(s string, p int) (int, bool) {
	if len(seg.toks) > 0 && seg.toks[0].kind == kLit {
		// A valid UTF-8 literal starts with a byte that cannot continue a
		// multi-byte sequence, so every hit is a character boundary.
		lit := seg.toks[0].lit
		for len(s)-p >= seg.minBytes {
			i := strings.Index(s[p:], lit)
			if i < 0 {
				return 0, false
			}
			p += i
			if e, ok := seg.matchAt(s, p); ok {
				return e, true
			}
			p++
		}
		return 0, false
	}
	for len(s)-p >= seg.minBytes {
		if e, ok := seg.matchAt(s, p); ok {
			return e, true
		}
		if p >= len(s) {
			break
		}
		_, w := next(s, p)
		p += w
	}
	return 0, false
}
