package jinja

import (
	"fmt"
	"strings"
)

// Parse parses a Jinja template. Syntax errors stop the parse; statements
// that the translator cannot support (macro, import, include, ...) are
// collected and parsing goes on, so every such problem is reported.
func Parse(file, src string) ([]Node, []*Error) { return parse(file, src, false) }

// parse is Parse, with Pad nodes for the newlines that render nothing
// when keepLines is set.
func parse(file, src string, keepLines bool) ([]Node, []*Error) {
	toks, lerr := lex(src, keepLines)
	if lerr != nil {
		lerr.File = file
		return nil, []*Error{lerr}
	}
	p := &parser{file: file, toks: toks}
	nodes, err := p.parseBody(nil)
	if err != nil {
		return nil, append(p.refusals, err)
	}
	return nodes, p.refusals
}

type parser struct {
	file     string
	toks     []token
	i        int
	refusals []*Error
}

// syntaxErr is a parse error; it stops the parse.
type syntaxErr struct{ e *Error }

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) fail(t token, construct, why string) {
	panic(syntaxErr{errorAt(p.file, t.pos, construct, why)})
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tVarEnd:
		return "}}"
	case tBlockEnd:
		return "%}"
	case tText:
		return "text"
	}
	return t.s
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.s == s
}

func (p *parser) isName(s string) bool {
	t := p.peek()
	return t.kind == tName && t.s == s
}

func (p *parser) expectOp(s string) token {
	t := p.next()
	if t.kind != tOp || t.s != s {
		p.fail(t, describe(t), fmt.Sprintf("expected %q", s))
	}
	return t
}

func (p *parser) expectName() token {
	t := p.next()
	if t.kind != tName {
		p.fail(t, describe(t), "expected a name")
	}
	return t
}

func (p *parser) expectBlockEnd() {
	t := p.next()
	if t.kind != tBlockEnd {
		p.fail(t, describe(t), "expected %}")
	}
}

// parseBody parses statements until one of the end words (at a block
// start) or the end of the file; the end word's tag is left unconsumed.
func (p *parser) parseBody(ends []string) (nodes []Node, err *Error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(syntaxErr)
			if !ok {
				panic(r)
			}
			err = se.e
		}
	}()
	return p.body(ends), nil
}

var unsupportedBlocks = map[string]string{
	"macro":      "macros are not supported: reactord's templates have no functions defined in the file",
	"call":       "macro calls are not supported",
	"filter":     "filter blocks are not supported",
	"block":      "template inheritance is not supported",
	"with":       "with blocks are not supported",
	"autoescape": "autoescape blocks are not supported",
}

var unsupportedTags = map[string]string{
	"import":      "imports read other files at render time; reactord's reaction files stand alone",
	"from":        "imports read other files at render time; reactord's reaction files stand alone",
	"include":     "includes read other files at render time; reactord's reaction files stand alone",
	"extends":     "template inheritance is not supported",
	"load_yaml":   "Salt's load_yaml tag is not supported",
	"load_json":   "Salt's load_json tag is not supported",
	"load_text":   "Salt's load_text tag is not supported",
	"import_yaml": "imports read other files at render time; reactord's reaction files stand alone",
	"import_json": "imports read other files at render time; reactord's reaction files stand alone",
	"import_text": "imports read other files at render time; reactord's reaction files stand alone",
}

func (p *parser) body(ends []string) []Node {
	var nodes []Node
	for {
		t := p.peek()
		switch t.kind {
		case tEOF:
			if len(ends) > 0 {
				p.fail(t, "end of file", "expected {% "+strings.Join(ends, "/")+" %}")
			}
			return nodes
		case tText:
			p.next()
			nodes = append(nodes, &Text{P: t.pos, S: t.s})
		case tPad:
			p.next()
			nodes = append(nodes, &Pad{P: t.pos, N: t.v.(int)})
		case tVarBegin:
			p.next()
			x := p.expr()
			if e := p.next(); e.kind != tVarEnd {
				p.fail(e, describe(e), "expected }}")
			}
			nodes = append(nodes, &Output{P: t.pos, X: x})
		case tBlockBegin:
			w := p.toks[p.i+1]
			if w.kind != tName {
				p.fail(w, describe(w), "expected a statement name")
			}
			for _, e := range ends {
				if w.s == e {
					return nodes
				}
			}
			p.next()
			p.next()
			if n := p.statement(t, w); n != nil {
				nodes = append(nodes, n)
			}
		default:
			p.fail(t, describe(t), "unexpected")
		}
	}
}

func (p *parser) statement(start, w token) Node {
	switch w.s {
	case "if":
		n := &If{P: start.pos}
		cond := p.expr()
		p.expectBlockEnd()
		bp := start.pos
		for {
			body := p.body([]string{"elif", "else", "endif"})
			n.Branches = append(n.Branches, Branch{P: bp, Cond: cond, Body: body})
			bt := p.next()
			word := p.next()
			switch word.s {
			case "elif":
				bp = bt.pos
				cond = p.expr()
				p.expectBlockEnd()
				continue
			case "else":
				p.expectBlockEnd()
				n.Else = p.body([]string{"endif"})
				if n.Else == nil {
					n.Else = []Node{}
				}
				p.next()
				p.next()
			}
			p.expectBlockEnd()
			return n
		}
	case "for":
		n := &For{P: start.pos}
		for {
			n.Vars = append(n.Vars, p.expectName().s)
			if !p.isOp(",") {
				break
			}
			p.next()
		}
		if in := p.next(); in.kind != tName || in.s != "in" {
			p.fail(in, describe(in), "expected 'in'")
		}
		n.X = p.exprNoCond()
		if p.isName("if") {
			p.next()
			n.If = p.exprNoCond()
		}
		if p.isName("recursive") {
			t := p.next()
			p.refuse(t.pos, "{% for ... "+t.s+" %}", "recursive loops are not supported")
			p.skipTo(tBlockEnd)
		}
		p.expectBlockEnd()
		n.Body = p.body([]string{"else", "endfor"})
		p.next()
		if word := p.next(); word.s == "else" {
			p.expectBlockEnd()
			n.Else = p.body([]string{"endfor"})
			if n.Else == nil {
				n.Else = []Node{}
			}
			p.next()
			p.next()
		}
		p.expectBlockEnd()
		return n
	case "set":
		name := p.expectName()
		attr := ""
		if p.isOp(".") {
			p.next()
			attr = p.expectName().s
			if !p.isOp("=") {
				p.expectOp("=")
				p.skipTo(tBlockEnd)
				p.next()
				return nil
			}
		}
		if !p.isOp("=") {
			if p.isOp(",") {
				p.refuse(name.pos, "{% set a, b = ... %}", "unpacking in set is not supported")
			} else {
				p.refuse(name.pos, "{% set %}...{% endset %}", "block set is not supported")
				p.skipTo(tBlockEnd)
				p.next()
				p.skipBlock("set", "endset")
				return nil
			}
			p.skipTo(tBlockEnd)
			p.next()
			return nil
		}
		p.next()
		x := p.expr()
		p.expectBlockEnd()
		return &Set{P: start.pos, Name: name.s, Attr: attr, X: x}
	case "do":
		x := p.expr()
		p.expectBlockEnd()
		return &Do{P: start.pos, X: x}
	case "break", "continue":
		p.expectBlockEnd()
		return &LoopControl{P: start.pos, Word: w.s}
	}
	if why, ok := unsupportedBlocks[w.s]; ok {
		p.refuse(start.pos, "{% "+w.s+" %}", why)
		p.skipTo(tBlockEnd)
		p.next()
		p.skipBlock(w.s, "end"+w.s)
		return nil
	}
	if why, ok := unsupportedTags[w.s]; ok {
		p.refuse(start.pos, "{% "+w.s+" %}", why)
		p.skipTo(tBlockEnd)
		p.next()
		return nil
	}
	p.fail(w, "{% "+w.s+" %}", "unknown statement")
	return nil
}

func (p *parser) refuse(pos Pos, construct, why string) {
	p.refusals = append(p.refusals, errorAt(p.file, pos, construct, why))
}

// skipTo advances to the next token of kind k.
func (p *parser) skipTo(k int) {
	for p.peek().kind != k && p.peek().kind != tEOF {
		p.next()
	}
}

// skipBlock skips a block's body up to and including its end tag.
func (p *parser) skipBlock(open, end string) {
	depth := 1
	for {
		t := p.next()
		if t.kind == tEOF {
			p.fail(t, "end of file", "expected {% "+end+" %}")
		}
		if t.kind != tBlockBegin || p.peek().kind != tName {
			continue
		}
		switch p.peek().s {
		case open:
			depth++
		case end:
			depth--
			if depth == 0 {
				p.skipTo(tBlockEnd)
				p.next()
				return
			}
		}
	}
}

// Expressions, in Jinja's precedence order.

func (p *parser) expr() Expr {
	x := p.exprNoCond()
	for p.isName("if") {
		t := p.next()
		c := &CondExpr{P: t.pos, Then: x, Cond: p.or()}
		if p.isName("else") {
			p.next()
			c.Else = p.expr()
		}
		x = c
	}
	return x
}

func (p *parser) exprNoCond() Expr { return p.or() }

func (p *parser) or() Expr {
	x := p.and()
	for p.isName("or") {
		t := p.next()
		x = &Binary{P: t.pos, Op: "or", L: x, R: p.and()}
	}
	return x
}

func (p *parser) and() Expr {
	x := p.not()
	for p.isName("and") {
		t := p.next()
		x = &Binary{P: t.pos, Op: "and", L: x, R: p.not()}
	}
	return x
}

func (p *parser) not() Expr {
	if p.isName("not") {
		t := p.next()
		return &Unary{P: t.pos, Op: "not", X: p.not()}
	}
	return p.compare()
}

var compareOps = map[string]bool{"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *parser) compare() Expr {
	x := p.math1()
	var out Expr
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && compareOps[t.s]:
			op = t.s
			p.next()
		case t.kind == tName && t.s == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.s == "not" && p.toks[p.i+1].kind == tName && p.toks[p.i+1].s == "in":
			op = "notin"
			p.next()
			p.next()
		default:
			if out == nil {
				return x
			}
			return out
		}
		r := p.math1()
		c := &Binary{P: t.pos, Op: op, L: x, R: r}
		if out == nil {
			out = c
		} else {
			out = &Binary{P: t.pos, Op: "and", L: out, R: c}
		}
		x = r
	}
}

func (p *parser) math1() Expr {
	x := p.concat()
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		x = &Binary{P: t.pos, Op: t.s, L: x, R: p.concat()}
	}
	return x
}

func (p *parser) concat() Expr {
	x := p.math2()
	for p.isOp("~") {
		t := p.next()
		x = &Binary{P: t.pos, Op: "~", L: x, R: p.math2()}
	}
	return x
}

func (p *parser) math2() Expr {
	x := p.pow()
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.next()
		x = &Binary{P: t.pos, Op: t.s, L: x, R: p.pow()}
	}
	return x
}

func (p *parser) pow() Expr {
	x := p.unary(true)
	for p.isOp("**") {
		t := p.next()
		x = &Binary{P: t.pos, Op: "**", L: x, R: p.unary(true)}
	}
	return x
}

func (p *parser) unary(withFilter bool) Expr {
	var x Expr
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		x = &Unary{P: t.pos, Op: t.s, X: p.unary(false)}
	} else {
		x = p.postfix(p.primary())
	}
	if withFilter {
		x = p.filters(x)
	}
	return x
}

func (p *parser) primary() Expr {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.s {
		case "True", "true":
			return &Lit{P: t.pos, V: true}
		case "False", "false":
			return &Lit{P: t.pos, V: false}
		case "None", "none":
			return &Lit{P: t.pos, V: nil}
		}
		return &Name{P: t.pos, Name: t.s}
	case tString:
		s := t.v.(string)
		for p.peek().kind == tString { // adjacent literals concatenate
			s += p.next().v.(string)
		}
		return &Lit{P: t.pos, V: s}
	case tInt, tFloat:
		return &Lit{P: t.pos, V: t.v}
	case tOp:
		switch t.s {
		case "(":
			if p.isOp(")") {
				p.next()
				return &List{P: t.pos}
			}
			x := p.expr()
			if p.isOp(",") {
				l := &List{P: t.pos, Items: []Expr{x}}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					l.Items = append(l.Items, p.expr())
				}
				x = l
			}
			p.expectOp(")")
			return x
		case "[":
			l := &List{P: t.pos}
			for !p.isOp("]") {
				l.Items = append(l.Items, p.expr())
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			p.expectOp("]")
			return l
		case "{":
			d := &Dict{P: t.pos}
			for !p.isOp("}") {
				d.Keys = append(d.Keys, p.expr())
				p.expectOp(":")
				d.Vals = append(d.Vals, p.expr())
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			p.expectOp("}")
			return d
		}
	}
	p.fail(t, describe(t), "expected an expression")
	return nil
}

func (p *parser) postfix(x Expr) Expr {
	for {
		switch {
		case p.isOp("."):
			t := p.next()
			n := p.next()
			if n.kind == tInt {
				x = &Index{P: t.pos, X: x, Key: &Lit{P: n.pos, V: n.v}}
				continue
			}
			if n.kind != tName {
				p.fail(n, describe(n), "expected an attribute name")
			}
			x = &Attr{P: n.pos, X: x, Name: n.s}
		case p.isOp("["):
			t := p.next()
			var parts [3]Expr
			k, colons := 0, 0
			for !p.isOp("]") {
				if p.isOp(":") {
					p.next()
					colons++
					k++
					if k > 2 {
						p.fail(t, "[", "too many colons in a slice")
					}
					continue
				}
				parts[k] = p.expr()
				if colons == 0 && !p.isOp(":") {
					break
				}
			}
			p.expectOp("]")
			if colons == 0 {
				if parts[0] == nil {
					p.fail(t, "[]", "empty subscript")
				}
				x = &Index{P: t.pos, X: x, Key: parts[0]}
			} else {
				x = &Slice{P: t.pos, X: x, Lo: parts[0], Hi: parts[1], Step: parts[2]}
			}
		case p.isOp("("):
			t := p.next()
			args, kw := p.args()
			x = &Call{P: t.pos, Fn: x, Args: args, Kwargs: kw}
		default:
			return x
		}
	}
}

// args parses call arguments after "(" through ")".
func (p *parser) args() ([]Expr, []Kwarg) {
	var args []Expr
	var kw []Kwarg
	for !p.isOp(")") {
		if t := p.peek(); t.kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].s == "=" {
			p.next()
			p.next()
			for _, k := range kw {
				if k.Name == t.s {
					// Jinja compiles the call to Python, which refuses
					// it: SyntaxError: keyword argument repeated.
					p.refuse(t.pos, t.s+"=...", "keyword argument repeated (Salt's Jinja refuses the file: SyntaxError)")
					break
				}
			}
			kw = append(kw, Kwarg{Name: t.s, X: p.expr()})
		} else {
			args = append(args, p.expr())
		}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	p.expectOp(")")
	return args, kw
}

func (p *parser) filters(x Expr) Expr {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			n := p.expectName()
			f := &Filter{P: n.pos, X: x, Name: n.s}
			for p.isOp(".") { // dotted filter names
				p.next()
				f.Name += "." + p.expectName().s
			}
			if p.isOp("(") {
				p.next()
				f.Args, f.Kwargs = p.args()
			}
			x = f
		case p.isName("is"):
			p.next()
			t := &Test{X: x}
			if p.isName("not") {
				p.next()
				t.Not = true
			}
			n := p.expectName()
			t.P, t.Name = n.pos, n.s
			if p.isOp("(") {
				p.next()
				t.Args, _ = p.args()
			} else if k := p.peek(); k.kind == tString || k.kind == tInt || k.kind == tFloat ||
				k.kind == tName && k.s != "else" && k.s != "or" && k.s != "and" && k.s != "is" ||
				k.kind == tOp && (k.s == "[" || k.s == "{") {
				// One argument without parentheses, as Jinja's parse_test
				// reads it: x is sameas false, x is divisibleby 3.
				t.Args = []Expr{p.postfix(p.primary())}
			}
			x = t
		default:
			return x
		}
	}
}
