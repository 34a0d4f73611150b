package py

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/yaml11"
)

// pyTuple is a Python tuple: it prints as ('a',) and never equals a list.
type pyTuple []any

// YAMLQuoted is a string quoted as YAML (yamlDquote, yamlSquote,
// yamlEncode): printed inside text it is the quoted form, printed as a whole
// plain scalar it is the string it quotes, as Salt's YAML loader reads it.
type YAMLQuoted struct {
	text string // the quoted form, quotes included
	val  string // the string it stands for
}

// String returns the quoted form.
func (q YAMLQuoted) String() string { return q.text }

// Value returns the string quoted, as Salt's YAML loader reads it back.
func (q YAMLQuoted) Value() string { return q.val }

// maxBuilt bounds the bytes of a string, and maxItems the items of a list,
// that one helper call builds, so a template cannot double a value in a
// loop until memory runs out.
const (
	maxBuilt = 16 << 20
	maxItems = 1000000
)

// Printed is a value a Go template converted from Jinja prints as a
// whole plain YAML value (pyValue): a map or list there becomes the
// structure Salt's loader reads from its repr, as in a file converted at
// load; anywhere else it prints as its text.
type Printed struct {
	v    any
	text string // the text printed, when it is not Text(v) (pprint)
}

// Value returns the value printed.
func (p Printed) Value() any { return p.v }

// String is the value's text, as Jinja prints it.
func (p Printed) String() string {
	if p.text != "" {
		return p.text
	}
	return Text(p.v)
}

// pyValue marks a map or list printed whole (see Printed); other values
// pass through.
func pyValue(v any) any {
	switch v.(type) {
	case []any, *event.Map, map[string]any, pyTuple:
		return Printed{v: v}
	}
	return v
}

// saltCall stands for a use of Salt's render-time names (salt, pillar,
// grains, opts) in a file converted from Jinja: reactord renders without
// Salt, so rendering fails here, with msg naming the use and its line.
func saltCall(msg string) (any, error) { return nil, errors.New(msg) }

// Funcs returns the helpers by the names translated templates call them
// (pyEq, pyStr, pyIndex, ...), in a new map a template's Funcs can take.
func Funcs() template.FuncMap {
	fm := make(template.FuncMap, len(pyFuncs)+len(jinjaFuncs))
	maps.Copy(fm, pyFuncs)
	maps.Copy(fm, jinjaFuncs)
	return fm
}

// pyFuncs are the helpers, by template name.
var pyFuncs = map[string]any{
	"pyEq":           pyEq,
	"pyNe":           pyNe,
	"pyLt":           pyLt,
	"pyLe":           pyLe,
	"pyGt":           pyGt,
	"pyGe":           pyGe,
	"pyIn":           pyIn,
	"pyTruth":        pyTruth,
	"pyStr":          Str,
	"pyRepr":         reprOf,
	"pyAdd":          pyAdd,
	"pyConcat":       pyConcat,
	"getOr":          getOr,
	"saltCall":       saltCall,
	"pyRandom":       pyRandom,
	"pyCompareLists": pyCompareLists,
	"pyValue":        pyValue,
	"pyLength":       pyLength,
	"pyJoin":         pyJoinFn,
	"pyFirst":        pyFirst,
	"pyLast":         pyLast,
	"pyUnique":       pyUnique,
	"pySplit":        pySplitFn,
	"pySlice":        pySlice,
	"pyReplace":      pyReplace,
	"pyLower":        pyLower,
	"pyUpper":        pyUpper,
	"pyStrip":        pyStrip,
	"startsWith":     startsWith,
	"endsWith":       endsWith,
	"pyItems":        pyItems,
	"pyKeys":         pyKeys,
	"pyValues":       pyValues,
	"jsonEncode":     JSONEncode,
	"tojsonEncode":   ToJSON,
	"yamlDquote":     yamlDquote,
	"yamlSquote":     yamlSquote,
	"yamlEncode":     yamlEncode,
	"loadJson":       loadJSON,
	"regexSearch":    regexSearch,
	"regexMatchPy":   regexMatchPy,
	"pyMap":          pyMap,
	"pySelectAttr":   pySelectAttr,
	"pyRejectAttr":   pyRejectAttr,
}

// ---- types ----

// pyTypeName is Python's type(v).__name__ for a template value.
func pyTypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string, YAMLQuoted:
		return "str"
	case int, int64, int32, int16, int8, uint, uint64, uint32, uint16, uint8:
		return "int"
	case float64, float32:
		return "float"
	case json.Number:
		if isIntText(string(x)) {
			return "int"
		}
		return "float"
	case pyTuple:
		return "tuple"
	case *event.Map, map[string]any:
		return "dict"
	case []any:
		return "list"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

func isIntText(s string) bool { return !strings.ContainsAny(s, ".eEnN") }

// AsString returns v's text when v is a Python str.
func AsString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case YAMLQuoted:
		return x.text, true
	case Printed:
		// pprint's text: a string to the filters and tests after it.
		if x.text != "" {
			return x.text, true
		}
	}
	return "", false
}

// AsList returns v's items when v is a list or tuple, and whether it is a
// tuple.
func AsList(v any) (items []any, tuple, ok bool) {
	switch x := v.(type) {
	case []any:
		return x, false, true
	case pyTuple:
		return []any(x), true, true
	case nil, string, []byte:
		return nil, false, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out, false, true
	}
	return nil, false, false
}

// Dict is a read-only view of a mapping in reactord's iteration order:
// sorted keys for Go maps (as text/template's range), insertion order for
// *event.Map.
type Dict struct {
	Keys []string                 // the keys, in iteration order
	Get  func(string) (any, bool) // the value of a key, and whether it is there
}

// AsDict returns a view of v when v is a mapping with string keys (a Go
// map, reflected ones too, or an *event.Map).
func AsDict(v any) (Dict, bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return Dict{keys, func(k string) (any, bool) { e, ok := x[k]; return e, ok }}, true
	case *event.Map:
		if x == nil {
			return Dict{}, false
		}
		return Dict{x.Keys(), x.Get}, true
	case nil:
		return Dict{}, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return Dict{}, false
	}
	m := make(map[string]any, rv.Len())
	it := rv.MapRange()
	for it.Next() {
		m[it.Key().String()] = it.Value().Interface()
	}
	return AsDict(m)
}

// ---- numbers ----

// Num is a Python number: an exact integer (bool included) or a float.
type Num struct {
	IsFloat bool     // whether it is a float (F) or an integer (I)
	I       *big.Int // the integer; not to be modified, it may be shared
	F       float64  // the float
}

// ToNum returns v as a Python number when it is one: a Go integer or
// float of any size, a *big.Int, a json.Number, or a bool (Python's bools
// are ints).
func ToNum(v any) (Num, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return Num{I: big.NewInt(1)}, true
		}
		return Num{I: new(big.Int)}, true
	case int64:
		return Num{I: big.NewInt(x)}, true
	case int:
		return Num{I: big.NewInt(int64(x))}, true
	case float64:
		return Num{IsFloat: true, F: x}, true
	case float32:
		return Num{IsFloat: true, F: float64(x)}, true
	case *big.Int:
		return Num{I: x}, true
	case json.Number:
		s := string(x)
		if isIntText(s) {
			if i, ok := new(big.Int).SetString(s, 10); ok {
				return Num{I: i}, true
			}
			return Num{}, false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return Num{}, false
		}
		return Num{IsFloat: true, F: f}, true
	case nil, string:
		return Num{}, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Num{I: big.NewInt(rv.Int())}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Num{I: new(big.Int).SetUint64(rv.Uint())}, true
	case reflect.Float32, reflect.Float64:
		return Num{IsFloat: true, F: rv.Float()}, true
	}
	return Num{}, false
}

// Float is the number as a Python float (an int too large is an error).
func (n Num) Float() (float64, error) {
	if n.IsFloat {
		return n.F, nil
	}
	f, _ := new(big.Float).SetInt(n.I).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("OverflowError: int too large to convert to float")
	}
	return f, nil
}

// Cmp compares two numbers exactly, as Python does; ok is false when
// either is NaN.
func (a Num) Cmp(b Num) (c int, ok bool) {
	if (a.IsFloat && math.IsNaN(a.F)) || (b.IsFloat && math.IsNaN(b.F)) {
		return 0, false
	}
	if !a.IsFloat && !b.IsFloat {
		return a.I.Cmp(b.I), true
	}
	if a.IsFloat && b.IsFloat {
		switch {
		case a.F < b.F:
			return -1, true
		case a.F > b.F:
			return 1, true
		}
		return 0, true
	}
	// One float, one int: infinities are beyond every int; else exact.
	for _, x := range []Num{a, b} {
		if x.IsFloat && math.IsInf(x.F, 0) {
			s := 1
			if math.IsInf(x.F, -1) {
				s = -1
			}
			if x == a {
				return s, true
			}
			return -s, true
		}
	}
	return rat(a).Cmp(rat(b)), true
}

func rat(n Num) *big.Rat {
	if n.IsFloat {
		r := new(big.Rat).SetFloat64(n.F)
		return r
	}
	return new(big.Rat).SetInt(n.I)
}

// intValue returns an integer as int64 when it fits, else as json.Number
// (its exact digits), the forms event data uses.
func intValue(i *big.Int) any {
	if i.IsInt64() {
		return i.Int64()
	}
	return json.Number(i.String())
}

// ---- comparison ----

// pyEq is Python's a == b: 1 == 1.0 == True, "1" != 1, lists, tuples and
// dicts compare element-wise (a list never equals a tuple), None == None.
func pyEq(a, b any) bool {
	if s, ok := AsString(a); ok {
		t, ok := AsString(b)
		return ok && s == t
	}
	if _, ok := AsString(b); ok {
		return false
	}
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if x, ok := ToNum(a); ok {
		y, ok := ToNum(b)
		if !ok {
			return false
		}
		c, ok := x.Cmp(y)
		return ok && c == 0
	}
	if _, ok := ToNum(b); ok {
		return false
	}
	if x, xt, ok := AsList(a); ok {
		y, yt, ok := AsList(b)
		if !ok || xt != yt || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEq(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if x, ok := AsDict(a); ok {
		y, ok := AsDict(b)
		if !ok || len(x.Keys) != len(y.Keys) {
			return false
		}
		for _, k := range x.Keys {
			xv, _ := x.Get(k)
			yv, ok := y.Get(k)
			if !ok || !pyEq(xv, yv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// pyNe is Python's a != b.
func pyNe(a, b any) bool { return !pyEq(a, b) }

// pyLt is Python's a < b.
func pyLt(a, b any) (bool, error) { return pyCompare("<", a, b) }

// pyLe is Python's a <= b.
func pyLe(a, b any) (bool, error) { return pyCompare("<=", a, b) }

// pyGt is Python's a > b.
func pyGt(a, b any) (bool, error) { return pyCompare(">", a, b) }

// pyGe is Python's a >= b.
func pyGe(a, b any) (bool, error) { return pyCompare(">=", a, b) }

func cmpResult(op string, c int) bool {
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// pyCompare orders numbers, strings (by code point) and lists or tuples
// (lexicographically) as Python does; other mixes are Python's TypeError.
func pyCompare(op string, a, b any) (bool, error) {
	if x, ok := ToNum(a); ok {
		if y, ok := ToNum(b); ok {
			c, ok := x.Cmp(y)
			return ok && cmpResult(op, c), nil
		}
	}
	if x, ok := AsString(a); ok {
		if y, ok := AsString(b); ok {
			return cmpResult(op, strings.Compare(x, y)), nil
		}
	}
	if x, xt, ok := AsList(a); ok {
		if y, yt, ok := AsList(b); ok && xt == yt {
			for i := 0; i < len(x) && i < len(y); i++ {
				if !pyEq(x[i], y[i]) {
					return pyCompare(op, x[i], y[i])
				}
			}
			return cmpResult(op, len(x)-len(y)), nil
		}
	}
	return false, fmt.Errorf("TypeError: '%s' not supported between instances of '%s' and '%s'", op, pyTypeName(a), pyTypeName(b))
}

// pyIn is Python's needle in haystack: a substring of a string (the needle
// must be a string), an item of a list or tuple (by ==), a key of a dict.
func pyIn(needle, haystack any) (bool, error) {
	if s, ok := AsString(haystack); ok {
		n, ok := AsString(needle)
		if !ok {
			return false, fmt.Errorf("TypeError: 'in <string>' requires string as left operand, not %s", pyTypeName(needle))
		}
		return strings.Contains(s, n), nil
	}
	if items, _, ok := AsList(haystack); ok {
		for _, e := range items {
			if pyEq(needle, e) {
				return true, nil
			}
		}
		return false, nil
	}
	if d, ok := AsDict(haystack); ok {
		if err := hashable(needle); err != nil {
			return false, err
		}
		k, ok := AsString(needle)
		if !ok {
			return false, nil // dict keys from event data are strings
		}
		_, found := d.Get(k)
		return found, nil
	}
	return false, fmt.Errorf("TypeError: argument of type '%s' is not iterable", pyTypeName(haystack))
}

// hashable is Python's TypeError for a list or dict used as a key.
func hashable(v any) error {
	if _, tuple, ok := AsList(v); ok && !tuple {
		return errors.New("TypeError: unhashable type: 'list'")
	}
	if _, ok := AsDict(v); ok {
		return errors.New("TypeError: unhashable type: 'dict'")
	}
	return nil
}

// pyTruth is Python's bool(v): None, False, 0, 0.0, "" and empty lists,
// tuples and dicts are false.
func pyTruth(v any) bool {
	if v == nil {
		return false
	}
	if s, ok := AsString(v); ok {
		return s != ""
	}
	if n, ok := ToNum(v); ok {
		if n.IsFloat {
			return n.F != 0
		}
		return n.I.Sign() != 0
	}
	if items, _, ok := AsList(v); ok {
		return len(items) > 0
	}
	if d, ok := AsDict(v); ok {
		return len(d.Keys) > 0
	}
	return true
}

// ---- printing ----

// Str is Python's str(v), which is what Jinja prints for {{ v }}:
// strings as they are, True/False/None, Python's float repr, and repr()
// for lists, tuples and dicts.
func Str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return event.PyFloatRepr(x)
	case json.Number:
		if n, ok := ToNum(x); ok && n.IsFloat {
			return event.PyFloatRepr(n.F)
		}
		return string(x)
	case YAMLQuoted:
		return x.text
	case Bytes:
		return yaml11.PyBytesRepr(string(x))
	case *big.Int:
		return x.String()
	}
	var b strings.Builder
	if writeRepr(&b, v) {
		return b.String()
	}
	if n, ok := ToNum(v); ok {
		if n.IsFloat {
			return event.PyFloatRepr(n.F)
		}
		return n.I.String()
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return fmt.Sprint(v)
}

// reprOf is Python's repr(v): strings quoted ('a', "it's", '\n'), the rest
// as Str.
func reprOf(v any) string {
	var b strings.Builder
	if writeRepr(&b, v) {
		return b.String()
	}
	return Str(v)
}

// writeRepr writes the repr of a string, list, tuple or dict and reports
// whether v was one.
func writeRepr(b *strings.Builder, v any) bool {
	if s, ok := AsString(v); ok {
		b.WriteString(yaml11.PyRepr(s))
		return true
	}
	if items, tuple, ok := AsList(v); ok {
		open, end := "[", "]"
		if tuple {
			open, end = "(", ")"
		}
		b.WriteString(open)
		for i, e := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if !writeRepr(b, e) {
				b.WriteString(Str(e))
			}
		}
		if tuple && len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(end)
		return true
	}
	if d, ok := AsDict(v); ok {
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(yaml11.PyRepr(k))
			b.WriteString(": ")
			e, _ := d.Get(k)
			if !writeRepr(b, e) {
				b.WriteString(Str(e))
			}
		}
		b.WriteByte('}')
		return true
	}
	return false
}

// pyConcat is Jinja's a ~ b: str(a) + str(b).
func pyConcat(a, b any) (string, error) {
	sa, sb := Str(a), Str(b)
	if len(sa)+len(sb) > maxBuilt {
		return "", fmt.Errorf("~: result longer than %d bytes", maxBuilt)
	}
	return sa + sb, nil
}

// ---- arithmetic ----

// pyAdd is Python's a + b: numbers (int + int is an exact int, beyond
// int64 too; with a float, a float), str + str, list + list, tuple + tuple.
// Other mixes are Python's TypeError.
func pyAdd(a, b any) (any, error) {
	if x, ok := AsString(a); ok {
		if y, ok := AsString(b); ok {
			if len(x)+len(y) > maxBuilt {
				return nil, fmt.Errorf("+: result longer than %d bytes", maxBuilt)
			}
			return x + y, nil
		}
		return nil, fmt.Errorf("TypeError: can only concatenate str (not \"%s\") to str", pyTypeName(b))
	}
	if x, xt, ok := AsList(a); ok {
		if y, yt, ok := AsList(b); ok && xt == yt {
			if len(x)+len(y) > maxItems {
				return nil, fmt.Errorf("+: more than %d items", maxItems)
			}
			out := make([]any, 0, len(x)+len(y))
			out = append(append(out, x...), y...)
			if xt {
				return pyTuple(out), nil
			}
			return out, nil
		}
		what := "list"
		if xt {
			what = "tuple"
		}
		return nil, fmt.Errorf("TypeError: can only concatenate %s (not \"%s\") to %s", what, pyTypeName(b), what)
	}
	// Numbers, or Python's TypeError for any other mix.
	return pyArith("+", a, b,
		func(x, y *big.Int) (*big.Int, error) { return new(big.Int).Add(x, y), nil },
		func(x, y float64) (float64, error) { return x + y, nil })
}

// ---- dicts ----

// getOr is Python's m.get(key, default).
func getOr(m, key, def any) (any, error) {
	d, ok := AsDict(m)
	if !ok {
		return nil, fmt.Errorf("AttributeError: '%s' object has no attribute 'get'", pyTypeName(m))
	}
	if err := hashable(key); err != nil {
		return nil, err
	}
	k, ok := AsString(key)
	if !ok {
		return def, nil
	}
	if v, ok := d.Get(k); ok {
		return v, nil
	}
	return def, nil
}

func needDict(name string, m any) (Dict, error) {
	d, ok := AsDict(m)
	if !ok {
		return d, fmt.Errorf("AttributeError: '%s' object has no attribute '%s'", pyTypeName(m), name)
	}
	return d, nil
}

// pyItems is list(m.items()): [key, value] pairs in reactord's order (sorted
// keys for event data, as README's range does).
func pyItems(m any) ([]any, error) {
	d, err := needDict("items", m)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(d.Keys))
	for i, k := range d.Keys {
		v, _ := d.Get(k)
		out[i] = []any{k, v}
	}
	return out, nil
}

// pyKeys is list(m.keys()).
func pyKeys(m any) ([]any, error) {
	d, err := needDict("keys", m)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(d.Keys))
	for i, k := range d.Keys {
		out[i] = k
	}
	return out, nil
}

// pyValues is list(m.values()).
func pyValues(m any) ([]any, error) {
	d, err := needDict("values", m)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(d.Keys))
	for i, k := range d.Keys {
		out[i], _ = d.Get(k)
	}
	return out, nil
}

// ---- sequences ----

// iterate is Python's list(v): a list's or tuple's items, a string's
// characters, a dict's keys.
func iterate(v any) ([]any, error) {
	if items, _, ok := AsList(v); ok {
		return items, nil
	}
	if s, ok := AsString(v); ok {
		out := make([]any, 0, len(s))
		for _, r := range s {
			out = append(out, string(r))
		}
		return out, nil
	}
	if d, ok := AsDict(v); ok {
		out := make([]any, len(d.Keys))
		for i, k := range d.Keys {
			out[i] = k
		}
		return out, nil
	}
	return nil, fmt.Errorf("TypeError: '%s' object is not iterable", pyTypeName(v))
}

// pyLength is Python's len(v): code points of a string, items of a list,
// tuple or dict.
func pyLength(v any) (int64, error) {
	if s, ok := AsString(v); ok {
		return int64(utf8.RuneCountInString(s)), nil
	}
	if items, _, ok := AsList(v); ok {
		return int64(len(items)), nil
	}
	if d, ok := AsDict(v); ok {
		return int64(len(d.Keys)), nil
	}
	return 0, fmt.Errorf("TypeError: object of type '%s' has no len()", pyTypeName(v))
}

// pyJoinFn (template name pyJoin) is Jinja's seq|join(sep): str() of each item, joined.
func pyJoinFn(seq, sep any) (string, error) {
	items, err := iterate(seq)
	if err != nil {
		return "", err
	}
	s := Str(sep)
	var b strings.Builder
	for i, e := range items {
		if i > 0 {
			b.WriteString(s)
		}
		b.WriteString(Str(e))
		if b.Len() > maxBuilt {
			return "", fmt.Errorf("join: result longer than %d bytes", maxBuilt)
		}
	}
	return b.String(), nil
}

// pyFirst is Jinja's seq|first.
func pyFirst(seq any) (any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("UndefinedError: No first item, sequence was empty")
	}
	return items[0], nil
}

// pyLast is Jinja's seq|last.
func pyLast(seq any) (any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("UndefinedError: No last item, sequence was empty")
	}
	return items[len(items)-1], nil
}

// pyUnique is Salt's unique filter: the items without repeats (by ==), in
// first-occurrence order.
func pyUnique(seq any) ([]any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(items))
	seen := make(map[string]struct{}, len(items))
	for _, e := range items {
		if k, ok := uniqueKey(e); ok {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
			out = append(out, e)
			continue
		}
		dup := false
		for _, o := range out {
			if pyEq(o, e) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out, nil
}

// uniqueKey spells a string or an exact number so that Python-equal values
// spell the same; other values are compared one by one.
func uniqueKey(v any) (string, bool) {
	if s, ok := AsString(v); ok {
		return "s" + s, true
	}
	if v == nil {
		return "n", true
	}
	if n, ok := ToNum(v); ok {
		if n.IsFloat && (math.IsNaN(n.F) || math.IsInf(n.F, 0)) {
			return "", false
		}
		return "#" + rat(n).RatString(), true
	}
	return "", false
}

// pySplitFn (template name pySplit) is Python's s.split() (runs of whitespace, no empty items) or
// s.split(sep).
func pySplitFn(s any, sep ...any) ([]any, error) {
	str, ok := AsString(s)
	if !ok {
		return nil, fmt.Errorf("AttributeError: '%s' object has no attribute 'split'", pyTypeName(s))
	}
	if len(sep) > 1 {
		return nil, fmt.Errorf("split: takes at most one separator, got %d", len(sep))
	}
	var parts []string
	if len(sep) == 0 || sep[0] == nil {
		parts = strings.FieldsFunc(str, pyIsSpace)
	} else {
		d, ok := AsString(sep[0])
		if !ok {
			return nil, fmt.Errorf("TypeError: must be str or None, not %s", pyTypeName(sep[0]))
		}
		if d == "" {
			return nil, errors.New("ValueError: empty separator")
		}
		parts = strings.Split(str, d)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// sliceIndex is a slice bound: nil (open) or an integer.
func sliceIndex(v any) (int, bool, error) {
	if v == nil {
		return 0, false, nil
	}
	if n, ok := ToNum(v); ok && !n.IsFloat {
		if !n.I.IsInt64() {
			if n.I.Sign() < 0 {
				return math.MinInt32, true, nil
			}
			return math.MaxInt32, true, nil
		}
		i := n.I.Int64()
		i = max(min(i, math.MaxInt32), math.MinInt32)
		return int(i), true, nil
	}
	return 0, false, errors.New("TypeError: slice indices must be integers or None or have an __index__ method")
}

// bounds is Python's slice.indices for step 1.
func bounds(n int, start, end any) (int, int, error) {
	lo, hasLo, err := sliceIndex(start)
	if err != nil {
		return 0, 0, err
	}
	hi, hasHi, err := sliceIndex(end)
	if err != nil {
		return 0, 0, err
	}
	clip := func(i int) int {
		if i < 0 {
			i += n
		}
		return max(0, min(i, n))
	}
	if !hasLo {
		lo = 0
	} else {
		lo = clip(lo)
	}
	if !hasHi {
		hi = n
	} else {
		hi = clip(hi)
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi, nil
}

// pySlice is Python's v[start:end] on a string (by code point), list or
// tuple; nil is an open end, negative indices count from the end.
func pySlice(v, start, end any) (any, error) {
	if s, ok := AsString(v); ok {
		if isASCII(s) {
			lo, hi, err := bounds(len(s), start, end)
			if err != nil {
				return nil, err
			}
			return s[lo:hi], nil
		}
		rs := []rune(s)
		lo, hi, err := bounds(len(rs), start, end)
		if err != nil {
			return nil, err
		}
		return string(rs[lo:hi]), nil
	}
	if items, tuple, ok := AsList(v); ok {
		lo, hi, err := bounds(len(items), start, end)
		if err != nil {
			return nil, err
		}
		out := append([]any{}, items[lo:hi]...)
		if tuple {
			return pyTuple(out), nil
		}
		return out, nil
	}
	return nil, fmt.Errorf("TypeError: '%s' object is not subscriptable", pyTypeName(v))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// ---- strings ----

// pyReplace is Jinja's s|replace(old, new): str(s).replace(old, new).
func pyReplace(s, old, new any) (string, error) {
	str, o, n := Str(s), Str(old), Str(new)
	count := strings.Count(str, o)
	if len(str)+count*(len(n)-len(o)) > maxBuilt {
		return "", fmt.Errorf("replace: result longer than %d bytes", maxBuilt)
	}
	return strings.ReplaceAll(str, o, n), nil
}

// pyLower is Jinja's s|lower: str(s).lower().
func pyLower(s any) string { return strings.ToLower(Str(s)) }

// pyUpper is Jinja's s|upper: str(s).upper().
func pyUpper(s any) string { return strings.ToUpper(Str(s)) }

// pyStrip is Python's s.strip() (Python's whitespace) or s.strip(chars),
// and Jinja's s|trim.
func pyStrip(s any, chars ...any) (string, error) {
	str := Str(s)
	if len(chars) > 1 {
		return "", fmt.Errorf("strip: takes at most one argument, got %d", len(chars))
	}
	if len(chars) == 0 || chars[0] == nil {
		return strings.TrimFunc(str, pyIsSpace), nil
	}
	c, ok := AsString(chars[0])
	if !ok {
		return "", fmt.Errorf("TypeError: strip arg must be None or str, not %s", pyTypeName(chars[0]))
	}
	return strings.Trim(str, c), nil
}

// affixes is the prefix or suffix argument of startswith/endswith: a string
// or a tuple (list) of strings.
func affixes(name string, s, a any) (string, []string, error) {
	str, ok := AsString(s)
	if !ok {
		return "", nil, fmt.Errorf("AttributeError: '%s' object has no attribute '%s'", pyTypeName(s), name)
	}
	if p, ok := AsString(a); ok {
		return str, []string{p}, nil
	}
	if items, _, ok := AsList(a); ok {
		out := make([]string, len(items))
		for i, e := range items {
			p, ok := AsString(e)
			if !ok {
				return "", nil, fmt.Errorf("TypeError: tuple for %s must only contain str, not %s", name, pyTypeName(e))
			}
			out[i] = p
		}
		return str, out, nil
	}
	return "", nil, fmt.Errorf("TypeError: %s first arg must be str or a tuple of str, not %s", name, pyTypeName(a))
}

// startsWith is Python's s.startswith(prefix) (prefix a string or a list
// of strings).
func startsWith(s, prefix any) (bool, error) {
	str, ps, err := affixes("startswith", s, prefix)
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		if strings.HasPrefix(str, p) {
			return true, nil
		}
	}
	return false, nil
}

// endsWith is Python's s.endswith(suffix) (suffix a string or a list of
// strings).
func endsWith(s, suffix any) (bool, error) {
	str, ps, err := affixes("endswith", s, suffix)
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		if strings.HasSuffix(str, p) {
			return true, nil
		}
	}
	return false, nil
}

// ---- JSON ----

// JSONEncode is Salt's |json filter: salt.utils.json.dumps(v,
// sort_keys=True), with ", " and ": " separators, non-ASCII as it is
// (Salt's ensure_ascii=False), floats as Python spells them (1.0, 1e+16,
// NaN, Infinity).
func JSONEncode(v any) (string, error) {
	var b strings.Builder
	if err := writePyJSON(&b, v, true, false, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ToJSON is Salt's |tojson filter: json.dumps(v, ensure_ascii=True)
// in the dict's own order, with <, >, & and ' written as \u003c, \u003e,
// \u0026 and \u0027.
func ToJSON(v any) (string, error) {
	var b strings.Builder
	if err := writePyJSON(&b, v, false, true, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// MaxJSONDepth is how deep the JSON encoders nest before they give up, as
// Python's recursion limit stops json.dumps.
const MaxJSONDepth = 1000

func writePyJSON(b *strings.Builder, v any, sortKeys, html bool, depth int) error {
	if depth > MaxJSONDepth {
		return errors.New("RecursionError: maximum recursion depth exceeded while encoding a JSON object")
	}
	if b.Len() > maxBuilt {
		return fmt.Errorf("json: result longer than %d bytes", maxBuilt)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case bool:
		b.WriteString(strconv.FormatBool(x))
		return nil
	case Bytes:
		return errors.New("TypeError: Object of type bytes is not JSON serializable")
	}
	if s, ok := AsString(v); ok {
		writePyJSONString(b, s, html)
		return nil
	}
	if n, ok := ToNum(v); ok {
		if !n.IsFloat {
			b.WriteString(n.I.String())
			return nil
		}
		switch {
		case math.IsNaN(n.F):
			b.WriteString("NaN")
		case math.IsInf(n.F, 1):
			b.WriteString("Infinity")
		case math.IsInf(n.F, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(event.PyFloat(n.F))
		}
		return nil
	}
	if items, _, ok := AsList(v); ok {
		b.WriteByte('[')
		for i, e := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writePyJSON(b, e, sortKeys, html, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	if d, ok := AsDict(v); ok {
		keys := d.Keys
		if sortKeys && !sort.StringsAreSorted(keys) {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSONString(b, k, html)
			b.WriteString(": ")
			e, _ := d.Get(k)
			if err := writePyJSON(b, e, sortKeys, html, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	return fmt.Errorf("TypeError: Object of type %s is not JSON serializable", pyTypeName(v))
}

// writePyJSONString is json.dumps of a str: with ensure_ascii=True and
// Jinja's HTML escapes when html is set (|tojson), else ensure_ascii=False
// (|json).
func writePyJSONString(b *strings.Builder, s string, html bool) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case html && (r == '<' || r == '>' || r == '&' || r == '\''):
			u4(r)
		case r < 0x20 || (html && r >= 0x7f):
			if r >= 0x10000 {
				r -= 0x10000
				u4(0xd800 + (r>>10)&0x3ff)
				u4(0xdc00 + r&0x3ff)
			} else {
				u4(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// loadJSON is Salt's |load_json: json.loads(str(s)). Objects become
// map[string]any and numbers take event data's forms (int64, float64,
// json.Number beyond them).
func loadJSON(s any) (any, error) {
	text := Str(s)
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("TemplateRuntimeError: Unable to load json from %s", text)
	}
	if rest := text[dec.InputOffset():]; strings.TrimLeft(rest, " \t\n\r") != "" {
		return nil, fmt.Errorf("TemplateRuntimeError: Unable to load json from %s", text)
	}
	return event.NormalizeNumbers(v), nil
}

// ---- YAML ----

// yamlEscapes are PyYAML's double-quoted escapes.
var yamlEscapes = map[rune]string{
	0: `\0`, 0x07: `\a`, 0x08: `\b`, 0x09: `\t`, 0x0a: `\n`, 0x0b: `\v`, 0x0c: `\f`,
	0x0d: `\r`, 0x1b: `\e`, '"': `\"`, '\\': `\\`, 0x85: `\N`, 0xa0: `\_`,
	0x2028: `\L`, 0x2029: `\P`,
}

// dquote is PyYAML's Emitter.write_double_quoted without line folding and
// without allow_unicode: everything outside printable ASCII is escaped.
func dquote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if e, ok := yamlEscapes[r]; ok {
			b.WriteString(e)
			continue
		}
		switch {
		case r >= 0x20 && r <= 0x7e:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02X`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// yamlDquote is Salt's |yaml_dquote: str(v) as a YAML double-quoted scalar.
func yamlDquote(v any) YAMLQuoted {
	s := Str(v)
	return YAMLQuoted{text: dquote(s), val: s}
}

// yamlSquote is Salt's |yaml_squote: str(v) as a YAML single-quoted scalar
// (PyYAML's write_single_quoted: ' doubled, a line break written twice).
func yamlSquote(v any) YAMLQuoted {
	s := Str(v)
	var b strings.Builder
	b.WriteByte('\'')
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		if isYAMLBreak(r) {
			j := i
			for j < len(rs) && isYAMLBreak(rs[j]) {
				j++
			}
			if r == '\n' {
				b.WriteByte('\n')
			}
			for _, br := range rs[i:j] {
				b.WriteRune(br)
			}
			i = j
			continue
		}
		if r == '\'' {
			b.WriteString("''")
		} else {
			b.WriteRune(r)
		}
		i++
	}
	b.WriteByte('\'')
	return YAMLQuoted{text: b.String(), val: s}
}

func isYAMLBreak(r rune) bool { return r == '\n' || r == 0x85 || r == 0x2028 || r == 0x2029 }

// yamlEncode is Salt's |yaml_encode: a scalar as PyYAML's SafeRepresenter
// writes it (null, true, 1, 1.0e+16, .nan), a string double-quoted; a list
// or dict is Salt's TypeError.
func yamlEncode(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	if s, ok := AsString(v); ok {
		return YAMLQuoted{text: dquote(s), val: s}, nil
	}
	if n, ok := ToNum(v); ok {
		if !n.IsFloat {
			return n.I.String(), nil
		}
		switch {
		case math.IsNaN(n.F):
			return ".nan", nil
		case math.IsInf(n.F, 1):
			return ".inf", nil
		case math.IsInf(n.F, -1):
			return "-.inf", nil
		}
		t := strings.ToLower(event.PyFloat(n.F))
		if !strings.Contains(t, ".") && strings.Contains(t, "e") {
			t = strings.Replace(t, "e", ".0e", 1)
		}
		return t, nil
	}
	return nil, fmt.Errorf("TypeError: yaml_encode() only works with YAML scalar data; failed for <class '%s'>", pyTypeName(v))
}

// ---- regular expressions ----

// regexps memoises pyRegexp's compilations: a pure function of the pattern
// and its flags, so the memo holds no one's state (two daemons in one
// process share it harmlessly). It is safe for concurrent use and bounded:
// past maxCachedRegexps patterns, a new one is compiled at each use.
var regexps = regexpCache{m: map[string]*regexp.Regexp{}}

const maxCachedRegexps = 512

// regexpCache is a bounded map of compiled patterns.
type regexpCache struct {
	mu sync.RWMutex
	m  map[string]*regexp.Regexp
}

// get returns the pattern compiled under key, if it is kept.
func (c *regexpCache) get(key string) (*regexp.Regexp, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	re, ok := c.m[key]
	return re, ok
}

// put keeps re under key while there is room.
func (c *regexpCache) put(key string, re *regexp.Regexp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < maxCachedRegexps {
		c.m[key] = re
	}
}

// pyRegexp compiles a Python pattern as Go RE2 (Python's \Z is Go's \z).
func pyRegexp(pattern string, flags []any) (*regexp.Regexp, error) {
	prefix := ""
	names := []string{"i", "m"}
	if len(flags) > 2 {
		return nil, fmt.Errorf("regex: takes at most ignorecase and multiline, got %d flags", len(flags))
	}
	for i, f := range flags {
		if pyTruth(f) {
			prefix += names[i]
		}
	}
	key := prefix + "\x00" + pattern
	if re, ok := regexps.get(key); ok {
		return re, nil
	}
	src := translatePattern(pattern)
	if prefix != "" {
		src = "(?" + prefix + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("re.error: %v", err)
	}
	regexps.put(key, re)
	return re, nil
}

// translatePattern rewrites the Python escapes RE2 spells differently.
func translatePattern(p string) string {
	if !strings.Contains(p, `\Z`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func regexGroups(s string, m []int) any {
	if len(m) == 2 {
		return pyTuple{s[m[0]:m[1]]} // no groups: Salt 3007 gives (match,)
	}
	out := make(pyTuple, 0, len(m)/2-1)
	for i := 2; i < len(m); i += 2 {
		if m[i] < 0 {
			out = append(out, nil)
		} else {
			out = append(out, s[m[i]:m[i+1]])
		}
	}
	return out
}

// regexSearch is Salt's s|regex_search(pattern[, ignorecase[, multiline]]):
// re.search's groups as a tuple (the whole match when the pattern has no
// group, as Salt 3007 does), or None when nothing matches.
func regexSearch(s, pattern any, flags ...any) (any, error) {
	str, ok := AsString(s)
	if !ok {
		return nil, fmt.Errorf("TypeError: expected string or bytes-like object, got '%s'", pyTypeName(s))
	}
	p, ok := AsString(pattern)
	if !ok {
		return nil, fmt.Errorf("TypeError: first argument must be string or compiled pattern, not %s", pyTypeName(pattern))
	}
	re, err := pyRegexp(p, flags)
	if err != nil {
		return nil, err
	}
	m := re.FindStringSubmatchIndex(str)
	if m == nil {
		return nil, nil
	}
	return regexGroups(str, m), nil
}

// regexMatchPy is Salt's s|regex_match(pattern[, ignorecase[, multiline]]):
// as regexSearch, anchored at the start (re.match).
func regexMatchPy(s, pattern any, flags ...any) (any, error) {
	p, ok := AsString(pattern)
	if !ok {
		return nil, fmt.Errorf("TypeError: first argument must be string or compiled pattern, not %s", pyTypeName(pattern))
	}
	return regexSearch(s, `\A(?:`+p+`)`, flags...)
}

// ---- map / selectattr ----

// attrOf is Jinja's environment.getattr for a dotted attribute path: a
// dict's key, or a list's index for a number.
func attrOf(v any, attr string) (any, bool) {
	for _, part := range strings.Split(attr, ".") {
		if d, ok := AsDict(v); ok {
			e, ok := d.Get(part)
			if !ok {
				return nil, false
			}
			v = e
			continue
		}
		if items, _, ok := AsList(v); ok {
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(items) {
				return nil, false
			}
			v = items[i]
			continue
		}
		return nil, false
	}
	return v, true
}

// pyMap is Jinja's seq|map(attribute=attr): each item's attribute (a dict
// key; a dotted path goes deeper). A missing one is an error, as Salt's
// StrictUndefined makes it when the result is used.
func pyMap(seq any, attr string) ([]any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, e := range items {
		v, ok := attrOf(e, attr)
		if !ok {
			return nil, fmt.Errorf("UndefinedError: '%s' has no attribute '%s'", pyTypeName(e)+" object", attr)
		}
		out[i] = v
	}
	return out, nil
}

// pySelectAttr is Jinja's seq|selectattr(attr[, test[, value]]): the items
// whose attribute passes the test (truthiness without one). Tests: defined,
// undefined, none, true, false, equalto/eq/==/sameas, ne/!=, lt/<, le/<=,
// gt/>, ge/>=, in, string, number, mapping, sequence, match, search.
func pySelectAttr(seq any, attr string, test ...any) ([]any, error) {
	return selectAttr(seq, attr, test, true)
}

// pyRejectAttr is Jinja's seq|rejectattr(attr[, test[, value]]).
func pyRejectAttr(seq any, attr string, test ...any) ([]any, error) {
	return selectAttr(seq, attr, test, false)
}

func selectAttr(seq any, attr string, test []any, keep bool) ([]any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, e := range items {
		v, found := attrOf(e, attr)
		ok, err := runTest(v, found, attr, test)
		if err != nil {
			return nil, err
		}
		if ok == keep {
			out = append(out, e)
		}
	}
	return out, nil
}

func runTest(v any, found bool, attr string, test []any) (bool, error) {
	name := ""
	if len(test) > 0 {
		s, ok := test[0].(string)
		if !ok {
			return false, fmt.Errorf("selectattr: the test name must be a string, not %s", pyTypeName(test[0]))
		}
		name = s
	}
	switch name {
	case "defined":
		return found, nil
	case "undefined":
		return !found, nil
	}
	if !found {
		return false, fmt.Errorf("UndefinedError: an item has no attribute '%s'", attr)
	}
	arg := func() (any, error) {
		if len(test) < 2 {
			return nil, fmt.Errorf("selectattr: test %q needs a value", name)
		}
		return test[1], nil
	}
	switch name {
	case "":
		return pyTruth(v), nil
	case "none":
		return v == nil, nil
	case "true":
		b, ok := v.(bool)
		return ok && b, nil
	case "false":
		b, ok := v.(bool)
		return ok && !b, nil
	case "string":
		_, ok := AsString(v)
		return ok, nil
	case "number":
		_, ok := ToNum(v)
		return ok, nil
	case "mapping":
		_, ok := AsDict(v)
		return ok, nil
	case "sequence":
		_, err := pyLength(v)
		return err == nil, nil
	}
	a, err := arg()
	if err != nil {
		return false, err
	}
	switch name {
	case "equalto", "eq", "==", "sameas":
		return pyEq(v, a), nil
	case "ne", "!=":
		return !pyEq(v, a), nil
	case "lt", "<", "lessthan":
		return pyLt(v, a)
	case "le", "<=":
		return pyLe(v, a)
	case "gt", ">", "greaterthan":
		return pyGt(v, a)
	case "ge", ">=":
		return pyGe(v, a)
	case "in":
		return pyIn(v, a)
	case "match":
		m, err := regexMatchPy(v, a)
		return m != nil, err
	case "search":
		m, err := regexSearch(v, a)
		return m != nil, err
	}
	return false, fmt.Errorf("TemplateRuntimeError: No test named '%s'", name)
}

// pyRandom is Jinja's random filter: an element of a sequence (a
// character of a string), chosen at random.
func pyRandom(seq any) (any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("no random element in an empty sequence")
	}
	return items[rand.IntN(len(items))], nil
}

// pyCompareLists is Salt's compare_lists filter: {"new": the items of new
// not in old, "old": the items of old not in new}, each key only when it
// has items.
func pyCompareLists(old, new any) (map[string]any, error) {
	o, err := iterate(old)
	if err != nil {
		return nil, err
	}
	n, err := iterate(new)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	diff := func(key string, from, in []any) error {
		for _, item := range from {
			found, err := pyIn(item, in)
			if err != nil {
				return err
			}
			if !found {
				l, _ := out[key].([]any)
				out[key] = append(l, item)
			}
		}
		return nil
	}
	if err := diff("new", n, o); err != nil {
		return nil, err
	}
	if err := diff("old", o, n); err != nil {
		return nil, err
	}
	return out, nil
}
