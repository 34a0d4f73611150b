package yaml11

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// go.yaml.in/yaml/v3 tells only a line for a syntax error, and for many
// errors the line where the enclosing collection, scalar or key starts
// rather than the problem's. The functions here find the position a
// newcomer needs: the problem itself (the shortest prefix of the source
// that fails the same way ends there), the quote that was not closed on
// its line, the tab, the flow bracket that was not closed.

// refineSyntaxError positions a syntax error reported at line (1-based,
// as go.yaml.in/yaml/v3 reports it) and adds the fix to its message where
// the cause is a classic one.
func refineSyntaxError(src []byte, line int, msg string) *Error {
	e := &Error{Line: line, Msg: msg}
	starts := lineStarts(src)
	if line < 1 || line > len(starts) {
		return e
	}
	switch {
	case strings.Contains(msg, "tab character") || msg == "found character that cannot start any token":
		if col := tabColumn(src, starts, line); col > 0 {
			e.Column = col
			if msg == "found character that cannot start any token" {
				e.Msg = "found a tab character that cannot start any token"
			}
			e.Msg += ": YAML does not allow tabs here; indent with spaces"
			return e
		}
	case msg == "did not find expected ',' or ']'" || msg == "did not find expected ',' or '}'":
		if col := unclosedBracket(src, starts, line); col > 0 {
			e.Column = col
			e.Msg += fmt.Sprintf(" (the %c opened here is not closed)", byteAt(src, offsetOf(src, starts, line, col)))
		}
		return e
	case strings.Contains(msg, "end of stream"):
		if q, ok := unclosedQuote(src, line, msg); ok {
			return q
		}
		return e
	}
	e.Line, e.Column = problemAt(src, starts, line, msg)
	if e.Column > 0 && parserProblems[msg] && byteAt(src, offsetOf(src, starts, e.Line, e.Column)) == ':' {
		// The parser fails at a key once it sees its ':'; point at the key.
		if c := firstNonBlank(src, starts, e.Line, e.Column); !strings.ContainsRune("[{", rune(byteAt(src, offsetOf(src, starts, e.Line, c)))) {
			e.Column = c
		}
	}
	if q, ok := unclosedQuote(src, e.Line, msg); ok {
		return q
	}
	if e.Msg == "found character that cannot start any token" && e.Column > 0 {
		if r, _ := utf8.DecodeRune(src[offsetOf(src, starts, e.Line, e.Column):]); r != utf8.RuneError {
			e.Msg = fmt.Sprintf("found character %s that cannot start any token; quote the value", pyRepr(string(r)))
		}
	}
	return e
}

// failsWith reports whether parsing src fails with the syntax problem msg.
func failsWith(src []byte, msg string) bool {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var n yaml.Node
	for {
		err := dec.Decode(&n)
		if err == nil {
			continue
		}
		if m := lineMsg.FindStringSubmatch(err.Error()); m != nil {
			return m[2] == msg
		}
		return err.Error() == "yaml: "+msg
	}
}

// problemAt finds where the problem reported at line (or later) is: the
// shortest prefix of src that fails with the same message ends on the
// problem's line, within the problem's token. It returns line and 0 when
// no prefix does.
func problemAt(src []byte, starts []int, line int, msg string) (int, int) {
	lineEnd := func(l int) int { // offset just past line l's text
		if l < len(starts) {
			return starts[l]
		}
		return len(src)
	}
	lo, hi := line, len(starts)
	if !failsWith(src[:lineEnd(hi)], msg) {
		return line, 0
	}
	for lo < hi { // smallest l in [line, hi] whose prefix fails
		mid := (lo + hi) / 2
		if failsWith(src[:lineEnd(mid)], msg) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	l := lo
	var cuts []int // rune boundaries within line l
	for i := starts[l-1]; i < lineEnd(l); {
		_, w := utf8.DecodeRune(src[i:])
		i += w
		cuts = append(cuts, i)
	}
	a, b := 0, len(cuts)-1
	for a < b {
		mid := (a + b) / 2
		if failsWith(src[:cuts[mid]], msg) {
			b = mid
		} else {
			a = mid + 1
		}
	}
	if len(cuts) == 0 {
		return l, 1
	}
	// The shortest failing prefix ends with the problem's first character.
	_, col := position(src, cuts[a]-1)
	return l, col
}

// firstNonBlank returns the column of the first character on line that is
// not a space, or col when there is none before it.
func firstNonBlank(src []byte, starts []int, line, col int) int {
	i := starts[line-1]
	for c := 1; c < col; c++ {
		if src[i] != ' ' {
			return c
		}
		i++
	}
	return col
}

// byteAt returns src[i], or 0 past its end.
func byteAt(src []byte, i int) byte {
	if i < len(src) {
		return src[i]
	}
	return 0
}

// offsetOf is the byte offset of a 1-based line and character column.
func offsetOf(src []byte, starts []int, line, col int) int {
	i := starts[line-1]
	for c := 1; c < col && i < len(src); c++ {
		_, w := utf8.DecodeRune(src[i:])
		i += w
	}
	return i
}

// tabColumn returns the column of the first tab on line, or 0.
func tabColumn(src []byte, starts []int, line int) int {
	end := len(src)
	if line < len(starts) {
		end = starts[line]
	}
	i := bytes.IndexByte(src[starts[line-1]:end], '\t')
	if i < 0 {
		return 0
	}
	_, col := position(src, starts[line-1]+i)
	return col
}

// unclosedBracket returns the column of the outermost flow bracket opened
// on line and not closed on it, or 0.
func unclosedBracket(src []byte, starts []int, line int) int {
	end := len(src)
	if line < len(starts) {
		end = starts[line]
	}
	text := src[starts[line-1]:end]
	var open []int
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '#' && (i == 0 || text[i-1] == ' ' || text[i-1] == '\t'):
			i = len(text)
		case (c == '\'' || c == '"') && len(open) > 0 && tokenStart(text, i):
			quote = c
		case c == '[' || c == '{':
			open = append(open, i)
		case (c == ']' || c == '}') && len(open) > 0:
			open = open[:len(open)-1]
		}
	}
	if len(open) == 0 {
		return 0
	}
	_, col := position(src, starts[line-1]+open[0])
	return col
}

// tokenStart reports whether text[i] may start a token: it follows a line
// start, a blank or a flow indicator.
func tokenStart(text []byte, i int) bool {
	if i == 0 {
		return true
	}
	return strings.IndexByte(" \t[{,", text[i-1]) >= 0
}

// quoteSpan is a quoted scalar of the source: the offsets of its opening
// quote and of its closing one (-1 when it is never closed).
type quoteSpan struct {
	start, end int
}

// quotedScalars lists the quoted scalars of src that span more than one
// line or are never closed, found by a light scan that knows comments,
// plain scalars (a quote inside one is text) and block scalars.
func quotedScalars(src []byte) []quoteSpan {
	var out []quoteSpan
	n := len(src)
	i := 0
	for i < n {
		// One line: find its indentation, then its tokens.
		ls := i
		for i < n && src[i] == ' ' {
			i++
		}
		indent := i - ls
		plain := false
		block := false
		for i < n && src[i] != '\n' {
			c := src[i]
			switch {
			case c == ' ' || c == '\t':
				i++
				continue
			case c == '#' && (i == ls || src[i-1] == ' ' || src[i-1] == '\t'):
				for i < n && src[i] != '\n' {
					i++
				}
				continue
			case plain:
				if c == ':' && (i+1 == n || src[i+1] == ' ' || src[i+1] == '\n' || src[i+1] == '\r') {
					plain = false
				} else if c == ',' || c == ']' || c == '}' {
					plain = false
				}
				i++
				continue
			case c == '\'' || c == '"':
				s := i
				i++
				for i < n {
					if c == '\'' && src[i] == '\'' {
						if i+1 < n && src[i+1] == '\'' {
							i += 2
							continue
						}
						break
					}
					if c == '"' && src[i] == '\\' {
						i += 2
						continue
					}
					if c == '"' && src[i] == '"' {
						break
					}
					i++
				}
				if i >= n {
					out = append(out, quoteSpan{s, -1})
					return out
				}
				if bytes.IndexByte(src[s:i], '\n') >= 0 {
					out = append(out, quoteSpan{s, i})
				}
				i++
				continue
			case c == '|' || c == '>':
				block = true
				i++
				continue
			case strings.IndexByte("-?:[]{},&*!", c) >= 0:
				if c == '&' || c == '*' || c == '!' { // anchor, alias, tag: skip the name
					for i < n && src[i] != ' ' && src[i] != '\n' {
						i++
					}
					continue
				}
				i++
				continue
			default:
				plain = true
				i++
			}
		}
		if i < n {
			i++ // the line break
		}
		if block { // skip the block scalar's lines: blank or more indented
			for i < n {
				j := i
				for j < n && src[j] == ' ' {
					j++
				}
				if j < n && src[j] != '\n' && src[j] != '\r' && j-i <= indent {
					break
				}
				for j < n && src[j] != '\n' {
					j++
				}
				i = j
				if i < n {
					i++
				}
			}
		}
	}
	return out
}

// unclosedQuote explains an error reported at line by a quote left open on
// an earlier line (or never closed): the string runs on into the lines
// after it, where the YAML stops making sense.
func unclosedQuote(src []byte, line int, msg string) (*Error, bool) {
	for _, q := range quotedScalars(src) {
		sl, sc := position(src, q.start)
		if sl > line {
			break
		}
		quote := src[q.start]
		if q.end < 0 {
			return &Error{Line: sl, Column: sc, Msg: fmt.Sprintf("unclosed quote: the string this %c starts is never closed (%s); close it on line %d", quote, msg, sl)}, true
		}
		el, _ := position(src, q.end)
		if sl < line && el >= line-1 && el <= line {
			return &Error{Line: sl, Column: sc, Msg: fmt.Sprintf("unclosed quote: the string this %c starts runs on to line %d (%s); close it on line %d", quote, el, msg, sl)}, true
		}
	}
	return nil, false
}
