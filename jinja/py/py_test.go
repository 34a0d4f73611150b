package py

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// Expected values are CPython 3 / Jinja 2 / Salt 3007 results.

func TestPyEqCompare(t *testing.T) {
	om := event.NewMap(2)
	om.Set("b", int64(2))
	om.Set("a", int64(1))
	big := json.Number("99999999999999999999")
	cases := []struct {
		a, b any
		eq   bool
	}{
		{int64(0), 0.0, true}, {int64(0), false, true}, {int64(1), true, true},
		{int64(1), 1.0, true}, {"1", int64(1), false}, {nil, nil, true},
		{nil, false, false}, {"", nil, false}, {2, int64(2), true},
		{[]any{int64(1), "a"}, []any{1.0, "a"}, true}, {[]any{int64(1)}, pyTuple{int64(1)}, false},
		{[]string{"a"}, []any{"a"}, true},
		{map[string]any{"a": int64(1), "b": int64(2)}, om, true},
		{map[string]any{"a": int64(1)}, om, false},
		{math.NaN(), math.NaN(), false}, {math.Inf(1), big, false},
		{big, json.Number("99999999999999999999"), true}, {big, 1e20, false},
		{json.Number("100000000000000000000"), 1e20, true},
		{int64(9007199254740993), float64(9007199254740992), false},
		{YAMLQuoted{text: "'a'", val: "a"}, "'a'", true},
	}
	for _, c := range cases {
		if got := pyEq(c.a, c.b); got != c.eq {
			t.Errorf("pyEq(%#v, %#v) = %v, want %v", c.a, c.b, got, c.eq)
		}
		if got := pyNe(c.a, c.b); got == c.eq {
			t.Errorf("pyNe(%#v, %#v) = %v", c.a, c.b, got)
		}
	}

	type cmp struct {
		f      func(a, b any) (bool, error)
		a, b   any
		want   bool
		errSub string
	}
	ord := []cmp{
		{pyLt, int64(1), 1.5, true, ""}, {pyLt, false, int64(1), true, ""},
		{pyLe, int64(1), 1.0, true, ""}, {pyGt, "b", "a", true, ""},
		{pyLt, "Z", "a", true, ""}, {pyLt, "é", "z", false, ""},
		{pyGe, []any{int64(1), int64(2)}, []any{int64(1)}, true, ""},
		{pyLt, []any{int64(1), "a"}, []any{int64(1), "b"}, true, ""},
		{pyLt, math.NaN(), int64(1), false, ""}, {pyGt, math.Inf(1), json.Number("99999999999999999999"), true, ""},
		{pyLt, "a", int64(1), false, "'<' not supported between instances of 'str' and 'int'"},
		{pyGe, nil, int64(1), false, "'>=' not supported between instances of 'NoneType' and 'int'"},
		{pyLt, []any{int64(1)}, []any{"a"}, false, "'<' not supported between instances of 'int' and 'str'"},
		{pyLt, map[string]any{}, map[string]any{}, false, "'dict' and 'dict'"},
	}
	for _, c := range ord {
		got, err := c.f(c.a, c.b)
		if c.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("compare(%#v, %#v): err %v, want %q", c.a, c.b, err, c.errSub)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("compare(%#v, %#v) = %v, %v; want %v", c.a, c.b, got, err, c.want)
		}
	}
}

func TestPyInTruth(t *testing.T) {
	om := event.NewMap(1)
	om.Set("k", nil)
	cases := []struct {
		n, h   any
		want   bool
		errSub string
	}{
		{"a", "cat", true, ""}, {"", "x", true, ""}, {"dog", "cat", false, ""},
		{int64(1), "1", false, "'in <string>' requires string as left operand, not int"},
		{1.0, []any{int64(1)}, true, ""}, {"1", []any{int64(1)}, false, ""},
		{[]any{"a"}, []any{[]any{"a"}}, true, ""},
		{"k", map[string]any{"k": int64(1)}, true, ""}, {"v", map[string]any{"k": "v"}, false, ""},
		{"k", om, true, ""}, {int64(1), map[string]any{"1": int64(1)}, false, ""},
		{[]any{}, map[string]any{}, false, "unhashable type: 'list'"},
		{"a", nil, false, "argument of type 'NoneType' is not iterable"},
		{"a", int64(3), false, "argument of type 'int' is not iterable"},
		{"a", pyTuple{"a"}, true, ""}, {"b", []string{"a", "b"}, true, ""},
	}
	for _, c := range cases {
		got, err := pyIn(c.n, c.h)
		if c.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("pyIn(%#v, %#v): err %v, want %q", c.n, c.h, err, c.errSub)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("pyIn(%#v, %#v) = %v, %v; want %v", c.n, c.h, got, err, c.want)
		}
	}
	falsy := []any{nil, false, int64(0), 0.0, math.Copysign(0, -1), "", []any{}, map[string]any{}, event.NewMap(0), pyTuple{}, json.Number("0"), []string{}}
	for _, v := range falsy {
		if pyTruth(v) {
			t.Errorf("pyTruth(%#v) = true", v)
		}
	}
	truthy := []any{true, int64(-1), 0.1, math.NaN(), " ", "False", "0", []any{nil}, map[string]any{"": nil}, json.Number("99999999999999999999")}
	for _, v := range truthy {
		if !pyTruth(v) {
			t.Errorf("pyTruth(%#v) = false", v)
		}
	}
}

func TestPyStrRepr(t *testing.T) {
	om := event.NewMap(2)
	om.Set("b", []any{true, nil})
	om.Set("a", int64(1))
	cases := []struct {
		v         any
		str, repr string
	}{
		{"web1", "web1", "'web1'"}, {nil, "None", "None"}, {true, "True", "True"}, {false, "False", "False"},
		{int64(-3), "-3", "-3"}, {7, "7", "7"},
		{1.0, "1.0", "1.0"}, {100.0, "100.0", "100.0"}, {1e16, "1e+16", "1e+16"}, {1e-07, "1e-07", "1e-07"},
		{0.0001, "0.0001", "0.0001"}, {1.5, "1.5", "1.5"}, {math.Copysign(0, -1), "-0.0", "-0.0"},
		{math.NaN(), "nan", "nan"}, {math.Inf(-1), "-inf", "-inf"}, {123456789.125, "123456789.125", "123456789.125"},
		{json.Number("99999999999999999999"), "99999999999999999999", "99999999999999999999"},
		{json.Number("1e400"), "inf", "inf"},
		{[]any{map[string]any{"mods": "orch.deploy"}}, "[{'mods': 'orch.deploy'}]", "[{'mods': 'orch.deploy'}]"},
		{map[string]any{"b": []any{true, nil}, "a": int64(1)}, "{'a': 1, 'b': [True, None]}", "{'a': 1, 'b': [True, None]}"},
		{om, "{'b': [True, None], 'a': 1}", "{'b': [True, None], 'a': 1}"},
		{[]any{"it's", `say "hi"`, `both ' "`, "a\nb\t\\", "\x01\u00e9\u200b", 1.0}, `["it's", 'say "hi"', 'both \' "', 'a\nb\t\\', '\x01é\u200b', 1.0]`, ""},
		{"it's", "it's", `"it's"`}, {"", "", "''"},
		{pyTuple{"a"}, "('a',)", "('a',)"}, {pyTuple{}, "()", "()"}, {pyTuple{"a", nil}, "('a', None)", ""},
		{[]string{"a", "b"}, "['a', 'b']", ""}, {[]int{1, 2}, "[1, 2]", ""},
		{map[string]string{"k": "v"}, "{'k': 'v'}", ""},
		{[]any{}, "[]", "[]"}, {map[string]any{}, "{}", "{}"},
	}
	for _, c := range cases {
		if got := Str(c.v); got != c.str {
			t.Errorf("pyStr(%#v) = %s, want %s", c.v, got, c.str)
		}
		if c.repr != "" {
			if got := reprOf(c.v); got != c.repr {
				t.Errorf("pyRepr(%#v) = %s, want %s", c.v, got, c.repr)
			}
		}
		if got := Text(c.v); got != c.str {
			t.Errorf("Text(%#v) = %s, want %s", c.v, got, c.str)
		}
	}
	if got, _ := pyConcat(int64(1), []any{"a"}); got != "1['a']" {
		t.Errorf("pyConcat = %s", got)
	}
	if got, _ := pyConcat(nil, 2.0); got != "None2.0" {
		t.Errorf("pyConcat = %s", got)
	}
}

func TestPyAdd(t *testing.T) {
	cases := []struct {
		a, b, want any
		errSub     string
	}{
		{int64(1), int64(2), int64(3), ""}, {int64(1), 0.5, 1.5, ""}, {true, true, int64(2), ""},
		{int64(math.MaxInt64), int64(1), json.Number("9223372036854775808"), ""},
		{json.Number("9223372036854775808"), int64(-1), int64(math.MaxInt64), ""},
		{"a", "b", "ab", ""}, {[]any{int64(1)}, []any{"x"}, []any{int64(1), "x"}, ""},
		{pyTuple{"a"}, pyTuple{"b"}, pyTuple{"a", "b"}, ""},
		{"a", int64(1), nil, `can only concatenate str (not "int") to str`},
		{int64(1), "a", nil, "unsupported operand type(s) for +: 'int' and 'str'"},
		{[]any{}, pyTuple{}, nil, `can only concatenate list (not "tuple") to list`},
		{nil, nil, nil, "unsupported operand type(s) for +: 'NoneType' and 'NoneType'"},
		{json.Number("1" + strings.Repeat("0", 400)), 1.0, nil, "int too large to convert to float"},
	}
	for _, c := range cases {
		got, err := pyAdd(c.a, c.b)
		if c.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("pyAdd(%#v, %#v): err %v, want %q", c.a, c.b, err, c.errSub)
			}
			continue
		}
		if err != nil || !pyEq(got, c.want) || pyTypeName(got) != pyTypeName(c.want) {
			t.Errorf("pyAdd(%#v, %#v) = %#v, %v; want %#v", c.a, c.b, got, err, c.want)
		}
	}
	big := strings.Repeat("x", maxBuilt/2+1)
	if _, err := pyAdd(big, big); err == nil {
		t.Error("pyAdd of two huge strings: no error")
	}
}

func TestPyDictAndSequences(t *testing.T) {
	data := map[string]any{"b": int64(2), "a": []any{"x", "y"}}
	om := event.NewMap(2)
	om.Set("z", int64(1))
	om.Set("y", int64(2))
	check := func(name string, got any, err error, want string) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if s := reprOf(got); s != want {
			t.Errorf("%s = %s, want %s", name, s, want)
		}
	}
	errCheck := func(name string, err error, sub string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), sub) {
			t.Errorf("%s: err %v, want %q", name, err, sub)
		}
	}
	v, err := getOr(data, "b", "d")
	check("getOr hit", v, err, "2")
	v, err = getOr(data, "c", "d")
	check("getOr miss", v, err, "'d'")
	v, err = getOr(data, int64(1), nil)
	check("getOr int key", v, err, "None")
	_, err = getOr("s", "k", nil)
	errCheck("getOr str", err, "'str' object has no attribute 'get'")
	_, err = getOr(nil, "k", nil)
	errCheck("getOr None", err, "'NoneType' object has no attribute 'get'")

	l, err := pyItems(data)
	check("items", l, err, "[['a', ['x', 'y']], ['b', 2]]")
	l, err = pyItems(om)
	check("items ordered", l, err, "[['z', 1], ['y', 2]]")
	l, err = pyKeys(data)
	check("keys", l, err, "['a', 'b']")
	l, err = pyValues(om)
	check("values", l, err, "[1, 2]")
	_, err = pyItems([]any{})
	errCheck("items list", err, "'list' object has no attribute 'items'")

	for _, c := range []struct {
		v    any
		want int64
	}{{"héllo", 5}, {[]any{1, 2}, 2}, {data, 2}, {"", 0}, {pyTuple{1}, 1}} {
		if n, err := pyLength(c.v); err != nil || n != c.want {
			t.Errorf("pyLength(%#v) = %d, %v", c.v, n, err)
		}
	}
	_, err = pyLength(int64(5))
	errCheck("len int", err, "object of type 'int' has no len()")

	s, err := pyJoinFn([]any{"a", int64(1), nil, true, 1.0, []any{"x"}}, ", ")
	check("join", s, err, `"a, 1, None, True, 1.0, ['x']"`)
	s, err = pyJoinFn(data, "-")
	check("join dict", s, err, "'a-b'")
	s, err = pyJoinFn("abc", ".")
	check("join str", s, err, "'a.b.c'")

	v, err = pyFirst([]any{"a", "b"})
	check("first", v, err, "'a'")
	v, err = pyLast("xyz")
	check("last str", v, err, "'z'")
	_, err = pyFirst([]any{})
	errCheck("first empty", err, "No first item, sequence was empty")
	_, err = pyLast(int64(1))
	errCheck("last int", err, "'int' object is not iterable")

	l, err = pyUnique([]any{"a", int64(1), 1.0, true, "a", nil, []any{"x"}, []any{"x"}, nil, "b"})
	check("unique", l, err, "['a', 1, None, ['x'], 'b']")

	for _, c := range []struct {
		s    string
		sep  []any
		want string
	}{
		{"  a b\t\nc  ", nil, "['a', 'b', 'c']"}, {"", nil, "[]"}, {"a,,b", []any{","}, "['a', '', 'b']"},
		{"", []any{","}, "['']"}, {"a b", []any{nil}, "['a', 'b']"}, {"a\x1fb", nil, "['a', 'b']"},
		{"salt/job/123/ret/web1", []any{"/"}, "['salt', 'job', '123', 'ret', 'web1']"},
	} {
		l, err := pySplitFn(c.s, c.sep...)
		check("split "+c.s, l, err, c.want)
	}
	_, err = pySplitFn("a", "")
	errCheck("split empty sep", err, "empty separator")
	_, err = pySplitFn(int64(1))
	errCheck("split int", err, "'int' object has no attribute 'split'")

	for _, c := range []struct {
		v          any
		start, end any
		want       string
	}{
		{"abcdef", int64(1), int64(3), "'bc'"}, {"abcdef", nil, int64(-2), "'abcd'"},
		{"abcdef", int64(-2), nil, "'ef'"}, {"abcdef", int64(10), nil, "''"},
		{"abcdef", int64(4), int64(2), "''"}, {"abcdef", int64(-100), int64(2), "'ab'"},
		{"héllo", int64(1), int64(3), "'él'"}, {[]any{1, 2, 3}, int64(1), nil, "[2, 3]"},
		{pyTuple{1, 2, 3}, nil, int64(1), "(1,)"}, {"abc", true, nil, "'bc'"},
		{"abc", json.Number("99999999999999999999"), nil, "''"},
	} {
		v, err := pySlice(c.v, c.start, c.end)
		check("slice", v, err, c.want)
	}
	_, err = pySlice("abc", 1.0, nil)
	errCheck("slice float", err, "slice indices must be integers or None")
	_, err = pySlice(int64(1), nil, nil)
	errCheck("slice int", err, "'int' object is not subscriptable")

	s, err = pyReplace("a.b.c", ".", "-")
	check("replace", s, err, "'a-b-c'")
	s, err = pyReplace(int64(15), "5", "6")
	check("replace int", s, err, "'16'")
	s, err = pyReplace("abc", "", "-")
	check("replace empty", s, err, "'-a-b-c-'")
	if pyLower("WeB1") != "web1" || pyUpper(true) != "TRUE" {
		t.Error("pyLower/pyUpper")
	}
	s, err = pyStrip("\t a b \n\x1c")
	check("strip", s, err, "'a b'")
	s, err = pyStrip("xxaxx", "x")
	check("strip chars", s, err, "'a'")
	for _, c := range []struct {
		f    func(a, b any) (bool, error)
		s, a any
		want bool
	}{
		{startsWith, "web1", "web", true}, {startsWith, "db1", "web", false},
		{startsWith, "db1", []any{"web", "db"}, true}, {endsWith, "a.sls", ".sls", true},
		{endsWith, "a.sls", "", true}, {endsWith, "x", pyTuple{}, false},
	} {
		if got, err := c.f(c.s, c.a); err != nil || got != c.want {
			t.Errorf("startsWith/endsWith(%#v, %#v) = %v, %v", c.s, c.a, got, err)
		}
	}
	_, err = startsWith(int64(1), "a")
	errCheck("startswith int", err, "'int' object has no attribute 'startswith'")
	_, err = endsWith("a", int64(1))
	errCheck("endswith int arg", err, "endswith first arg must be str or a tuple of str, not int")
}

func TestPyEncoders(t *testing.T) {
	om := event.NewMap(2)
	om.Set("b", 1.0)
	om.Set("a", "<&'>")
	for _, c := range []struct {
		v          any
		json, toj  string
		yamlEncode string
	}{
		{nil, "null", "null", "null"}, {true, "true", "true", "true"},
		{int64(10), "10", "10", "10"}, {1.0, "1.0", "1.0", "1.0"}, {1e16, "1e+16", "1e+16", "1.0e+16"},
		{1e-07, "1e-07", "1e-07", "1.0e-07"}, {1.5, "1.5", "1.5", "1.5"}, {math.Copysign(0, -1), "-0.0", "-0.0", "-0.0"},
		{math.Inf(1), "Infinity", "Infinity", ".inf"}, {math.NaN(), "NaN", "NaN", ".nan"},
		{json.Number("99999999999999999999"), "99999999999999999999", "99999999999999999999", "99999999999999999999"},
		{"süß\n\"\\/\x01😀", `"süß\n\"\\/\u0001😀"`, `"s\u00fc\u00df\n\"\\/\u0001\ud83d\ude00"`, `"s\xFC\xDF\n\"\\/\x01\U0001F600"`},
		{[]any{map[string]any{"mods": "orch.deploy"}}, `[{"mods": "orch.deploy"}]`, `[{"mods": "orch.deploy"}]`, ""},
		{om, `{"a": "<&'>", "b": 1.0}`, `{"b": 1.0, "a": "\u003c\u0026\u0027\u003e"}`, ""},
		{map[string]any{}, "{}", "{}", ""}, {pyTuple{"a"}, `["a"]`, `["a"]`, ""},
	} {
		if got, err := JSONEncode(c.v); err != nil || got != c.json {
			t.Errorf("jsonEncode(%#v) = %s, %v; want %s", c.v, got, err, c.json)
		}
		if got, err := ToJSON(c.v); err != nil || got != c.toj {
			t.Errorf("tojsonEncode(%#v) = %s, %v; want %s", c.v, got, err, c.toj)
		}
		got, err := yamlEncode(c.v)
		if c.yamlEncode == "" {
			if err == nil || !strings.Contains(err.Error(), "yaml_encode() only works with YAML scalar data; failed for <class '") {
				t.Errorf("yamlEncode(%#v): err %v", c.v, err)
			}
		} else if err != nil || Str(got) != c.yamlEncode {
			t.Errorf("yamlEncode(%#v) = %s, %v; want %s", c.v, Str(got), err, c.yamlEncode)
		}
	}
	for _, c := range []struct {
		v              any
		dquote, squote string
	}{
		{"web1", `"web1"`, `'web1'`}, {"it's \"x\"", `"it's \"x\""`, `'it''s "x"'`},
		{"a\nb", `"a\nb"`, "'a\n\nb'"}, {"a\n\nb", `"a\n\nb"`, "'a\n\n\nb'"},
		{"\t\x00\x07\x1b\u0085\u00a0\u2028\ufeff\u00e9", `"\t\0\a\e\N\_\L\uFEFF\xE9"`, "'\t\x00\x07\x1b\u0085\u00a0\u2028\ufeff\u00e9'"},
		{int64(5), `"5"`, `'5'`}, {nil, `"None"`, `'None'`}, {[]any{"a"}, `"['a']"`, `'[''a'']'`},
	} {
		if got := yamlDquote(c.v); got.text != c.dquote || got.val != Str(c.v) {
			t.Errorf("yamlDquote(%#v) = %q, want %q", c.v, got.text, c.dquote)
		}
		if got := yamlSquote(c.v); got.text != c.squote {
			t.Errorf("yamlSquote(%#v) = %q, want %q", c.v, got.text, c.squote)
		}
	}

	v, err := loadJSON(`{"b": [1, 1.0, 1e400, 99999999999999999999, null, true], "a": "x"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := Str(v); got != "{'a': 'x', 'b': [1, 1.0, inf, 99999999999999999999, None, True]}" {
		t.Errorf("loadJson = %s", got)
	}
	if m, ok := v.(map[string]any); !ok || pyTypeName(m["b"].([]any)[0]) != "int" {
		t.Errorf("loadJson types: %#v", v)
	}
	for _, bad := range []string{"{", "[1] x", "", "NaN"} {
		if _, err := loadJSON(bad); err == nil || !strings.Contains(err.Error(), "Unable to load json from") {
			t.Errorf("loadJson(%q): err %v", bad, err)
		}
	}
}

func TestRegexAndAttrs(t *testing.T) {
	for _, c := range []struct {
		s, p  string
		flags []any
		want  string
	}{
		{"web12", `web(\d+)`, nil, "('12',)"}, {"web12", `db(\d+)`, nil, "None"},
		{"web12", `\d+`, nil, "('12',)"}, {"a-b", `(a)(x)?-(b)`, nil, "('a', None, 'b')"},
		{"WEB1", `web`, []any{true}, "('WEB',)"}, {"x\nweb", `^web`, []any{false, true}, "('web',)"},
		{"x\nweb", `^web`, nil, "None"}, {"a\nb", "a\nb", nil, "('a\\nb',)"}, {"abc", `(?P<x>b)c\Z`, nil, "('b',)"},
	} {
		got, err := regexSearch(c.s, c.p, c.flags...)
		if err != nil || reprOf(got) != c.want {
			t.Errorf("regexSearch(%q, %q) = %s, %v; want %s", c.s, c.p, reprOf(got), err, c.want)
		}
	}
	if got, _ := regexMatchPy("xweb", "web"); got != nil {
		t.Errorf("regexMatchPy anchored: %v", got)
	}
	if _, err := regexSearch("a", `(a)\1`); err == nil || !strings.Contains(err.Error(), "re.error") {
		t.Errorf("backreference: %v", err)
	}
	if _, err := regexSearch(int64(1), `a`); err == nil {
		t.Error("regexSearch of int: no error")
	}

	seq := []any{
		map[string]any{"name": "a", "ok": true, "n": int64(1), "sub": map[string]any{"x": "1"}},
		map[string]any{"name": "b", "ok": false, "n": int64(2), "sub": map[string]any{"x": "2"}},
		map[string]any{"name": "c", "n": int64(3)},
	}
	l, err := pyMap(seq[:2], "sub.x")
	if err != nil || reprOf(l) != "['1', '2']" {
		t.Errorf("pyMap = %s, %v", reprOf(l), err)
	}
	if _, err := pyMap(seq, "ok"); err == nil {
		t.Error("pyMap missing attribute: no error")
	}
	names := func(l []any, err error) string {
		if err != nil {
			return err.Error()
		}
		m, _ := pyMap(l, "name")
		return reprOf(m)
	}
	for _, c := range []struct {
		attr string
		test []any
		want string
	}{
		{"ok", []any{"defined"}, "['a', 'b']"}, {"ok", []any{"undefined"}, "['c']"},
		{"n", []any{"equalto", 2.0}, "['b']"}, {"n", []any{">", int64(1)}, "['b', 'c']"},
		{"name", []any{"in", []any{"a", "c"}}, "['a', 'c']"}, {"name", []any{"match", "[ab]"}, "['a', 'b']"},
		{"n", nil, "['a', 'b', 'c']"},
	} {
		if got := names(pySelectAttr(seq, c.attr, c.test...)); got != c.want {
			t.Errorf("pySelectAttr(%s, %v) = %s, want %s", c.attr, c.test, got, c.want)
		}
	}
	if got := names(pyRejectAttr(seq[:2], "ok")); got != "['b']" {
		t.Errorf("pyRejectAttr = %s", got)
	}
	if _, err := pySelectAttr(seq, "ok"); err == nil {
		t.Error("selectattr truthiness of a missing attribute: no error")
	}
}

// TestRegexpMemoBounded: past its bound the memo keeps no more patterns,
// and every pattern still compiles and matches.
func TestRegexpMemoBounded(t *testing.T) {
	for i := range maxCachedRegexps + 100 {
		p := fmt.Sprintf("^x%d$", i)
		re, err := pyRegexp(p, nil)
		if err != nil || !re.MatchString(fmt.Sprintf("x%d", i)) {
			t.Fatalf("pattern %s: %v, %v", p, re, err)
		}
	}
	regexps.mu.RLock()
	n := len(regexps.m)
	regexps.mu.RUnlock()
	if n > maxCachedRegexps {
		t.Errorf("the memo keeps %d patterns, bound %d", n, maxCachedRegexps)
	}
}
