package matchers

import "unicode/utf8"

// runeRange is an inclusive range of code points.
type runeRange struct {
	lo, hi rune
}

// class is the character set of a bracket expression.
type class struct {
	// ascii holds membership of the code points below utf8.RuneSelf with
	// negation already applied.
	ascii [2]uint64
	// ranges holds the members of the set before negation.
	ranges []runeRange
	negate bool
}

// has reports whether r belongs to the class.
func (c *class) has(r rune) bool {
	if r >= 0 && r < utf8.RuneSelf {
		return c.ascii[r>>6]&(1<<(uint(r)&63)) != 0
	}
	in := false
	for _, x := range c.ranges {
		if x.lo <= r && r <= x.hi {
			in = true
			break
		}
	}
	return in != c.negate
}

// classToken is one element of the set text that CPython feeds to its
// regular expression engine: a literal code point, or an unescaped "-"
// that joins two chunks and therefore acts as a range operator.
type classToken struct {
	r  rune
	op bool
}

// bracket compiles the text between "[" and the closing "]" into a token.
//
// It follows CPython's fnmatch.translate step by step: the text is split
// into chunks at hyphens, ranges that run backwards are removed by merging
// neighbouring chunks, and the result is read the way the re module reads
// a character set. Only the meaning of that set is kept.
func bracket(stuff []rune) token {
	var toks []classToken
	if !containsRune(stuff, '-') {
		for _, r := range stuff {
			toks = append(toks, classToken{r: r})
		}
	} else {
		toks = hyphenated(stuff)
	}

	negate := false
	if len(toks) > 0 && !toks[0].op && toks[0].r == '!' {
		negate = true
		toks = toks[1:]
	}

	// Read the set as re's parser does: an item, optionally followed by an
	// unescaped "-" and another item forming a range. An unescaped "-"
	// right before the closing bracket is a literal.
	var ranges []runeRange
	for i := 0; i < len(toks); {
		lo := toks[i].r
		i++
		if i < len(toks) && toks[i].op {
			if i+1 == len(toks) {
				ranges = append(ranges, runeRange{lo, lo}, runeRange{'-', '-'})
				break
			}
			hi := toks[i+1].r
			i += 2
			// CPython removes every backwards range before compiling,
			// so this cannot happen; an empty range adds nothing.
			if lo <= hi {
				ranges = append(ranges, runeRange{lo, hi})
			}
			continue
		}
		ranges = append(ranges, runeRange{lo, lo})
	}

	if len(ranges) == 0 {
		if negate {
			return token{kind: kAny}
		}
		return token{kind: kNever}
	}
	c := &class{ranges: ranges, negate: negate}
	for r := rune(0); r < utf8.RuneSelf; r++ {
		in := false
		for _, x := range ranges {
			if x.lo <= r && r <= x.hi {
				in = true
				break
			}
		}
		if in != negate {
			c.ascii[r>>6] |= 1 << (uint(r) & 63)
		}
	}
	return token{kind: kClass, cls: c}
}

// hyphenated handles a set that contains at least one "-", reproducing the
// chunking and empty range removal of CPython's fnmatch.translate.
func hyphenated(stuff []rune) []classToken {
	var chunks [][]rune
	start := 0
	k := 1
	if stuff[0] == '!' {
		k = 2
	}
	for {
		idx := indexRuneFrom(stuff, '-', k)
		if idx < 0 {
			break
		}
		chunks = append(chunks, clone(stuff[start:idx]))
		start = idx + 1
		k = idx + 3
	}
	switch {
	case start < len(stuff):
		chunks = append(chunks, clone(stuff[start:]))
	case len(chunks) > 0:
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], '-')
	default:
		// Unreachable: the set contains a "-", so some chunk is non-empty.
		chunks = append(chunks, []rune{'-'})
	}

	// Remove empty ranges (a-b with a > b), scanning from the right.
	for k := len(chunks) - 1; k > 0; k-- {
		a, b := chunks[k-1], chunks[k]
		if len(a) == 0 || len(b) == 0 || a[len(a)-1] <= b[0] {
			continue
		}
		merged := make([]rune, 0, len(a)+len(b)-2)
		merged = append(merged, a[:len(a)-1]...)
		merged = append(merged, b[1:]...)
		chunks[k-1] = merged
		chunks = append(chunks[:k], chunks[k+1:]...)
	}

	var toks []classToken
	for i, ch := range chunks {
		if i > 0 {
			toks = append(toks, classToken{r: '-', op: true})
		}
		for _, r := range ch {
			toks = append(toks, classToken{r: r})
		}
	}
	return toks
}

// containsRune reports whether rs contains r.
func containsRune(rs []rune, r rune) bool {
	return indexRuneFrom(rs, r, 0) >= 0
}

// indexRuneFrom returns the index of the first r in rs at or after from, or
// -1 if there is none.
func indexRuneFrom(rs []rune, r rune, from int) int {
	for i := from; i < len(rs); i++ {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// clone returns a copy of rs that does not share its backing array.
func clone(rs []rune) []rune {
	return append([]rune(nil), rs...)
}
