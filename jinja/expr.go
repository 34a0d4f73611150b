package jinja

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// gx is a translated expression: a Go template operand.
type gx struct {
	s       string
	boolean bool // always a bool
	list    bool // always a list
}

func call(fn string, args ...string) string {
	if len(args) == 0 {
		return "(" + fn + ")"
	}
	return "(" + fn + " " + strings.Join(args, " ") + ")"
}

// salts are the names Salt's renderer provides that reactord does not.
var salts = map[string]string{
	"salt":       "calls Salt while rendering; reactord renders without Salt",
	"__salt__":   "calls Salt while rendering; reactord renders without Salt",
	"pillar":     "reads pillar while rendering; reactord has no pillar",
	"__pillar__": "reads pillar while rendering; reactord has no pillar",
	"grains":     "reads the master's grains while rendering; reactord has no grains",
	"__grains__": "reads the master's grains while rendering; reactord has no grains",
	"opts":       "reads the master's configuration while rendering; reactord has no opts",
	"__opts__":   "reads the master's configuration while rendering; reactord has no opts",
}

// saltDicts are Salt's render-time dicts, with the Salt call that gives
// each as the master has it (its grains, its pillar, its configuration).
var saltDicts = map[string]string{
	"grains": "grains.items", "__grains__": "grains.items",
	"pillar": "pillar.items", "__pillar__": "pillar.items",
	"opts": "config.items", "__opts__": "config.items",
}

// saltFunction is the function a call into salt names: salt['mod.fun'],
// salt.mod.fun, __salt__['mod.fun'].
func saltFunction(fn Expr) (string, bool) {
	switch x := fn.(type) {
	case *Index:
		n, isName := x.X.(*Name)
		l, isLit := x.Key.(*Lit)
		if isName && isLit && (n.Name == "salt" || n.Name == "__salt__") {
			if s, ok := l.V.(string); ok && strings.Count(s, ".") >= 1 {
				return s, true
			}
		}
	case *Attr:
		if m, ok := x.X.(*Attr); ok {
			if n, ok := m.X.(*Name); ok && (n.Name == "salt" || n.Name == "__salt__") {
				return m.Name + "." + x.Name, true
			}
		}
	}
	return "", false
}

// saltDict reports whether name is one of Salt's render-time dicts the
// file does not shadow (see saltDicts), which is always defined.
func (t *translator) saltDict(name string) bool {
	_, ok := saltDicts[name]
	return ok && t.deferSalt && !t.assigned[name] && t.scope.lookup(name) == nil
}

// hasSaltCall reports whether x reads the result of a Salt function call
// (salt['mine.get'](...).values(), salt.saltutil.runner(...)['k']).
func hasSaltCall(x Expr) bool {
	for {
		switch v := x.(type) {
		case *Call:
			if _, ok := saltFunction(v.Fn); ok {
				return true
			}
			x = v.Fn
		case *Attr:
			x = v.X
		case *Index:
			x = v.X
		default:
			return false
		}
	}
}

// saltFn translates a call of a Salt function (see reactions.SaltCalls).
func (t *translator) saltFn(c *Call, fun string) gx {
	t.saltUses++
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = t.expr(a).s
	}
	var kw []string
	for _, k := range c.Kwargs {
		kw = append(kw, strconv.Quote(k.Name), t.expr(k.X).s)
	}
	return gx{s: call("saltFn", "$", strconv.Quote(fun), call("list", args...), call("dict", kw...))}
}

// saltRef renders a reference into a Salt global as written, for errors.
func saltRef(x Expr) (string, Pos, bool) {
	switch x := x.(type) {
	case *Name:
		_, ok := salts[x.Name]
		return x.Name, x.P, ok
	case *Attr:
		s, p, ok := saltRef(x.X)
		return s + "." + x.Name, p, ok
	case *Index:
		s, p, ok := saltRef(x.X)
		if l, isLit := x.Key.(*Lit); isLit {
			if k, isStr := l.V.(string); isStr {
				return s + "['" + k + "']", p, ok
			}
		}
		return s + "[...]", p, ok
	case *Call:
		s, p, ok := saltRef(x.Fn)
		return s + "(...)", p, ok
	}
	return "", Pos{}, false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') && (i == 0 || !('0' <= r && r <= '9')) {
			return false
		}
	}
	return true
}

func (t *translator) data() string {
	if t.inRange > 0 {
		return "$.data"
	}
	return ".data"
}

// truthy turns a translated value into a bool by Python's rules.
func truthy(g gx) gx {
	if g.boolean {
		return g
	}
	return gx{s: call("pyTruth", g.s), boolean: true}
}

// cond translates an expression used as a condition.
func (t *translator) cond(x Expr) gx {
	switch x := x.(type) {
	case *Binary:
		if x.Op == "and" || x.Op == "or" {
			return gx{s: call(x.Op, t.cond(x.L).s, t.cond(x.R).s), boolean: true}
		}
	case *Unary:
		if x.Op == "not" {
			return gx{s: call("not", t.cond(x.X).s), boolean: true}
		}
	}
	return truthy(t.expr(x))
}

var dictMethods = map[string]bool{"items": true, "keys": true, "values": true, "get": true, "update": true, "pop": true, "copy": true, "setdefault": true, "clear": true, "popitem": true}

func (t *translator) expr(x Expr) gx {
	if s, p, ok := saltRef(x); ok {
		root := s
		if i := strings.IndexAny(s, ".[("); i >= 0 {
			root = s[:i]
		}
		// A variable the file sets (env, sls, ...) shadows Salt's name.
		if t.scope.lookup(root) == nil && !t.assigned[root] {
			if c, isCall := x.(*Call); isCall && t.deferSalt {
				if fun, ok := saltFunction(c.Fn); ok {
					return t.saltFn(c, fun)
				}
			}
			_, dict := saltDicts[root]
			if !t.deferSalt || !dict && !hasSaltCall(x) {
				return t.salt(p, s, salts[root])
			}
			// grains, pillar, opts: the dict a Salt call gives, read as
			// any dict is (see name).
		}
	}
	switch x := x.(type) {
	case *Lit:
		return lit(x.V)
	case *Name:
		return t.name(x)
	case *List:
		items := make([]string, len(x.Items))
		for i, it := range x.Items {
			items[i] = t.expr(it).s
		}
		return gx{s: call("list", items...), list: true}
	case *Dict:
		return gx{s: call("dict", t.dictPairs(x)...)}
	case *Attr:
		if n, ok := x.X.(*Name); ok && n.Name == "loop" && t.scope.lookup("loop") == nil {
			return t.loopAttr(x)
		}
		if dictMethods[x.Name] {
			return t.refuse(x.P, "."+x.Name, "a dict method without a call: Jinja gives the method, not the key; write ['"+x.Name+"']")
		}
		return t.key(t.expr(x.X), x.Name)
	case *Index:
		base := t.expr(x.X)
		if u, ok := x.Key.(*Unary); ok && u.Op == "-" {
			if l, ok := u.X.(*Lit); ok {
				if n, ok := l.V.(int64); ok {
					return gx{s: call("pyIndex", base.s, strconv.FormatInt(-n, 10))}
				}
			}
		}
		if l, ok := x.Key.(*Lit); ok {
			switch k := l.V.(type) {
			case string:
				return t.key(base, k)
			case int64:
				// A string's character, a list's item (from the end
				// when negative): Python's subscript.
				return gx{s: call("pyIndex", base.s, strconv.FormatInt(k, 10))}
			}
		}
		return gx{s: call("pyIndex", base.s, t.expr(x.Key).s)}
	case *Slice:
		if x.Step != nil {
			lo, hi := "nil", "nil"
			if x.Lo != nil {
				lo = t.expr(x.Lo).s
			}
			if x.Hi != nil {
				hi = t.expr(x.Hi).s
			}
			return gx{s: call("pySliceStep", t.expr(x.X).s, lo, hi, t.expr(x.Step).s)}
		}
		lo, hi := "nil", "nil"
		if x.Lo != nil {
			lo = t.expr(x.Lo).s
		}
		if x.Hi != nil {
			hi = t.expr(x.Hi).s
		}
		return gx{s: call("pySlice", t.expr(x.X).s, lo, hi)}
	case *Call:
		return t.call(x)
	case *Filter:
		return t.filter(x)
	case *Test:
		g := t.test(x)
		if x.Not {
			g = gx{s: call("not", g.s), boolean: true}
		}
		return g
	case *Unary:
		switch x.Op {
		case "not":
			return gx{s: call("not", t.cond(x.X).s), boolean: true}
		case "-":
			if l, ok := x.X.(*Lit); ok {
				switch v := l.V.(type) {
				case int64:
					return lit(-v)
				case float64:
					return lit(-v)
				}
			}
			return gx{s: call("pyNeg", t.expr(x.X).s)}
		}
		return t.expr(x.X)
	case *Binary:
		return t.binary(x)
	case *CondExpr:
		if x.Else == nil {
			return t.refuse(x.P, "a if b", "a conditional expression without else is undefined when false")
		}
		v := t.tmp("c")
		c := t.cond(x.Cond)
		a := t.sub(x.Then)
		b := t.sub(x.Else)
		fmt.Fprintf(t.pre, `{{ %s := "" }}{{ if %s }}%s{{ %s = %s }}{{ else }}%s{{ %s = %s }}{{ end }}`, v, c.s, a.pre, v, a.s, b.pre, v, b.s)
		return gx{s: v}
	}
	return t.refuse(x.Position(), "expression", "not supported")
}

type subx struct {
	gx
	pre string
}

// sub translates an expression whose prelude must stay with it.
func (t *translator) sub(x Expr) subx {
	pre, g := t.stmt(x, false)
	return subx{g, pre}
}

func lit(v any) gx {
	switch v := v.(type) {
	case nil:
		return gx{s: "nil"}
	case bool:
		return gx{s: strconv.FormatBool(v), boolean: true}
	case string:
		return gx{s: strconv.Quote(v)}
	case int64:
		return gx{s: strconv.FormatInt(v, 10)}
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return gx{s: s}
	}
	return gx{s: `""`}
}

func (t *translator) dictPairs(d *Dict) []string {
	var out []string
	for i, k := range d.Keys {
		l, ok := k.(*Lit)
		if _, isStr := l.V.(string); !ok || !isStr {
			t.refuse(k.Position(), "dict key", "only string keys are supported")
			continue
		}
		out = append(out, lit(l.V).s, t.expr(d.Vals[i]).s)
	}
	return out
}

// key is base['k'] with StrictUndefined's meaning: a missing key is an
// error. A key that is a Go identifier uses field syntax, which the
// template's missingkey=error makes strict; any other key checks first.
func (t *translator) key(base gx, k string) gx {
	if isIdent(k) {
		return gx{s: base.s + "." + k}
	}
	q := strconv.Quote(k)
	return gx{s: call("and", call("or", call("hasKey", base.s, q), call("fail", strconv.Quote("'"+k+"' is undefined"))), call("index", base.s, q))}
}

func (t *translator) name(n *Name) gx {
	if v := t.scope.lookup(n.Name); v != nil {
		if v.maybe {
			msg := "'" + n.Name + "' is undefined"
			if v.undef != "" {
				msg = v.undef
			}
			return gx{s: call("and", call("or", v.flag, call("fail", strconv.Quote(msg))), v.goName)}
		}
		return gx{s: v.goName}
	}
	if fun, ok := saltDicts[n.Name]; ok && t.deferSalt && !t.assigned[n.Name] {
		t.saltUses++
		return gx{s: call("saltFn", "$", strconv.Quote(fun), call("list"), call("dict"))}
	}
	switch n.Name {
	case "data":
		return gx{s: t.data()}
	case "tag":
		if t.inRange > 0 {
			return gx{s: "$.tag"}
		}
		return gx{s: ".tag"}
	case "events":
		// reactord's collect option: every event gathered (absent
		// otherwise, an empty list then).
		root := "."
		if t.inRange > 0 {
			root = "$"
		}
		return gx{s: call("default", call("list"), call("index", root, `"events"`))}
	case "saltenv":
		// Salt's reactor renders with compile_template's defaults.
		return gx{s: `"base"`}
	case "sls":
		return gx{s: `""`}
	}
	if t.assigned[n.Name] {
		return gx{s: call("fail", strconv.Quote("'"+n.Name+"' is undefined"))}
	}
	return t.refuse(n.P, n.Name, "undefined: a reaction file sees tag, data and the variables it sets")
}

func (t *translator) loopAttr(x *Attr) gx {
	var li *loopInfo
	for s := t.scope; s != nil; s = s.parent {
		if s.loop != nil {
			li = s.loop
			break
		}
	}
	if li == nil {
		return t.refuse(x.P, "loop."+x.Name, "outside a for loop")
	}
	switch x.Name {
	case "index":
		li.idxUsed = true
		return gx{s: call("add", li.idx, "1")}
	case "index0":
		li.idxUsed = true
		return gx{s: li.idx}
	case "first":
		li.idxUsed = true
		return gx{s: call("eq", li.idx, "0"), boolean: true}
	case "last":
		li.idxUsed, li.lenUsed = true, true
		return gx{s: call("eq", li.idx, call("sub", call("len", li.list), "1")), boolean: true}
	case "length":
		li.lenUsed = true
		return gx{s: call("len", li.list)}
	case "revindex":
		li.idxUsed, li.lenUsed = true, true
		return gx{s: call("sub", call("len", li.list), li.idx)}
	case "revindex0":
		li.idxUsed, li.lenUsed = true, true
		return gx{s: call("sub", call("sub", call("len", li.list), li.idx), "1")}
	}
	return t.refuse(x.P, "loop."+x.Name, "not supported (index, index0, revindex, revindex0, first, last and length are)")
}

var methods = map[string]struct {
	fn         string
	minA, maxA int
	list       bool
}{
	"startswith": {"startsWith", 1, 1, false},
	"endswith":   {"endsWith", 1, 1, false},
	"split":      {"pySplit", 0, 2, true},
	"items":      {"pyItems", 0, 0, true},
	"keys":       {"pyKeys", 0, 0, true},
	"values":     {"pyValues", 0, 0, true},
	"lower":      {"pyLower", 0, 0, false},
	"upper":      {"pyUpper", 0, 0, false},
	"strip":      {"pyStrip", 0, 1, false},
	"replace":    {"pyReplace", 2, 2, false},
	"format":     {"pyFormat", 0, 64, false},
}

func (t *translator) call(c *Call) gx {
	if fun, ok := saltFunction(c.Fn); ok && t.deferSalt {
		return t.saltFn(c, fun)
	}
	switch fn := c.Fn.(type) {
	case *Attr:
		if len(c.Kwargs) > 0 {
			return t.refuse(c.P, "."+fn.Name+"()", "keyword arguments are not supported")
		}
		if fn.Name == "get" && (len(c.Args) == 1 || len(c.Args) == 2) {
			base, key := t.expr(fn.X).s, t.expr(c.Args[0]).s
			if len(c.Args) == 2 && !plainOperand(c.Args[1]) {
				// Jinja passes a missing key as an undefined value that
				// fails only when used: the default is evaluated only when
				// the key is absent.
				v := t.tmp("g")
				fmt.Fprintf(t.pre, "{{ %s := getOr %s %s nil }}{{ if not (hasKey %s %s) }}", v, base, key, base, key)
				d := t.expr(c.Args[1]).s
				fmt.Fprintf(t.pre, "{{ %s = %s }}{{ end }}", v, d)
				return gx{s: v}
			}
			d := "nil"
			if len(c.Args) == 2 {
				d = t.expr(c.Args[1]).s
			}
			return gx{s: call("getOr", base, key, d)}
		}
		m, ok := methods[fn.Name]
		if !ok {
			return t.refuse(fn.P, "."+fn.Name+"()", "unknown method")
		}
		if len(c.Args) < m.minA || len(c.Args) > m.maxA {
			return t.refuse(fn.P, "."+fn.Name+"()", "wrong number of arguments")
		}
		args := []string{t.expr(fn.X).s}
		if o, ok := t.orderedName(fn.X); ok && (fn.Name == "items" || fn.Name == "keys" || fn.Name == "values") {
			args[0] = o
		}
		for _, a := range c.Args {
			args = append(args, t.expr(a).s)
		}
		return gx{s: call(m.fn, args...), list: m.list}
	case *Name:
		if fn.Name == "namespace" && t.scope.lookup("namespace") == nil && len(c.Args) == 0 {
			// namespace(a=1, b=[]): a dict; {% set ns.a = ... %} changes it.
			var pairs []string
			for _, kw := range c.Kwargs {
				pairs = append(pairs, strconv.Quote(kw.Name), t.expr(kw.X).s)
			}
			return gx{s: call("dict", pairs...)}
		}
		if fn.Name == "range" && t.scope.lookup("range") == nil && len(c.Kwargs) == 0 {
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = t.expr(a).s
			}
			switch len(args) {
			case 1:
				return gx{s: call("until", args[0]), list: true}
			case 2:
				return gx{s: call("untilStep", args[0], args[1], "1"), list: true}
			case 3:
				return gx{s: call("untilStep", args...), list: true}
			}
		}
		return t.refuse(fn.P, fn.Name+"()", "unknown function")
	}
	return t.refuse(c.P, "call", "only method calls are supported")
}

var simpleFilters = map[string]struct {
	fn   string
	list bool
}{
	"json": {"jsonEncode", false}, "tojson": {"tojsonEncode", false},
	"yaml_dquote": {"yamlDquote", false}, "yaml_squote": {"yamlSquote", false},
	"yaml": {"yamlEncode", false}, "yaml_encode": {"yamlEncode", false},
	"length": {"pyLength", false}, "count": {"pyLength", false},
	"first": {"pyFirst", false}, "last": {"pyLast", false},
	"unique": {"pyUnique", true}, "lower": {"pyLower", false}, "upper": {"pyUpper", false},
	"string": {"pyStr", false}, "int": {"pyInt", false}, "float": {"pyFloat", false},
	"load_json": {"loadJson", false}, "trim": {"pyStrip", false}, "pprint": {"pyPprint", false},
	"random": {"pyRandom", false},
}

func (t *translator) filter(f *Filter) gx {
	if f.Name == "sort" {
		return t.sortFilter(f)
	}
	if f.Name == "indent" {
		return t.indentFilter(f)
	}
	if len(f.Kwargs) > 0 && f.Name != "map" {
		return t.refuse(f.P, "|"+f.Name, "keyword arguments are not supported")
	}
	if sf, ok := simpleFilters[f.Name]; ok {
		if len(f.Args) > 0 {
			return t.refuse(f.P, "|"+f.Name, "arguments are not supported")
		}
		return gx{s: call(sf.fn, t.expr(f.X).s), list: sf.list}
	}
	args := make([]string, len(f.Args))
	argN := func(lo, hi int) bool {
		if len(f.Args) < lo || len(f.Args) > hi {
			t.refuse(f.P, "|"+f.Name, "wrong number of arguments")
			return false
		}
		for i, a := range f.Args {
			args[i] = t.expr(a).s
		}
		return true
	}
	switch f.Name {
	case "compare_lists":
		// Salt's filter (salt.utils.data.compare_lists): old|compare_lists(new).
		if !argN(1, 1) {
			return gx{s: `""`}
		}
		return gx{s: call("pyCompareLists", t.expr(f.X).s, args[0])}
	case "default", "d":
		if !argN(0, 2) {
			return gx{s: `""`}
		}
		d := `""`
		if len(args) > 0 {
			d = args[0]
		}
		g := t.defaulted(f.X, d)
		if len(args) == 2 {
			if l, ok := f.Args[1].(*Lit); !ok || l.V != true && l.V != false {
				return t.refuse(f.P, "|default", "the second argument must be True or False")
			} else if l.V == true {
				g = gx{s: call("or", g.s, d)}
			}
		}
		return g
	case "replace":
		if !argN(2, 2) {
			return gx{s: `""`}
		}
		return gx{s: call("pyReplace", t.expr(f.X).s, args[0], args[1])}
	case "join":
		if !argN(0, 1) {
			return gx{s: `""`}
		}
		sep := `""`
		if len(args) == 1 {
			sep = args[0]
		}
		return gx{s: call("pyJoin", t.expr(f.X).s, sep)}
	case "regex_search":
		if !argN(1, 1) {
			return gx{s: `""`}
		}
		return gx{s: call("regexSearch", t.expr(f.X).s, args[0])}
	case "regex_match":
		if !argN(1, 1) {
			return gx{s: `""`}
		}
		return gx{s: call("regexMatchPy", t.expr(f.X).s, args[0])}
	case "format":
		// Jinja's |format: value % args.
		for i, a := range f.Args {
			args[i] = t.expr(a).s
		}
		return gx{s: call("pyPercent", t.expr(f.X).s, call("list", args...))}
	case "round":
		if !argN(0, 1) {
			return gx{s: `""`}
		}
		p := "0"
		if len(args) == 1 {
			p = args[0]
		}
		return gx{s: call("pyRound", t.expr(f.X).s, p)}
	case "list":
		g := t.expr(f.X)
		if g.list {
			return g
		}
		v := t.tmp("it")
		fmt.Fprintf(t.pre, `{{ %s := %s }}{{ if kindIs "map" %s }}{{ %s = pyKeys %s }}{{ end }}`, v, g.s, v, v, v)
		return gx{s: v, list: true}
	case "map":
		return t.mapFilter(f)
	case "selectattr", "rejectattr":
		return t.selectAttr(f)
	}
	return t.refuse(f.P, "|"+f.Name, "unknown filter")
}

// defaulted is x|default(d): d only when x is undefined.
func (t *translator) defaulted(x Expr, d string) gx {
	switch x := x.(type) {
	case *Filter:
		// seq|first and seq|last are undefined for an empty sequence.
		if (x.Name == "first" || x.Name == "last") && len(x.Args) == 0 && len(x.Kwargs) == 0 {
			seq, v := t.tmp("q"), t.tmp("f")
			fn := map[string]string{"first": "pyFirst", "last": "pyLast"}[x.Name]
			fmt.Fprintf(t.pre, "{{ %s := %s }}{{ %s := %s }}{{ if gt (pyLength %s) 0 }}{{ %s = %s %s }}{{ end }}", seq, t.expr(x.X).s, v, d, seq, v, fn, seq)
			return gx{s: v}
		}
	case *Attr:
		if !dictMethods[x.Name] {
			return gx{s: call("getOr", t.expr(x.X).s, strconv.Quote(x.Name), d)}
		}
	case *Index:
		if l, ok := x.Key.(*Lit); ok {
			if _, isStr := l.V.(string); isStr {
				return gx{s: call("getOr", t.expr(x.X).s, lit(l.V).s, d)}
			}
		}
		return gx{s: call("pyIndexOr", t.expr(x.X).s, t.expr(x.Key).s, d)}
	case *Name:
		v := t.scope.lookup(x.Name)
		switch {
		case v != nil && v.maybe:
			return gx{s: call("ternary", v.goName, d, v.flag)}
		case v != nil, x.Name == "data", x.Name == "tag", t.saltDict(x.Name):
			return t.expr(x)
		default:
			return gx{s: d}
		}
	}
	return t.expr(x)
}

// definedTest is x is defined.
func (t *translator) definedTest(x Expr) gx {
	switch x := x.(type) {
	case *Attr:
		if !dictMethods[x.Name] {
			return gx{s: call("hasKey", t.expr(x.X).s, strconv.Quote(x.Name)), boolean: true}
		}
	case *Index:
		if l, ok := x.Key.(*Lit); ok {
			if _, isStr := l.V.(string); isStr {
				return gx{s: call("hasKey", t.expr(x.X).s, lit(l.V).s), boolean: true}
			}
		}
		// x[0], x[i]: defined when Jinja's getitem finds an element.
		return gx{s: call("pyHasIndex", t.expr(x.X).s, t.expr(x.Key).s), boolean: true}
	case *Name:
		v := t.scope.lookup(x.Name)
		switch {
		case v != nil && v.maybe:
			return gx{s: v.flag, boolean: true}
		case v != nil, x.Name == "data", x.Name == "tag", t.saltDict(x.Name):
			return gx{s: "true", boolean: true}
		default:
			if _, ok := salts[x.Name]; ok && !t.assigned[x.Name] {
				return t.expr(x)
			}
			return gx{s: "false", boolean: true}
		}
	}
	return t.refuse(x.Position(), "is defined", "only names, attributes and string keys can be tested")
}

func (t *translator) test(x *Test) gx {
	switch x.Name {
	case "defined":
		return t.definedTest(x.X)
	case "undefined":
		g := t.definedTest(x.X)
		return gx{s: call("not", g.s), boolean: true}
	case "none":
		return gx{s: call("pyEq", t.expr(x.X).s, "nil"), boolean: true}
	case "string":
		return gx{s: call("kindIs", `"string"`, t.expr(x.X).s), boolean: true}
	case "mapping":
		return gx{s: call("kindIs", `"map"`, t.expr(x.X).s), boolean: true}
	case "number", "integer", "float", "boolean", "true", "false", "sequence", "iterable", "even", "odd", "divisibleby", "lower", "upper", "sameas":
		args := []string{strconv.Quote(x.Name), t.expr(x.X).s}
		for _, a := range x.Args {
			args = append(args, t.expr(a).s)
		}
		return gx{s: call("pyIs", args...), boolean: true}
	case "eq", "equalto", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "in":
		if len(x.Args) != 1 {
			return t.refuse(x.P, "is "+x.Name, "takes one value")
		}
		fn := map[string]string{"eq": "pyEq", "equalto": "pyEq", "==": "pyEq", "ne": "pyNe", "!=": "pyNe", "lt": "pyLt", "<": "pyLt", "le": "pyLe", "<=": "pyLe", "gt": "pyGt", ">": "pyGt", "ge": "pyGe", ">=": "pyGe", "in": "pyIn"}[x.Name]
		return gx{s: call(fn, t.expr(x.X).s, t.expr(x.Args[0]).s), boolean: true}
	case "match":
		if len(x.Args) != 1 {
			return t.refuse(x.P, "is match", "takes one pattern")
		}
		l, ok := x.Args[0].(*Lit)
		p, isStr := "", false
		if ok {
			p, isStr = l.V.(string)
		}
		if !isStr {
			return t.refuse(x.P, "is match", "the pattern must be a string literal")
		}
		return gx{s: call("pyNe", call("regexMatchPy", t.expr(x.X).s, strconv.Quote(p)), "nil"), boolean: true}
	}
	return t.refuse(x.P, "is "+x.Name, "unknown test")
}

var binaryFuncs = map[string]string{"==": "pyEq", "!=": "pyNe", "<": "pyLt", "<=": "pyLe", ">": "pyGt", ">=": "pyGe", "in": "pyIn"}

func (t *translator) binary(x *Binary) gx {
	switch x.Op {
	case "and", "or":
		return gx{s: call(x.Op, t.expr(x.L).s, t.expr(x.R).s)}
	case "notin":
		return gx{s: call("not", call("pyIn", t.expr(x.L).s, t.expr(x.R).s)), boolean: true}
	case "+":
		return gx{s: call("pyAdd", t.expr(x.L).s, t.expr(x.R).s)}
	case "~":
		return gx{s: call("pyConcat", t.expr(x.L).s, t.expr(x.R).s)}
	case "-", "*", "/", "//", "%":
		// Python's arithmetic: ints stay ints (unbounded), a float makes
		// a float, / is always a float, // and % floor.
		if l, ok := x.R.(*List); ok && x.Op == "%" {
			// format % (a, b): printf-style formatting with a tuple.
			items := make([]string, len(l.Items))
			for i, e := range l.Items {
				items[i] = t.expr(e).s
			}
			return gx{s: call("pyPercent", t.expr(x.L).s, call("list", items...))}
		}
		fn := map[string]string{"-": "pySub", "*": "pyMul", "/": "pyDiv", "//": "pyFloorDiv", "%": "pyMod"}[x.Op]
		return gx{s: call(fn, t.expr(x.L).s, t.expr(x.R).s)}
	}
	if fn, ok := binaryFuncs[x.Op]; ok {
		return gx{s: call(fn, t.expr(x.L).s, t.expr(x.R).s), boolean: true}
	}
	return t.refuse(x.P, x.Op, "operator not supported")
}

// mapFilter is x|map(attribute='a') or x|map('filter'), built in a loop.
// indentFilter is Jinja's s|indent(width=4, first=False, blank=False).
func (t *translator) indentFilter(f *Filter) gx {
	args := []string{"4", "false", "false"}
	names := []string{"width", "first", "blank"}
	if len(f.Args) > 3 {
		return t.refuse(f.P, "|indent", "wrong number of arguments")
	}
	for i, a := range f.Args {
		args[i] = t.expr(a).s
	}
	for _, k := range f.Kwargs {
		name := k.Name
		if name == "indentfirst" {
			name = "first"
		}
		i := slices.Index(names, name)
		if i < 0 {
			return t.refuse(f.P, "|indent", "unknown option "+k.Name)
		}
		args[i] = t.expr(k.X).s
	}
	return gx{s: call("pyIndent", append([]string{t.expr(f.X).s}, args...)...)}
}

// sortFilter is Jinja's seq|sort(reverse=False, case_sensitive=False,
// attribute=None), by position or by name; the options must be literals.
func (t *translator) sortFilter(f *Filter) gx {
	opts := []string{"false", "false", `""`}
	names := []string{"reverse", "case_sensitive", "attribute"}
	set := func(i int, x Expr) bool {
		l, ok := x.(*Lit)
		if !ok {
			return false
		}
		switch v := l.V.(type) {
		case bool:
			if i == 2 {
				return false
			}
			opts[i] = strconv.FormatBool(v)
		case string:
			if i != 2 {
				return false
			}
			opts[i] = strconv.Quote(v)
		default:
			return false
		}
		return true
	}
	if len(f.Args) > 3 {
		return t.refuse(f.P, "|sort", "wrong number of arguments")
	}
	for i, a := range f.Args {
		if !set(i, a) {
			return t.refuse(f.P, "|sort", "its arguments must be literals (True/False, an attribute name)")
		}
	}
	for _, k := range f.Kwargs {
		i := slices.Index(names, k.Name)
		if i < 0 || !set(i, k.X) {
			return t.refuse(f.P, "|sort", "only the literal options reverse, case_sensitive and attribute are supported")
		}
	}
	return gx{s: call("pySort", t.expr(f.X).s, opts[0], opts[1], opts[2]), list: true}
}

func (t *translator) mapFilter(f *Filter) gx {
	src := t.expr(f.X)
	v, e := t.tmp("m"), t.tmp("e")
	var item string
	switch {
	case len(f.Kwargs) == 1 && f.Kwargs[0].Name == "attribute" && len(f.Args) == 0:
		l, ok := f.Kwargs[0].X.(*Lit)
		a, isStr := "", false
		if ok {
			switch v := l.V.(type) {
			case string:
				a, isStr = v, true
			case int64:
				// attribute=1: the item's item 1 (a list's second).
				a, isStr = strconv.FormatInt(v, 10), true
			}
		}
		if !isStr {
			return t.refuse(f.P, "|map", "attribute must be a string or integer literal")
		}
		return gx{s: call("pyMap", src.s, strconv.Quote(a)), list: true}
	case len(f.Kwargs) == 0 && len(f.Args) == 1:
		l, ok := f.Args[0].(*Lit)
		name, isStr := "", false
		if ok {
			name, isStr = l.V.(string)
		}
		sf, known := simpleFilters[name]
		if !isStr || !known {
			return t.refuse(f.P, "|map", "only map(attribute='...') and map of a filter without arguments are supported")
		}
		item = call(sf.fn, e)
	default:
		return t.refuse(f.P, "|map", "only map(attribute='...') and map of a filter without arguments are supported")
	}
	fmt.Fprintf(t.pre, "{{ %s := list }}{{ range %s := %s }}{{ %s = append %s %s }}{{ end }}", v, e, src.s, v, v, item)
	return gx{s: v, list: true}
}

// selectAttr is x|selectattr('a'[, test[, arg]]) (or rejectattr), by the
// pySelectAttr and pyRejectAttr helpers.
func (t *translator) selectAttr(f *Filter) gx {
	src := t.expr(f.X)
	if len(f.Args) < 1 || len(f.Args) > 3 {
		return t.refuse(f.P, "|"+f.Name, "wrong number of arguments")
	}
	args := []string{src.s}
	for i, a := range f.Args {
		if i < 2 {
			l, _ := a.(*Lit)
			if l != nil {
				if s, isStr := l.V.(string); isStr {
					args = append(args, strconv.Quote(s))
					continue
				}
			}
			return t.refuse(f.P, "|"+f.Name, "attribute and test must be string literals")
		}
		args = append(args, t.expr(a).s)
	}
	fn := "pySelectAttr"
	if f.Name == "rejectattr" {
		fn = "pyRejectAttr"
	}
	return gx{s: call(fn, args...), list: true}
}

// plainOperand reports whether x evaluates without failing: a literal, a
// name, or a list or dict of them.
func plainOperand(x Expr) bool {
	switch x := x.(type) {
	case *Lit, *Name:
		return true
	case *List:
		for _, e := range x.Items {
			if !plainOperand(e) {
				return false
			}
		}
		return true
	case *Dict:
		for i := range x.Keys {
			if !plainOperand(x.Keys[i]) || !plainOperand(x.Vals[i]) {
				return false
			}
		}
		return true
	}
	return false
}
