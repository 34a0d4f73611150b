// Package jinja translates Salt's Jinja reaction files into reactord's Go
// templates. It parses the subset of Jinja that reaction files use, keeping
// the line and column of every node, and translates it into a text/template
// source that renders what Jinja renders, with the Python-semantics helpers
// of package jinja/py (pyEq, pyStr, getOr, ...), which package reactions
// gives every template. A construct it cannot translate faithfully refuses
// the whole file, with every problem positioned.
package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reactord/reactord/internal/position"
)

// Pos is a position in the source: 1-based line and column (in runes).
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Node is a template statement.
type Node interface{ Position() Pos }

// Expr is an expression.
type Expr interface{ Position() Pos }

// Statements.
type (
	// Text is literal template text, after whitespace control.
	Text struct {
		P Pos
		S string
	}
	// Output is {{ X }}.
	Output struct {
		P Pos
		X Expr
	}
	// If is {% if %}...{% elif %}...{% else %}...{% endif %}.
	If struct {
		P        Pos
		Branches []Branch
		Else     []Node // nil without {% else %}
	}
	// Branch is one if or elif condition and its body.
	Branch struct {
		P    Pos
		Cond Expr
		Body []Node
	}
	// Set is {% set Name = X %}.
	Set struct {
		P    Pos
		Name string
		Attr string // {% set ns.attr = X %} (a namespace's attribute)
		X    Expr
	}
	// For is {% for Vars in X %}Body{% else %}Else{% endfor %}.
	For struct {
		P    Pos
		Vars []string
		X    Expr
		// If is the loop filter of {% for x in seq if cond %}, or nil.
		If   Expr
		Body []Node
		Else []Node // nil without {% else %}
	}
	// Do is {% do X %}.
	Do struct {
		P Pos
		X Expr
	}
	// Pad stands for N newlines of the source that render nothing: in a
	// comment, inside a tag, or removed by whitespace control. Only
	// parse with keepLines makes it.
	Pad struct {
		P Pos
		N int
	}
	// LoopControl is {% break %} or {% continue %}.
	LoopControl struct {
		P    Pos
		Word string
	}
)

// Expressions.
type (
	// Lit is a constant: string, int64, float64, bool or nil (None).
	Lit struct {
		P Pos
		V any
	}
	// Name is a variable reference.
	Name struct {
		P    Pos
		Name string
	}
	// List is a list (or tuple) literal.
	List struct {
		P     Pos
		Items []Expr
	}
	// Dict is a dict literal.
	Dict struct {
		P          Pos
		Keys, Vals []Expr
	}
	// Attr is X.Name.
	Attr struct {
		P    Pos
		X    Expr
		Name string
	}
	// Index is X[Key].
	Index struct {
		P      Pos
		X, Key Expr
	}
	// Slice is X[Lo:Hi:Step]; absent parts are nil.
	Slice struct {
		P               Pos
		X, Lo, Hi, Step Expr
	}
	// Call is Fn(Args, Kwargs).
	Call struct {
		P      Pos
		Fn     Expr
		Args   []Expr
		Kwargs []Kwarg
	}
	// Kwarg is a keyword argument.
	Kwarg struct {
		Name string
		X    Expr
	}
	// Filter is X|Name(Args, Kwargs).
	Filter struct {
		P      Pos
		X      Expr
		Name   string
		Args   []Expr
		Kwargs []Kwarg
	}
	// Test is X is [not] Name(Args).
	Test struct {
		P    Pos
		X    Expr
		Name string
		Args []Expr
		Not  bool
	}
	// Binary is L Op R: or and == != < <= > >= in notin + - * / // % ** ~.
	Binary struct {
		P    Pos
		Op   string
		L, R Expr
	}
	// Unary is Op X: not, -, +.
	Unary struct {
		P  Pos
		Op string
		X  Expr
	}
	// CondExpr is Then if Cond else Else (Else nil when absent).
	CondExpr struct {
		P                Pos
		Then, Cond, Else Expr
	}
)

func (n *Text) Position() Pos        { return n.P }
func (n *Output) Position() Pos      { return n.P }
func (n *If) Position() Pos          { return n.P }
func (n *Set) Position() Pos         { return n.P }
func (n *For) Position() Pos         { return n.P }
func (n *Do) Position() Pos          { return n.P }
func (n *LoopControl) Position() Pos { return n.P }
func (n *Pad) Position() Pos         { return n.P }
func (n *Lit) Position() Pos         { return n.P }
func (n *Name) Position() Pos        { return n.P }
func (n *List) Position() Pos        { return n.P }
func (n *Dict) Position() Pos        { return n.P }
func (n *Attr) Position() Pos        { return n.P }
func (n *Index) Position() Pos       { return n.P }
func (n *Slice) Position() Pos       { return n.P }
func (n *Call) Position() Pos        { return n.P }
func (n *Filter) Position() Pos      { return n.P }
func (n *Test) Position() Pos        { return n.P }
func (n *Binary) Position() Pos      { return n.P }
func (n *Unary) Position() Pos       { return n.P }
func (n *CondExpr) Position() Pos    { return n.P }

// Error is one positioned problem: a syntax error or a construct that
// cannot be translated.
type Error struct {
	position.Pos
	// Construct is the Jinja construct, Why what is wrong with it.
	Construct string
	Why       string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Construct + ": " + e.Why }

// errorAt returns an error about construct at p in file ("" when the
// caller names the file later).
func errorAt(file string, p Pos, construct, why string) *Error {
	return &Error{Pos: position.Pos{File: file, Line: p.Line, Col: p.Col}, Construct: construct, Why: why}
}

// token kinds
const (
	tText = iota
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
	tPad // newlines that render nothing (keepLines)
)

type token struct {
	kind int
	s    string // text, name, operator or source of a number
	v    any    // decoded string or number
	pos  Pos
}

type lexer struct {
	src  string
	i    int
	line int
	col  int
	toks []token
	// keepLines adds a tPad token for the newlines that render nothing.
	keepLines bool
}

// pad records n newlines that render nothing, at p (keepLines).
func (l *lexer) pad(p Pos, n int) {
	if l.keepLines && n > 0 {
		l.toks = append(l.toks, token{kind: tPad, v: n, pos: p})
	}
}

func (l *lexer) pos() Pos { return Pos{l.line, l.col} }

func (l *lexer) advance(n int) {
	for _, r := range l.src[l.i : l.i+n] {
		if r == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
	}
	l.i += n
}

// lex splits src into tokens, applying whitespace control to text.
func lex(src string, keepLines bool) ([]token, *Error) {
	l := &lexer{src: src, line: 1, col: 1, keepLines: keepLines}
	stripNext := false
	for l.i < len(l.src) {
		start := l.pos()
		j := nextTag(l.src, l.i)
		text := l.src[l.i:j]
		if stripNext {
			trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
			l.pad(start, strings.Count(text[:len(text)-len(trimmed)], "\n"))
			text = trimmed
			stripNext = false
		}
		rightPad := 0
		if j < len(l.src) && j+2 < len(l.src) && l.src[j+2] == '-' {
			trimmed := strings.TrimRightFunc(text, unicode.IsSpace)
			rightPad = strings.Count(text[len(trimmed):], "\n")
			text = trimmed
		}
		if text != "" {
			l.toks = append(l.toks, token{kind: tText, s: text, pos: start})
		}
		l.pad(start, rightPad)
		l.advance(j - l.i)
		if l.i >= len(l.src) {
			break
		}
		tagPos := l.pos()
		open := l.src[l.i : l.i+2]
		if end, _, strip, ok := rawTag(l.src, l.i, "raw"); ok {
			s, err := l.lexRaw(tagPos, end, strip)
			if err != nil {
				return nil, err
			}
			stripNext = s
			continue
		}
		l.advance(2)
		if l.i < len(l.src) && (l.src[l.i] == '-' || l.src[l.i] == '+') {
			l.advance(1)
		}
		switch open {
		case "{#":
			k := strings.Index(l.src[l.i:], "#}")
			if k < 0 {
				return nil, errorAt("", tagPos, "{#", "comment not closed")
			}
			if k > 0 && l.src[l.i+k-1] == '-' {
				stripNext = true
			}
			l.advance(k + 2)
			l.pad(tagPos, l.line-tagPos.Line)
			continue
		case "{{":
			l.toks = append(l.toks, token{kind: tVarBegin, pos: tagPos})
		case "{%":
			l.toks = append(l.toks, token{kind: tBlockBegin, pos: tagPos})
		}
		strip, err := l.lexInside(open, tagPos)
		if err != nil {
			return nil, err
		}
		l.pad(tagPos, l.line-tagPos.Line)
		stripNext = strip
	}
	l.toks = append(l.toks, token{kind: tEOF, pos: l.pos()})
	return l.toks, nil
}

// rawTag matches {% raw %} (word "raw") or {% endraw %} (word "endraw")
// at src[i:], as Jinja's lexer does: "{%", an optional - or +, spaces,
// the word, spaces and "%}" or "-%}" ("+%}" too for endraw; a raw tag
// with anything else in it is an ordinary statement, which Jinja then
// calls an unknown tag). It returns the offset after the closer, the
// sign after "{%" (0 for none) and whether the closer is "-%}", which
// strips the whitespace after the tag.
func rawTag(src string, i int, word string) (end int, sign byte, strip, ok bool) {
	if !strings.HasPrefix(src[i:], "{%") {
		return 0, 0, false, false
	}
	k := i + 2
	if k < len(src) && (src[k] == '-' || src[k] == '+') {
		sign = src[k]
		k++
	}
	k = skipSpace(src, k)
	if !strings.HasPrefix(src[k:], word) {
		return 0, 0, false, false
	}
	k = skipSpace(src, k+len(word))
	rest := src[k:]
	switch {
	case strings.HasPrefix(rest, "-%}"):
		return k + 3, sign, true, true
	case strings.HasPrefix(rest, "%}"):
		return k + 2, sign, false, true
	case word == "endraw" && strings.HasPrefix(rest, "+%}"):
		return k + 3, sign, false, true
	}
	return 0, 0, false, false
}

// skipSpace returns the offset of the first non-space rune at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// lexRaw reads a raw block whose {% raw %} tag starts at the lexer's
// offset, at tagPos, and ends at end (strip: it ends with "-%}"). The
// block's text up to the first {% endraw %} is one text token, kept as
// written: Jinja reads nothing in it, {{ }}, {% %} and {# #} included.
// It reports whether the {% endraw -%} asks to strip the whitespace after
// it. Like Jinja, it takes a {% raw %} at the very end of the file as an
// empty block.
func (l *lexer) lexRaw(tagPos Pos, end int, strip bool) (bool, *Error) {
	l.advance(end - l.i)
	l.pad(tagPos, l.line-tagPos.Line)
	if strip {
		p, line := l.pos(), l.line
		l.advance(skipSpace(l.src, l.i) - l.i)
		l.pad(p, l.line-line)
	}
	if l.i >= len(l.src) {
		return false, nil
	}
	m := l.i
	var endEnd int
	var sign byte
	for {
		k := strings.Index(l.src[m:], "{%")
		if k < 0 {
			return false, errorAt("", tagPos, "{% raw %}", "raw block not closed with {% endraw %}")
		}
		m += k
		var ok bool
		if endEnd, sign, strip, ok = rawTag(l.src, m, "endraw"); ok {
			break
		}
		m += 2
	}
	start := l.pos()
	text := l.src[l.i:m]
	rightPad := 0
	if sign == '-' {
		trimmed := strings.TrimRightFunc(text, unicode.IsSpace)
		rightPad = strings.Count(text[len(trimmed):], "\n")
		text = trimmed
	}
	if text != "" {
		l.toks = append(l.toks, token{kind: tText, s: text, pos: start})
	}
	l.pad(start, rightPad)
	l.advance(m - l.i)
	endPos := l.pos()
	l.advance(endEnd - l.i)
	l.pad(endPos, l.line-endPos.Line)
	return strip, nil
}

// nextTag returns the offset of the next {{, {% or {# at or after i, or
// len(s).
func nextTag(s string, i int) int {
	for {
		k := strings.IndexByte(s[i:], '{')
		if k < 0 || i+k+1 >= len(s) {
			return len(s)
		}
		switch s[i+k+1] {
		case '{', '%', '#':
			return i + k
		}
		i += k + 1
	}
}

var ops3 = []string{"//", "**", "==", "!=", "<=", ">="}

// lexInside tokenizes a tag's contents up to its closing delimiter and
// reports whether the closer asked to strip the following whitespace.
func (l *lexer) lexInside(open string, tagPos Pos) (bool, *Error) {
	closer := "}}"
	endKind := tVarEnd
	if open == "{%" {
		closer, endKind = "%}", tBlockEnd
	}
	depth := 0
	for {
		for l.i < len(l.src) && unicode.IsSpace(rune(l.src[l.i])) {
			l.advance(1)
		}
		if l.i >= len(l.src) {
			return false, errorAt("", tagPos, open, "tag not closed with "+closer)
		}
		p := l.pos()
		rest := l.src[l.i:]
		if depth == 0 {
			if strings.HasPrefix(rest, "-"+closer) {
				l.advance(3)
				l.toks = append(l.toks, token{kind: endKind, pos: p})
				return true, nil
			}
			if strings.HasPrefix(rest, closer) {
				l.advance(2)
				l.toks = append(l.toks, token{kind: endKind, pos: p})
				return false, nil
			}
		}
		c := rest[0]
		switch {
		case c == '_' || unicode.IsLetter(rune(c)):
			k := 1
			for k < len(rest) && (rest[k] == '_' || rest[k] < utf8.RuneSelf && (unicode.IsLetter(rune(rest[k])) || unicode.IsDigit(rune(rest[k])))) {
				k++
			}
			l.toks = append(l.toks, token{kind: tName, s: rest[:k], pos: p})
			l.advance(k)
		case c >= '0' && c <= '9':
			k := 0
			isFloat := false
			for k < len(rest) && (rest[k] >= '0' && rest[k] <= '9' || rest[k] == '_') {
				k++
			}
			if k+1 < len(rest) && rest[k] == '.' && rest[k+1] >= '0' && rest[k+1] <= '9' {
				isFloat = true
				k++
				for k < len(rest) && (rest[k] >= '0' && rest[k] <= '9' || rest[k] == '_') {
					k++
				}
			}
			if k < len(rest) && (rest[k] == 'e' || rest[k] == 'E') {
				m := k + 1
				if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
					m++
				}
				if m < len(rest) && rest[m] >= '0' && rest[m] <= '9' {
					isFloat = true
					k = m
					for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
						k++
					}
				}
			}
			num := strings.ReplaceAll(rest[:k], "_", "")
			if isFloat {
				f, err := strconv.ParseFloat(num, 64)
				if err != nil {
					return false, errorAt("", p, rest[:k], "bad number")
				}
				l.toks = append(l.toks, token{kind: tFloat, s: num, v: f, pos: p})
			} else {
				n, err := strconv.ParseInt(num, 10, 64)
				if err != nil {
					return false, errorAt("", p, rest[:k], "integer out of range")
				}
				l.toks = append(l.toks, token{kind: tInt, s: num, v: n, pos: p})
			}
			l.advance(k)
		case c == '\'' || c == '"':
			s, n, err := pyString(rest)
			if err != "" {
				return false, errorAt("", p, "string literal", err)
			}
			l.toks = append(l.toks, token{kind: tString, s: rest[:n], v: s, pos: p})
			l.advance(n)
		default:
			op := string(c)
			for _, o := range ops3 {
				if strings.HasPrefix(rest, o) {
					op = o
				}
			}
			if !strings.Contains("+-*/%~<>=!()[]{},.:|", string(c)) || op == "!" {
				return false, errorAt("", p, string(c), "unexpected character")
			}
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			l.toks = append(l.toks, token{kind: tOp, s: op, pos: p})
			l.advance(len(op))
		}
	}
}

// pyString decodes a Python string literal at the start of s, returning
// the value and the literal's length.
func pyString(s string) (string, int, string) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, ""
		case c == '\\' && i+1 < len(s):
			e := s[i+1]
			i += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'a':
				b.WriteByte(7)
			case 'b':
				b.WriteByte(8)
			case 'f':
				b.WriteByte(12)
			case 'v':
				b.WriteByte(11)
			case '\\', '\'', '"':
				b.WriteByte(e)
			case '\n':
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n > len(s) {
					return "", 0, "bad \\" + string(e) + " escape"
				}
				r, err := strconv.ParseUint(s[i:i+n], 16, 32)
				if err != nil {
					return "", 0, "bad \\" + string(e) + " escape"
				}
				b.WriteRune(rune(r))
				i += n
			default:
				// Python keeps an unknown escape as written.
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, "string not closed"
}
