// This file is not part of the reactord build (it lives under testdata):
// run.sh copies it into a scratch module together with the matchers package
// to compare matchers with github.com/gobwas/glob (issue 10 #19).

package matchers

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gobwas/glob"
)

// The surrogates: decoding never yields them, and a pattern cannot spell
// them in UTF-8, so they are left out of the translated classes.
const (
	surLo = 0xD800
	surHi = 0xDFFF
)

// ToGobwas translates a Python fnmatch pattern into gobwas/glob syntax, to be
// compiled with no separators (so "*" crosses "/", as in Salt). It reads the
// pattern with matchers' own parser, which follows CPython's
// fnmatch.translate, so "{", "}", "," and "\" are literals, "[!...]" is a
// negated set and "[^...]" a set holding "^". gobwas classes are a single
// range or a list, so other sets become a "{[..],[..]}" alternation of
// ranges, or the negation of a single range or a short list.
func ToGobwas(pattern string) string {
	var b strings.Builder
	for _, t := range parse(pattern) {
		switch t.kind {
		case kStar:
			b.WriteByte('*')
		case kAny:
			b.WriteByte('?')
		case kNever:
			b.WriteString(neverClass)
		case kRune:
			if t.r == utf8.RuneError {
				// Our matcher reads an invalid byte as U+FFFD; a gobwas
				// literal would compare bytes, a class decodes.
				b.WriteString("[\uFFFD-\uFFFD]")
				continue
			}
			if strings.ContainsRune(`*?\[]{}`, t.r) {
				b.WriteByte('\\')
			}
			b.WriteRune(t.r)
		case kClass:
			writeClass(&b, t.cls)
		}
	}
	return b.String()
}

// neverClass matches no character at all.
const neverClass = "[!\x00-\U0010FFFF]"

// set returns the members of c as sorted, disjoint, non-adjacent ranges of
// valid (non-surrogate) code points, negation applied.
func (c *class) set() []runeRange {
	rs := slices.Clone(c.ranges)
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var m []runeRange
	for _, r := range rs {
		if n := len(m); n > 0 && r.lo <= m[n-1].hi+1 {
			m[n-1].hi = max(m[n-1].hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	if c.negate {
		m = complement(m)
	}
	return clipSurrogates(m)
}

// complement returns the code points not in m (sorted, disjoint ranges).
func complement(m []runeRange) []runeRange {
	var out []runeRange
	next := rune(0)
	for _, r := range m {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, runeRange{next, utf8.MaxRune})
	}
	return out
}

// clipSurrogates removes U+D800..U+DFFF from m.
func clipSurrogates(m []runeRange) []runeRange {
	var out []runeRange
	for _, r := range m {
		if r.hi < surLo || r.lo > surHi {
			out = append(out, r)
			continue
		}
		if r.lo < surLo {
			out = append(out, runeRange{r.lo, surLo - 1})
		}
		if r.hi > surHi {
			out = append(out, runeRange{surHi + 1, r.hi})
		}
	}
	return out
}

// singles reports whether every range of m is a single code point.
func singles(m []runeRange) bool {
	for _, r := range m {
		if r.lo != r.hi {
			return false
		}
	}
	return true
}

// writeList writes the set of the single code points in m, negated if not.
func writeList(b *strings.Builder, not bool, m []runeRange) {
	if len(m) == 1 && (not || m[0].lo != '!') {
		// A range is faster than a set, and "[\-]" would read as one.
		writeRange(b, not, m[0])
		return
	}
	b.WriteByte('[')
	if not {
		b.WriteByte('!')
	}
	// The escape keeps the first member from starting a range or negating
	// the set, except for "-": "\-" reads as a range from "\", so "-"
	// goes last.
	dash := false
	for _, r := range m {
		if r.lo == '-' {
			dash = true
			continue
		}
		b.WriteByte('\\')
		b.WriteRune(r.lo)
	}
	if dash {
		b.WriteString("\\-")
	}
	b.WriteByte(']')
}

// writeRange writes the range r, negated if not.
func writeRange(b *strings.Builder, not bool, r runeRange) {
	b.WriteByte('[')
	if not {
		b.WriteByte('!')
	}
	b.WriteRune(r.lo)
	b.WriteByte('-')
	b.WriteRune(r.hi)
	b.WriteByte(']')
}

// writeClass writes the set of a bracket expression.
func writeClass(b *strings.Builder, c *class) {
	m := c.set()
	all := []runeRange{{0, surLo - 1}, {surHi + 1, utf8.MaxRune}}
	comp := clipSurrogates(complement(m))
	switch {
	case len(m) == 0:
		b.WriteString(neverClass)
	case slices.Equal(m, all):
		b.WriteByte('?')
	case len(m) == 1 && m[0].lo != '!' && m[0].lo != m[0].hi:
		writeRange(b, false, m[0])
	case singles(m) && len(m) <= 8:
		writeList(b, false, m)
	case len(comp) == 1 && comp[0].lo != comp[0].hi:
		writeRange(b, true, comp[0])
	case singles(comp) && len(comp) <= 8:
		writeList(b, true, comp)
	case singles(m):
		writeList(b, false, m)
	default:
		b.WriteByte('{')
		for i, r := range m {
			if i > 0 {
				b.WriteByte(',')
			}
			if r.lo == '!' {
				b.WriteString(`[\!]`)
				if r.hi == '!' {
					continue
				}
				b.WriteByte(',')
				r.lo++
			}
			writeRange(b, false, r)
		}
		b.WriteByte('}')
	}
}

// CompileGobwas translates and compiles pattern with gobwas/glob.
func CompileGobwas(pattern string) (*glob.Pattern, error) {
	return glob.Compile(ToGobwas(pattern))
}
