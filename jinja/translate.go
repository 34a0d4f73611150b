package jinja

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/reactord/reactord/internal/shebang"
)

// ErrNotJinja is returned by Convert for a file that is not a Jinja
// template: plain YAML (#!yaml) or already a Go template (#!gotmpl|yaml).
var ErrNotJinja = errors.New("not a Jinja file")

// Errors is every problem that refused a file, in source order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Shebang is the first line of every converted file.
const Shebang = "#!gotmpl|yaml"

// Convert translates a Salt Jinja reaction file into a reactord Go
// template that starts with Shebang. A file that cannot be translated
// faithfully returns Errors, listing every problem; a file that is not
// Jinja returns an error wrapping ErrNotJinja.
func Convert(file string, src []byte) ([]byte, error) {
	out, _, err := ConvertWith(file, src, Options{MarkWhole: true})
	return out, err
}

// Options tune ConvertWith for a file loaded at start rather than written
// out by `reactord convert`.
type Options struct {
	// DeferSalt turns each use of Salt's render-time names (salt, pillar,
	// grains, opts) into a call that fails when rendering reaches it,
	// naming the use, instead of refusing the whole file: the file loads,
	// and only the events whose rendering calls Salt fail.
	DeferSalt bool
	// KeepLines pads the translation with empty Go template comments
	// wherever Jinja dropped newlines (comments, tags spanning lines,
	// whitespace control), so that each action stands on the line of the
	// Jinja it came from and render errors name the right line.
	KeepLines bool
	// MarkWhole pipes a value printed as a whole plain YAML value, that
	// may be a map or list, through pyValue: Salt's loader reads such a
	// value back as the structure its repr spells, and a Go template
	// prints text unless told (a file converted at load has that reading
	// as a whole, reactions.File.Translated).
	MarkWhole bool
}

// ConvertWith is Convert with options. It also returns how many uses of
// Salt's render-time names it deferred (Options.DeferSalt).
func ConvertWith(file string, src []byte, o Options) ([]byte, int, error) {
	text := string(src)
	body := text
	line := 1
	if pipeline, ok := shebang.Pipeline(text); ok {
		first, rest, _ := strings.Cut(text, "\n")
		switch pipeline {
		case "jinja|yaml", "jinja", "yaml|jinja", "":
		case "yaml", "gotmpl|yaml", "gotmpl":
			return nil, 0, fmt.Errorf("%s: renderer %q: %w", file, pipeline, ErrNotJinja)
		default:
			why := "only Jinja (#!jinja|yaml) reaction files can be converted"
			if strings.HasPrefix(pipeline, "py") {
				why = "a Python reaction file runs code at render time; it has no Go template equivalent"
			}
			return nil, 0, Errors{errorAt(file, Pos{1, 1}, first, why)}
		}
		body = rest
		line = 2
	}
	// Jinja drops the source's final newline (keep_trailing_newline is
	// off) and Salt's renderer adds one back to the output when the file
	// ended with one: so whitespace control before the end cannot eat it.
	trailing := ""
	if strings.HasSuffix(body, "\n") {
		body = strings.TrimSuffix(strings.TrimSuffix(body, "\n"), "\r")
		trailing = "\n"
	}
	nodes, perrs := parse(file, body, o.KeepLines)
	for _, e := range perrs {
		e.Pos.Line += line - 1
	}
	t := &translator{file: file, lineOff: line - 1, assigned: map[string]bool{}, deferSalt: o.DeferSalt, markWhole: o.MarkWhole}
	collectAssigned(nodes, t.assigned)
	t.litDicts = literalDicts(nodes)
	if nodes != nil {
		t.scope = &scope{vars: map[string]*variable{}}
		t.body(&t.out, nodes)
	}
	errs := append(Errors(perrs), t.errs...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool {
			a, b := errs[i].Pos, errs[j].Pos
			return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
		})
		return nil, 0, errs
	}
	return []byte(Shebang + "\n" + t.out.String() + trailing), t.saltUses, nil
}

type variable struct {
	goName string // $x
	flag   string // $_def_x: true once set, when the variable may be unset
	maybe  bool   // set on some paths only
	undef  string // the error when used unset, if not "'x' is undefined"
	// namespace: set to namespace(...), a dict whose attributes
	// {% set x.a = ... %} changes in place, inside loops too.
	namespace bool
}

type loopInfo struct {
	idx, list        string // Go variables of the index and the list
	idxUsed, lenUsed bool
}

type scope struct {
	parent *scope
	vars   map[string]*variable
	loop   *loopInfo // the scope of a for body
}

func (s *scope) lookup(name string) *variable {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v
		}
	}
	return nil
}

type translator struct {
	file    string
	lineOff int
	errs    Errors
	out     strings.Builder
	scope   *scope
	depth   int // if nesting inside the current for body or the top level
	inRange int
	n       int // counter for generated variable names
	pre     *strings.Builder
	// litDicts are the variables set once, to a dict literal, and never
	// changed: their key order is the literal's (see orderedName).
	litDicts map[string][]string
	assigned map[string]bool
	// deferSalt and saltUses: Options.DeferSalt, and the uses deferred.
	deferSalt bool
	saltUses  int
	// markWhole is Options.MarkWhole; whole is set while an output that
	// stands as a whole value is translated.
	markWhole, whole bool
}

func (t *translator) refuse(p Pos, construct, why string) gx {
	p.Line += t.lineOff
	t.errs = append(t.errs, errorAt(t.file, p, construct, why))
	return gx{s: `""`}
}

// salt translates a use of one of Salt's render-time names: a refusal, or
// with deferSalt a call that fails when rendering reaches it.
func (t *translator) salt(p Pos, construct, why string) gx {
	if !t.deferSalt {
		return t.refuse(p, construct, why)
	}
	t.saltUses++
	return gx{s: call("saltCall", strconv.Quote(construct+": "+why))}
}

func (t *translator) tmp(prefix string) string {
	t.n++
	return fmt.Sprintf("$_%s%d", prefix, t.n)
}

// collectAssigned records every name a set or for binds.
func collectAssigned(nodes []Node, m map[string]bool) {
	for _, n := range nodes {
		switch n := n.(type) {
		case *Set:
			if n.Attr == "" {
				m[n.Name] = true
			}
		case *If:
			for _, b := range n.Branches {
				collectAssigned(b.Body, m)
			}
			collectAssigned(n.Else, m)
		case *For:
			collectAssigned(n.Body, m)
			collectAssigned(n.Else, m)
		}
	}
}

// setsIn lists the names set in nodes outside for bodies, in order.
func setsIn(nodes []Node, seen map[string]bool, out *[]string) {
	for _, n := range nodes {
		switch n := n.(type) {
		case *Set:
			if n.Attr == "" && !seen[n.Name] {
				seen[n.Name] = true
				*out = append(*out, n.Name)
			}
		case *If:
			for _, b := range n.Branches {
				setsIn(b.Body, seen, out)
			}
			setsIn(n.Else, seen, out)
		}
	}
}

// alwaysSets reports whether every path through nodes sets name.
func alwaysSets(nodes []Node, name string) bool {
	for _, n := range nodes {
		switch n := n.(type) {
		case *Set:
			if n.Name == name && n.Attr == "" {
				return true
			}
		case *If:
			if n.Else == nil {
				continue
			}
			all := alwaysSets(n.Else, name)
			for _, b := range n.Branches {
				all = all && alwaysSets(b.Body, name)
			}
			if all {
				return true
			}
		}
	}
	return false
}

func (t *translator) body(out *strings.Builder, nodes []Node) {
	for i, n := range nodes {
		t.whole = t.markWhole && wholeValue(out.String(), nodes[i+1:])
		t.node(out, n)
		t.whole = false
	}
}

// wholeValue reports whether an output between the text written so far
// and the nodes after it is a whole plain YAML value: after "key: " or
// "- " on its line, and before the end of the line.
func wholeValue(before string, after []Node) bool {
	line := before[strings.LastIndexByte(before, '\n')+1:]
	if !strings.HasSuffix(line, ": ") && !strings.HasSuffix(line, "- ") {
		return false
	}
	for _, n := range after {
		switch n := n.(type) {
		case *Pad:
			continue
		case *Text:
			rest := strings.TrimLeft(n.S, " \t")
			return rest == "" || rest[0] == '\n' || rest[0] == '\r' || rest[0] == '#'
		}
		return false
	}
	return true
}

// stringFilters are the filters whose result is always a string or a
// number: a whole value printed through one is never a structure.
var stringFilters = map[string]bool{"string": true, "lower": true, "upper": true, "trim": true, "replace": true, "join": true,
	"format": true, "int": true, "float": true, "length": true, "count": true, "json": true, "tojson": true, "yaml": true,
	"yaml_dquote": true, "yaml_squote": true, "yaml_encode": true, "quote": true, "capitalize": true, "title": true}

// mayBeStructure reports whether a printed expression can be a map or
// list, which Salt's loader reads back as one from its repr.
func mayBeStructure(x Expr, g gx) bool {
	if g.boolean {
		return false
	}
	switch x := x.(type) {
	case *Lit:
		return false
	case *Binary:
		return x.Op == "+" || x.Op == "*"
	case *Filter:
		return !stringFilters[x.Name]
	case *Unary:
		return false
	}
	return true
}

// stmt translates an expression for one statement, returning the prelude
// its translation needs (conditional expressions, map and select loops).
func (t *translator) stmt(x Expr, boolean bool) (string, gx) {
	saved := t.pre
	var b strings.Builder
	t.pre = &b
	var g gx
	if boolean {
		g = t.cond(x)
	} else {
		g = t.expr(x)
	}
	t.pre = saved
	return b.String(), g
}

// literalBrace is what writeLiteral writes for a "{" that would
// otherwise meet the next "{" of the output: the brace, then a comment
// whose "{{-" trims the space before it. Go's template reads the brace
// as text and the comment prints nothing, so the rendered text holds
// both braces, as text of the file (YAML structure, as in Salt), not as
// a printed value.
const literalBrace = "{ {{- /**/}}"

// writeLiteral writes s as text of the template: text the Go template
// engine prints as it is, never reads as an action, whatever s holds
// ({{ and {{/* from a {% raw %} block or a string constant) and
// whatever comes after it. A "{" followed by another "{", or last in s
// (the translation may go on with an action), is written as
// literalBrace; everything else as it is.
func writeLiteral(out *strings.Builder, s string) {
	for {
		k := strings.IndexByte(s, '{')
		if k < 0 {
			out.WriteString(s)
			return
		}
		out.WriteString(s[:k])
		if k+1 == len(s) || s[k+1] == '{' {
			out.WriteString(literalBrace)
		} else {
			out.WriteByte('{')
		}
		s = s[k+1:]
	}
}

func (t *translator) node(out *strings.Builder, n Node) {
	switch n := n.(type) {
	case *Text:
		writeLiteral(out, n.S)
	case *Pad:
		out.WriteString("{{/*" + strings.Repeat("\n", n.N) + "*/}}")
	case *Output:
		if l, ok := n.X.(*Lit); ok {
			if s, ok := l.V.(string); ok {
				writeLiteral(out, s)
				return
			}
		}
		if f, ok := n.X.(*Filter); ok && len(f.Args) == 0 && len(f.Kwargs) == 0 {
			if enc, ok := encoderFilters[f.Name]; ok {
				t.encoded(out, f, enc)
				return
			}
		}
		pre, g := t.stmt(n.X, false)
		out.WriteString(pre)
		if o, ok := t.orderedName(n.X); ok {
			g.s = o
		}
		if t.whole && mayBeStructure(n.X, g) {
			// Salt's loader reads a map or list printed whole back
			// as the structure; a Go template prints text unless told.
			g.s += " | pyValue"
		}
		fmt.Fprintf(out, "{{ %s }}", g.s)
	case *Set:
		if n.Attr != "" {
			t.setAttr(out, n)
			return
		}
		if t.lazySet(out, n) {
			return
		}
		pre, g := t.stmt(n.X, false)
		out.WriteString(pre)
		if g.s == "nil" {
			g.s = "(pyNone)" // a Go template cannot use nil alone
		}
		t.assign(out, n.Name, g.s)
		if c, ok := n.X.(*Call); ok {
			if fn, ok := c.Fn.(*Name); ok && fn.Name == "namespace" {
				if v := t.scope.lookup(n.Name); v != nil {
					v.namespace = true
				}
			}
		}
	case *Do:
		t.do(out, n)
	case *LoopControl:
		if t.inRange == 0 {
			t.refuse(n.P, "{% "+n.Word+" %}", "outside a for loop")
			return
		}
		fmt.Fprintf(out, "{{ %s }}", n.Word)
	case *If:
		t.ifStmt(out, n)
	case *For:
		t.forStmt(out, n)
	}
}

// assign translates a set of name to the Go expression val.
func (t *translator) assign(out *strings.Builder, name, val string) {
	if v, ok := t.scope.vars[name]; ok {
		fmt.Fprintf(out, "{{ %s = %s }}", v.goName, val)
		if v.flag != "" && v.maybe {
			fmt.Fprintf(out, "{{ %s = true }}", v.flag)
		}
		if t.depth == 0 {
			v.maybe = false
		}
		return
	}
	// A set at the level of its scope: a new variable (hoisting declares
	// the ones set inside an if before it).
	v := &variable{goName: "$" + name}
	t.scope.vars[name] = v
	fmt.Fprintf(out, "{{ %s := %s }}", v.goName, val)
}

func (t *translator) ifStmt(out *strings.Builder, n *If) {
	if t.depth == 0 {
		var names []string
		setsIn([]Node{n}, map[string]bool{}, &names)
		for _, name := range names {
			if _, ok := t.scope.vars[name]; ok {
				continue
			}
			v := &variable{goName: "$" + name}
			if outer := t.scope.lookup(name); outer != nil {
				fmt.Fprintf(out, "{{ %s := %s }}", v.goName, outer.goName)
				if outer.maybe {
					v.flag, v.maybe = outer.flag, true
					fmt.Fprintf(out, "{{ %s := %s }}", v.flag, outer.flag)
				}
			} else {
				fmt.Fprintf(out, `{{ %s := "" }}`, v.goName)
				if !alwaysSets([]Node{n}, name) {
					v.flag, v.maybe = "$_def_"+name, true
					fmt.Fprintf(out, "{{ %s := false }}", v.flag)
				}
			}
			t.scope.vars[name] = v
		}
	}
	t.depth++
	ends := 1
	for i, b := range n.Branches {
		pre, g := t.stmt(b.Cond, true)
		switch {
		case i == 0:
			out.WriteString(pre)
			fmt.Fprintf(out, "{{ if %s }}", g.s)
		case pre == "":
			fmt.Fprintf(out, "{{ else if %s }}", g.s)
		default:
			fmt.Fprintf(out, "{{ else }}%s{{ if %s }}", pre, g.s)
			ends++
		}
		t.body(out, b.Body)
	}
	if n.Else != nil {
		out.WriteString("{{ else }}")
		t.body(out, n.Else)
	}
	out.WriteString(strings.Repeat("{{ end }}", ends))
	t.depth--
}

// staticList reports whether a translated iterable is a list already.
func (t *translator) forStmt(out *strings.Builder, n *For) {
	pre, g := t.stmt(n.X, false)
	out.WriteString(pre)
	if o, ok := t.orderedName(n.X); ok {
		g = gx{s: call("pyKeys", o), list: true}
	}
	iter := g.s
	if !g.list {
		it := t.tmp("it")
		fmt.Fprintf(out, `{{ %s := %s }}{{ if kindIs "map" %s }}{{ %s = pyKeys %s }}{{ else if kindIs "string" %s }}{{ %s = pyChars %s }}{{ end }}`, it, iter, it, it, it, it, it, it)
		iter = it
	}
	var rangeVar string
	unpack := func(b *strings.Builder) {
		if len(n.Vars) == 1 {
			rangeVar = "$" + n.Vars[0]
			return
		}
		rangeVar = t.tmp("p")
		for i, v := range n.Vars {
			fmt.Fprintf(b, "{{ $%s := index %s %d }}", v, rangeVar, i)
		}
	}
	if n.If != nil {
		// Jinja's loop filter: the items the condition keeps, before the
		// loop (loop.index, loop.length and else count those only).
		kept := t.tmp("f")
		fs := &scope{parent: t.scope, vars: map[string]*variable{}}
		for _, v := range n.Vars {
			fs.vars[v] = &variable{goName: "$" + v}
		}
		var fb strings.Builder
		unpack(&fb)
		saveScope, saveDepth := t.scope, t.depth
		t.scope, t.depth = fs, 0
		t.inRange++
		cpre, cond := t.stmt(n.If, true)
		t.inRange--
		t.scope, t.depth = saveScope, saveDepth
		fmt.Fprintf(out, "{{ %s := list }}{{ range %s := %s }}%s%s{{ if %s }}{{ %s = append %s %s }}{{ end }}{{ end }}",
			kept, rangeVar, iter, fb.String(), cpre, cond.s, kept, kept, rangeVar)
		iter = kept
	}
	li := &loopInfo{idx: t.tmp("i"), list: t.tmp("l")}
	s := &scope{parent: t.scope, vars: map[string]*variable{}, loop: li}
	var body strings.Builder
	var bind string
	unpack(&body)
	for _, v := range n.Vars {
		s.vars[v] = &variable{goName: "$" + v}
	}
	saveScope, saveDepth := t.scope, t.depth
	t.scope, t.depth = s, 0
	t.inRange++
	t.body(&body, n.Body)
	t.inRange--
	t.scope, t.depth = saveScope, saveDepth
	var els strings.Builder
	if n.Else != nil {
		t.body(&els, n.Else)
	}
	if li.lenUsed {
		fmt.Fprintf(out, "{{ %s := %s }}", li.list, iter)
		iter = li.list
	}
	bind = rangeVar
	if li.idxUsed || li.lenUsed {
		bind = li.idx + ", " + rangeVar
	}
	fmt.Fprintf(out, "{{ range %s := %s }}%s", bind, iter, body.String())
	if n.Else != nil {
		out.WriteString("{{ else }}" + els.String())
	}
	out.WriteString("{{ end }}")
}

func (t *translator) do(out *strings.Builder, n *Do) {
	if s, p, ok := saltRef(n.X); ok {
		root := s
		if i := strings.IndexAny(s, ".[("); i >= 0 {
			root = s[:i]
		}
		if t.scope.lookup(root) == nil && !t.assigned[root] {
			// {% do salt.log.error(...) %}, {% do salt['event.send'](...) %}
			if c, isCall := n.X.(*Call); isCall && t.deferSalt {
				if fun, ok := saltFunction(c.Fn); ok {
					fmt.Fprintf(out, "{{ if %s }}{{ end }}", t.saltFn(c, fun).s)
					return
				}
			}
			g := t.salt(p, "{% do "+s+" %}", salts[root])
			if t.deferSalt {
				fmt.Fprintf(out, "{{ if %s }}{{ end }}", g.s)
			}
			return
		}
	}
	c, ok := n.X.(*Call)
	var a *Attr
	if ok {
		a, ok = c.Fn.(*Attr)
	}
	var v *variable
	nsKey := "" // the receiver is ns.key of a namespace variable
	if ok {
		switch x := a.X.(type) {
		case *Name:
			v = t.scope.lookup(x.Name)
		case *Attr:
			if name, isName := x.X.(*Name); isName && !dictMethods[x.Name] {
				if v = t.scope.lookup(name.Name); v != nil && v.namespace {
					nsKey = x.Name
				} else {
					v = nil
				}
			}
		}
	}
	if v == nil {
		t.refuse(n.P, "{% do %}", "only append, extend and update of a variable set in the file (or a namespace's attribute) are supported")
		return
	}
	if nsKey != "" {
		pre, args := t.argList(c.Args)
		out.WriteString(pre)
		cur := v.goName + "." + nsKey
		if !isIdent(nsKey) {
			cur = call("index", v.goName, strconv.Quote(nsKey))
		}
		switch {
		case a.Name == "append" && len(args) == 1:
			fmt.Fprintf(out, "{{ $_ := set %s %s (append %s %s) }}", v.goName, strconv.Quote(nsKey), cur, args[0])
		case a.Name == "extend" && len(args) == 1:
			fmt.Fprintf(out, "{{ $_ := set %s %s (concat %s %s) }}", v.goName, strconv.Quote(nsKey), cur, args[0])
		default:
			t.refuse(n.P, "{% do ."+a.Name+"() %}", "only append and extend of a namespace's attribute are supported")
		}
		return
	}
	pre, args := t.argList(c.Args)
	saved := t.pre
	var b strings.Builder
	t.pre = &b
	defer func() { t.pre = saved }()
	out.WriteString(pre)
	switch {
	case a.Name == "append" && len(args) == 1:
		fmt.Fprintf(out, "{{ %s = append %s %s }}", v.goName, v.goName, args[0])
	case a.Name == "extend" && len(args) == 1:
		fmt.Fprintf(out, "{{ %s = concat %s %s }}", v.goName, v.goName, args[0])
	case a.Name == "update" && len(c.Args) == 1:
		d, isDict := c.Args[0].(*Dict)
		if !isDict {
			t.refuse(n.P, "{% do "+a.Name+" %}", "update takes a dict literal here")
			return
		}
		vals := t.dictPairs(d)
		out.WriteString(b.String())
		for i := 0; i+1 < len(vals); i += 2 {
			fmt.Fprintf(out, "{{ $_ := set %s %s %s }}", v.goName, vals[i], vals[i+1])
		}
	default:
		t.refuse(n.P, "{% do ."+a.Name+"() %}", "only append, extend and update are supported")
	}
}

func (t *translator) argList(xs []Expr) (string, []string) {
	var pre strings.Builder
	out := make([]string, len(xs))
	for i, x := range xs {
		p, g := t.stmt(x, false)
		pre.WriteString(p)
		out[i] = g.s
	}
	return pre.String(), out
}

// encoderFilters are the filters whose output Salt's YAML loader reads as
// the value itself when it is a whole scalar: |json, |tojson and |yaml a
// structure, |yaml_dquote and |yaml_squote the quoted string. They are
// printed through reactord's encoders without pyStr, so the value lands as
// one node (a structure, or the string) as in Salt, not as its text.
var encoderFilters = map[string]string{
	"json":        "jsonEncode",
	"tojson":      "tojsonEncode",
	"yaml_dquote": "yamlDquote",
	"yaml_squote": "yamlSquote",
	"yaml_encode": "yamlEncode",
	"yaml":        "",
}

// encoded prints {{ x|f }} for an encoder filter f. Salt's |yaml is
// safe_dump in flow style: a string is its plain or quoted scalar (the
// string itself once loaded), anything else the value's flow YAML, which
// loads as the JSON encoding of the same value does.
func (t *translator) encoded(out *strings.Builder, f *Filter, enc string) {
	pre, g := t.stmt(f.X, false)
	out.WriteString(pre)
	if o, ok := t.orderedName(f.X); ok {
		g.s = o
	}
	if enc != "" {
		fmt.Fprintf(out, "{{ %s %s }}", enc, g.s)
		return
	}
	v := t.tmp("y")
	fmt.Fprintf(out, `{{ %s := %s }}{{ if kindIs "string" %s }}{{ yamlDquote %s }}{{ else }}{{ jsonEncode %s }}{{ end }}`, v, g.s, v, v, v)
}

// lazySet translates {% set x = base['k'] %} (or base.k) of a new variable
// at the level of its scope. Jinja's StrictUndefined fails on a missing key
// only when the value is used, not when it is set: the variable is set to
// the value or nil, with a flag saying whether the key was there, and every
// use of it checks the flag, as for a variable set on some paths only.
func (t *translator) lazySet(out *strings.Builder, n *Set) bool {
	if t.depth != 0 || t.scope.vars[n.Name] != nil {
		return false
	}
	var base Expr
	var key string
	switch x := n.X.(type) {
	case *Attr:
		if dictMethods[x.Name] {
			return false
		}
		if nm, ok := x.X.(*Name); ok && nm.Name == "loop" && t.scope.lookup("loop") == nil {
			return false
		}
		base, key = x.X, x.Name
	case *Index:
		l, ok := x.Key.(*Lit)
		if !ok {
			return false
		}
		k, isStr := l.V.(string)
		if !isStr {
			return false
		}
		base, key = x.X, k
	default:
		return false
	}
	if _, _, salt := saltRef(base); salt {
		return false
	}
	pre, b := t.stmt(base, false)
	out.WriteString(pre)
	v := &variable{goName: "$" + n.Name, flag: "$_def_" + n.Name, maybe: true,
		undef: fmt.Sprintf("%s is undefined: 'dict object' has no attribute %s", n.Name, pyQuoteKey(key))}
	q := strconv.Quote(key)
	fmt.Fprintf(out, "{{ %s := getOr %s %s nil }}{{ %s := hasKey %s %s }}", v.goName, b.s, q, v.flag, b.s, q)
	t.scope.vars[n.Name] = v
	return true
}

// pyQuoteKey spells a key as Python's repr does for plain text.
func pyQuoteKey(k string) string {
	if strings.Contains(k, "'") && !strings.Contains(k, `"`) {
		return `"` + k + `"`
	}
	return "'" + strings.ReplaceAll(k, "'", `\'`) + "'"
}

// setAttr translates {% set ns.attr = x %}: ns must be a namespace(), a
// dict changed in place, so the change is seen after a loop, as in Jinja.
func (t *translator) setAttr(out *strings.Builder, n *Set) {
	v := t.scope.lookup(n.Name)
	if v == nil || !v.namespace {
		t.refuse(n.P, "{% set "+n.Name+"."+n.Attr+" %}", "only the attributes of a namespace() can be set")
		return
	}
	pre, g := t.stmt(n.X, false)
	out.WriteString(pre)
	fmt.Fprintf(out, "{{ $_ := set %s %s %s }}", v.goName, strconv.Quote(n.Attr), g.s)
}

// literalDicts finds the names set exactly once in the file, to a dict
// literal with string keys, never bound by a for, changed by
// {% do x.update(...) %} or {% set x.a = ... %}: a Go map holds them, which
// forgets the order of the literal, so the places where Jinja shows that
// order (printing, |tojson, items(), a for) rebuild it from the literal's
// keys (orderedName).
// Updates with a dict literal add their keys after the literal's.
func literalDicts(nodes []Node) map[string][]string {
	sets := map[string]int{}
	keys := map[string][]string{}
	updates := map[string][]string{}
	spoiled := map[string]bool{}
	var walk func([]Node)
	walk = func(nodes []Node) {
		for _, n := range nodes {
			switch n := n.(type) {
			case *Set:
				if n.Attr != "" {
					spoiled[n.Name] = true
					continue
				}
				sets[n.Name]++
				d, ok := n.X.(*Dict)
				if !ok {
					spoiled[n.Name] = true
					continue
				}
				ks, ok := literalKeys(d)
				if !ok {
					spoiled[n.Name] = true
				}
				keys[n.Name] = ks
			case *Do:
				if c, ok := n.X.(*Call); ok {
					if a, ok := c.Fn.(*Attr); ok {
						if nm, ok := a.X.(*Name); ok {
							// x.update({...}) with literal keys adds them
							// after the literal's, in the file's order.
							d, isDict := (*Dict)(nil), false
							if len(c.Args) == 1 {
								d, isDict = c.Args[0].(*Dict)
							}
							if a.Name != "update" || !isDict {
								spoiled[nm.Name] = true
								continue
							}
							ks, ok := literalKeys(d)
							if !ok {
								spoiled[nm.Name] = true
							}
							updates[nm.Name] = append(updates[nm.Name], ks...)
						}
					}
				}
			case *If:
				for _, b := range n.Branches {
					walk(b.Body)
				}
				walk(n.Else)
			case *For:
				for _, v := range n.Vars {
					spoiled[v] = true
				}
				walk(n.Body)
				walk(n.Else)
			}
		}
	}
	walk(nodes)
	out := map[string][]string{}
	for name, ks := range keys {
		if sets[name] == 1 && !spoiled[name] {
			seen := map[string]bool{}
			var all []string
			for _, k := range append(ks, updates[name]...) {
				if !seen[k] {
					seen[k] = true
					all = append(all, k)
				}
			}
			out[name] = all
		}
	}
	return out
}

// orderedName is, for a variable of litDicts, the dict in the order Jinja
// keeps it: the literal's keys, then those updates added (pyOrdered).
func (t *translator) orderedName(x Expr) (string, bool) {
	n, ok := x.(*Name)
	if !ok {
		return "", false
	}
	keys, ok := t.litDicts[n.Name]
	v := t.scope.lookup(n.Name)
	if !ok || v == nil || v.maybe {
		return "", false
	}
	args := []string{v.goName}
	for _, k := range keys {
		args = append(args, strconv.Quote(k))
	}
	return call("pyOrdered", args...), true
}

// literalKeys returns a dict literal's keys while they are string literals;
// ok is false when one is not (the keys before it are returned).
func literalKeys(d *Dict) (keys []string, ok bool) {
	for _, k := range d.Keys {
		l, isLit := k.(*Lit)
		s, isStr := "", false
		if isLit {
			s, isStr = l.V.(string)
		}
		if !isStr {
			return keys, false
		}
		keys = append(keys, s)
	}
	return keys, true
}
