package py

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reactord/reactord/event"
)

// The helpers below are the ones only translated files call (arithmetic,
// % and format, tests, indexing, sort, indent), beside the general ones in
// py.go: each keeps a Jinja/Python behaviour the converted template relies
// on.

// jinjaFuncs are the helpers only files converted from Jinja call, by
// template name; Funcs returns them with pyFuncs.
var jinjaFuncs = map[string]any{
	"pyNone":      pyNone,
	"pyChars":     pyChars,
	"pySub":       pySub,
	"pyMul":       pyMul,
	"pyDiv":       pyDiv,
	"pyFloorDiv":  pyFloorDiv,
	"pyMod":       pyMod,
	"pyNeg":       pyNeg,
	"pyInt":       jinjaInt,
	"pyFloat":     jinjaFloat,
	"pyRound":     pyRound,
	"pyPercent":   pyPercent,
	"pyFormat":    pyFormat,
	"pyIs":        pyIs,
	"pyIndex":     pyIndex,
	"pyPprint":    pyPprint,
	"pyHasIndex":  pyHasIndex,
	"pyIndexOr":   pyIndexOr,
	"pyOrdered":   pyOrdered,
	"pySliceStep": pySliceStep,
	"pySort":      jinjaSort,
	"pyIndent":    pyIndent,
}

// pyNone is Python's None as a command: a Go template cannot use the nil
// constant alone, as in {% set x = None %}.
func pyNone() any { return nil }

// pyChars is list(s): the characters of a string, which is what a Jinja
// {% for %} over a string iterates.
func pyChars(s string) []any {
	out := make([]any, 0, len(s))
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// pyArith applies a binary arithmetic operator with Python's number rules:
// int op int is an int (unbounded), a float on either side makes a float,
// and a bool counts as 0 or 1.
func pyArith(op string, a, b any, ints func(x, y *big.Int) (*big.Int, error), floats func(x, y float64) (float64, error)) (any, error) {
	x, okx := ToNum(a)
	y, oky := ToNum(b)
	if !okx || !oky {
		return nil, fmt.Errorf("TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, pyTypeName(a), pyTypeName(b))
	}
	if !x.IsFloat && !y.IsFloat && ints != nil {
		r, err := ints(x.I, y.I)
		if err != nil {
			return nil, err
		}
		return intValue(r), nil
	}
	fx, err := x.Float()
	if err != nil {
		return nil, err
	}
	fy, err := y.Float()
	if err != nil {
		return nil, err
	}
	return floats(fx, fy)
}

// pySub is Python's a - b on numbers.
func pySub(a, b any) (any, error) {
	return pyArith("-", a, b,
		func(x, y *big.Int) (*big.Int, error) { return new(big.Int).Sub(x, y), nil },
		func(x, y float64) (float64, error) { return x - y, nil })
}

// pyMul is Python's a * b: numbers, or a string or list repeated an int
// number of times.
func pyMul(a, b any) (any, error) {
	if n, ok := repeatCount(b); ok {
		if s, ok := a.(string); ok {
			if n*len(s) > maxBuilt {
				return nil, fmt.Errorf("*: result longer than %d bytes", maxBuilt)
			}
			return strings.Repeat(s, n), nil
		}
		if l, ok := a.([]any); ok {
			if n*len(l) > maxItems {
				return nil, fmt.Errorf("*: more than %d items", maxItems)
			}
			out := make([]any, 0, n*len(l))
			for range n {
				out = append(out, l...)
			}
			return out, nil
		}
	}
	if _, isStr := b.(string); isStr {
		if _, ok := repeatCount(a); ok {
			return pyMul(b, a)
		}
	}
	if _, isList := b.([]any); isList {
		if _, ok := repeatCount(a); ok {
			return pyMul(b, a)
		}
	}
	return pyArith("*", a, b,
		func(x, y *big.Int) (*big.Int, error) {
			if x.BitLen()+y.BitLen() > 1<<16 {
				return nil, errors.New("*: integer result too large")
			}
			return new(big.Int).Mul(x, y), nil
		},
		func(x, y float64) (float64, error) { return x * y, nil })
}

// repeatCount is an int operand of sequence repetition (negative repeats
// nothing).
func repeatCount(v any) (int, bool) {
	n, ok := ToNum(v)
	if !ok || n.IsFloat || !n.I.IsInt64() {
		return 0, false
	}
	c := n.I.Int64()
	if c < 0 {
		c = 0
	}
	if c > maxItems*16 {
		c = maxItems * 16
	}
	return int(c), true
}

// pyDiv is Python's a / b: always a float.
func pyDiv(a, b any) (any, error) {
	return pyArith("/", a, b, nil, func(x, y float64) (float64, error) {
		if y == 0 {
			return 0, errors.New("ZeroDivisionError: division by zero")
		}
		return x / y, nil
	})
}

// pyFloorDiv is Python's a // b: floored, an int for two ints.
func pyFloorDiv(a, b any) (any, error) {
	return pyArith("//", a, b,
		func(x, y *big.Int) (*big.Int, error) {
			if y.Sign() == 0 {
				return nil, errors.New("ZeroDivisionError: integer division or modulo by zero")
			}
			q, m := new(big.Int).DivMod(x, y, new(big.Int))
			// DivMod is Euclidean (m >= 0); Python floors toward -inf.
			if m.Sign() != 0 && y.Sign() < 0 {
				q.Add(q, big.NewInt(1))
			}
			return q, nil
		},
		func(x, y float64) (float64, error) {
			if y == 0 {
				return 0, errors.New("ZeroDivisionError: float floor division by zero")
			}
			return math.Floor(x / y), nil
		})
}

// pyMod is Python's a % b: on numbers the result has the sign of b; on a
// string it is printf-style formatting (pyPercent).
func pyMod(a, b any) (any, error) {
	if s, ok := a.(string); ok {
		if _, isDict := AsDict(b); isDict {
			return pyPercent(s, b)
		}
		return pyPercent(s, []any{b}) // one value (a tuple literal is pyPercent's list)
	}
	return pyArith("%", a, b,
		func(x, y *big.Int) (*big.Int, error) {
			if y.Sign() == 0 {
				return nil, errors.New("ZeroDivisionError: integer division or modulo by zero")
			}
			m := new(big.Int).Mod(x, y) // Euclidean: 0 <= m < |y|
			if m.Sign() != 0 && y.Sign() < 0 {
				m.Add(m, y)
			}
			return m, nil
		},
		func(x, y float64) (float64, error) {
			if y == 0 {
				return 0, errors.New("ZeroDivisionError: float modulo")
			}
			m := math.Mod(x, y)
			if m != 0 && (m < 0) != (y < 0) {
				m += y
			}
			return m, nil
		})
}

// pyNeg is Python's -a.
func pyNeg(a any) (any, error) { return pySub(int64(0), a) }

// jinjaInt is Jinja's |int: int(v), else int(float(v)) for a string, else
// 0. Strings are read in base 10 ("010" is 10), as Python's int() does.
func jinjaInt(v any) any {
	switch x := v.(type) {
	case nil:
		return int64(0)
	case string:
		s := strings.TrimSpace(x)
		if i, ok := new(big.Int).SetString(strings.ReplaceAll(s, "_", ""), 10); ok && !strings.HasPrefix(s, "_") && !strings.HasSuffix(s, "_") && !strings.Contains(s, "__") {
			return intValue(i)
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && !strings.ContainsAny(s, "xXpP") {
			i, _ := new(big.Float).SetFloat64(math.Trunc(f)).Int(nil)
			return intValue(i)
		}
		return int64(0)
	}
	n, ok := ToNum(v)
	if !ok {
		return int64(0)
	}
	if !n.IsFloat {
		return intValue(n.I)
	}
	if math.IsInf(n.F, 0) || math.IsNaN(n.F) {
		return int64(0)
	}
	i, _ := new(big.Float).SetFloat64(math.Trunc(n.F)).Int(nil)
	return intValue(i)
}

// jinjaFloat is Jinja's |float: float(v), else 0.0.
func jinjaFloat(v any) float64 {
	if s, ok := v.(string); ok {
		t := strings.ToLower(strings.TrimSpace(s))
		switch strings.TrimLeft(t, "+-") {
		case "inf", "infinity", "nan":
		default:
			if strings.ContainsAny(t, "xp") {
				return 0
			}
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0
		}
		return f
	}
	n, ok := ToNum(v)
	if !ok {
		return 0
	}
	f, err := n.Float()
	if err != nil {
		return 0
	}
	return f
}

// pyRound is Jinja's |round(precision) (method "common"): Python's
// round(v, precision), a float, ties to even on the exact binary value.
func pyRound(v, precision any) (float64, error) {
	n, ok := ToNum(v)
	if !ok {
		return 0, fmt.Errorf("TypeError: type %s doesn't define __round__ method", pyTypeName(v))
	}
	p, ok := ToNum(precision)
	if !ok || p.IsFloat || !p.I.IsInt64() {
		return 0, fmt.Errorf("TypeError: '%s' object cannot be interpreted as an integer", pyTypeName(precision))
	}
	f, err := n.Float()
	if err != nil {
		return 0, err
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f, nil
	}
	digits := p.I.Int64()
	if digits > 300 {
		return f, nil
	}
	if digits < 0 {
		scale := math.Pow(10, float64(-digits))
		return math.RoundToEven(f/scale) * scale, nil
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(digits), 64), 64)
	if err != nil {
		return 0, err
	}
	return r, nil
}

// pyPercent is Python's printf-style format % args: args is a tuple (a
// list here, as the converter writes tuples), a dict for %(name)s, or one
// value. Conversions s, r, a, d, i, u, f, F, e, E, g, G, x, X, o, c and %%,
// with flags, width and precision.
func pyPercent(format string, args any) (string, error) {
	var pos []any
	dict, isDict := AsDict(args)
	if l, _, ok := AsList(args); ok {
		pos = l
	} else if !isDict {
		pos = []any{args}
	}
	var b strings.Builder
	next := 0
	rs := format
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(rs) {
			return "", errors.New("ValueError: incomplete format")
		}
		var arg any
		haveArg := false
		if rs[i] == '(' {
			end := strings.IndexByte(rs[i:], ')')
			if end < 0 || !isDict {
				return "", errors.New("TypeError: format requires a mapping")
			}
			key := rs[i+1 : i+end]
			v, ok := dict.Get(key)
			if !ok {
				return "", fmt.Errorf("KeyError: %s", reprOf(key))
			}
			arg, haveArg = v, true
			i += end + 1
		}
		j := i
		for j < len(rs) && strings.IndexByte("-+ #0", rs[j]) >= 0 {
			j++
		}
		flags := rs[i:j]
		k := j
		for k < len(rs) && (rs[k] >= '0' && rs[k] <= '9' || rs[k] == '.') {
			k++
		}
		width := rs[j:k]
		for k < len(rs) && strings.IndexByte("hlL", rs[k]) >= 0 {
			k++
		}
		if k >= len(rs) {
			return "", errors.New("ValueError: incomplete format")
		}
		conv := rs[k]
		i = k
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if !haveArg {
			if isDict && pos == nil {
				arg = args
			} else {
				if next >= len(pos) {
					return "", errors.New("TypeError: not enough arguments for format string")
				}
				arg = pos[next]
				next++
			}
		}
		s, err := percentOne(flags, width, conv, arg)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		if b.Len() > maxBuilt {
			return "", fmt.Errorf("%%: result longer than %d bytes", maxBuilt)
		}
	}
	if !isDict && next < len(pos) {
		return "", errors.New("TypeError: not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// percentOne formats one value for pyPercent.
func percentOne(flags, width string, conv byte, v any) (string, error) {
	spec := "%" + flags + width
	switch conv {
	case 's':
		return fmt.Sprintf(strings.ReplaceAll(spec, "#", "")+"s", Str(v)), nil
	case 'r', 'a':
		return fmt.Sprintf(strings.ReplaceAll(spec, "#", "")+"s", reprOf(v)), nil
	case 'c':
		if s, ok := v.(string); ok && len([]rune(s)) == 1 {
			return fmt.Sprintf(spec+"s", s), nil
		}
		n, ok := ToNum(v)
		if !ok || n.IsFloat || !n.I.IsInt64() {
			return "", errors.New("TypeError: %c requires an int or a unicode character")
		}
		return fmt.Sprintf(spec+"c", rune(n.I.Int64())), nil
	}
	n, ok := ToNum(v)
	if !ok {
		return "", fmt.Errorf("TypeError: %%%c format: a real number is required, not %s", conv, pyTypeName(v))
	}
	switch conv {
	case 'd', 'i', 'u', 'x', 'X', 'o':
		i := n.I
		if n.IsFloat {
			if conv != 'd' && conv != 'i' && conv != 'u' {
				return "", fmt.Errorf("TypeError: %%%c format: an integer is required, not float", conv)
			}
			if math.IsInf(n.F, 0) || math.IsNaN(n.F) {
				return "", errors.New("OverflowError: cannot convert float infinity or NaN to integer")
			}
			i, _ = new(big.Float).SetFloat64(math.Trunc(n.F)).Int(nil)
		}
		verb := map[byte]string{'d': "d", 'i': "d", 'u': "d", 'x': "x", 'X': "X", 'o': "o"}[conv]
		s := fmt.Sprintf(strings.ReplaceAll(spec, "#", "")+verb, i)
		if strings.Contains(flags, "#") && conv != 'd' && conv != 'i' && conv != 'u' {
			prefix := map[byte]string{'x': "0x", 'X': "0X", 'o': "0o"}[conv]
			s = fmt.Sprintf(strings.ReplaceAll(spec, "#", "")+"s", prefix+fmt.Sprintf("%"+verb, i))
		}
		return s, nil
	case 'f', 'F', 'e', 'E', 'g', 'G':
		f, err := n.Float()
		if err != nil {
			return "", err
		}
		if !strings.Contains(width, ".") {
			spec += ".6"
		}
		s := fmt.Sprintf(spec+string(conv), f)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			s = strings.NewReplacer("+Inf", "inf", "-Inf", "-inf", "Inf", "inf", "NaN", "nan").Replace(s)
			if conv == 'F' || conv == 'E' || conv == 'G' {
				s = strings.ToUpper(s)
			}
		}
		return s, nil
	}
	return "", fmt.Errorf("ValueError: unsupported format character '%c'", conv)
}

// pyFormat is Python's str.format with positional fields ({} and {0}),
// conversions !s and !r, and the format specs pyFormatSpec handles.
func pyFormat(format string, args ...any) (string, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '{' && i+1 < len(format) && format[i+1] == '{':
			b.WriteByte('{')
			i++
			continue
		case c == '}' && i+1 < len(format) && format[i+1] == '}':
			b.WriteByte('}')
			i++
			continue
		case c == '}':
			return "", errors.New("ValueError: Single '}' encountered in format string")
		case c != '{':
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(format[i:], '}')
		if end < 0 {
			return "", errors.New("ValueError: Single '{' encountered in format string")
		}
		field := format[i+1 : i+end]
		i += end
		name, spec, _ := strings.Cut(field, ":")
		name, convName, _ := strings.Cut(name, "!")
		idx := auto
		if name == "" {
			auto++
		} else {
			n, err := strconv.Atoi(name)
			if err != nil {
				return "", fmt.Errorf("KeyError: %s", reprOf(name))
			}
			idx = n
		}
		if idx >= len(args) {
			return "", fmt.Errorf("IndexError: Replacement index %d out of range for positional args tuple", idx)
		}
		v := args[idx]
		switch convName {
		case "r", "a":
			v = reprOf(v)
		case "s":
			v = Str(v)
		case "":
		default:
			return "", fmt.Errorf("ValueError: Unknown conversion specifier %s", convName)
		}
		s, err := pyFormatSpec(v, spec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		if b.Len() > maxBuilt {
			return "", fmt.Errorf("format: result longer than %d bytes", maxBuilt)
		}
	}
	return b.String(), nil
}

// formatSpec is [[fill]align][sign][0][width][.precision][type].
var formatSpec = regexp.MustCompile(`^(?:(.)?([<>^=]))?([-+ ])?(0)?(\d*)(?:\.(\d+))?([sdfFeEgGxXo%]?)$`)

// pyFormatSpec formats one value for pyFormat.
func pyFormatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return Str(v), nil
	}
	m := formatSpec.FindStringSubmatch(spec)
	if m == nil {
		return "", fmt.Errorf("ValueError: Invalid format specifier '%s'", spec)
	}
	fill, align, sign, zero, width, prec, typ := m[1], m[2], m[3], m[4], m[5], m[6], m[7]
	var s string
	_, isStr := v.(string)
	switch {
	case typ == "s" || typ == "" && isStr:
		if !isStr {
			return "", fmt.Errorf("ValueError: Unknown format code 's' for object of type '%s'", pyTypeName(v))
		}
		s = v.(string)
		if prec != "" {
			p, _ := strconv.Atoi(prec)
			if r := []rune(s); len(r) > p {
				s = string(r[:p])
			}
		}
		if align == "" {
			align = "<"
		}
	case typ == "" && prec == "":
		s = Str(v)
		if align == "" {
			align = ">"
		}
		if _, ok := ToNum(v); !ok {
			align = "<"
		}
	default:
		if typ == "" {
			typ = "g"
		}
		precPart := ""
		if prec != "" {
			precPart = "." + prec
		}
		if typ == "%" {
			n, ok := ToNum(v)
			if !ok {
				return "", fmt.Errorf("ValueError: Unknown format code '%%' for object of type '%s'", pyTypeName(v))
			}
			f, err := n.Float()
			if err != nil {
				return "", err
			}
			if precPart == "" {
				precPart = ".6"
			}
			out, err := percentOne(sign, precPart, 'f', f*100)
			if err != nil {
				return "", err
			}
			s = out + "%"
		} else {
			out, err := percentOne(sign, precPart, typ[0], v)
			if err != nil {
				return "", err
			}
			s = out
		}
		if align == "" {
			align = ">"
		}
	}
	if width == "" {
		return s, nil
	}
	wd, _ := strconv.Atoi(width)
	pad := wd - len([]rune(s))
	if pad <= 0 {
		return s, nil
	}
	if zero != "" && fill == "" && (align == ">" || m[2] == "") {
		fill, align = "0", "="
	}
	if fill == "" {
		fill = " "
	}
	switch align {
	case "<":
		return s + strings.Repeat(fill, pad), nil
	case "^":
		return strings.Repeat(fill, pad/2) + s + strings.Repeat(fill, pad-pad/2), nil
	case "=":
		if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
			return s[:1] + strings.Repeat(fill, pad) + s[1:], nil
		}
	}
	return strings.Repeat(fill, pad) + s, nil
}

// pyIs is Jinja's test v is NAME(args): number, integer, float, boolean,
// true, false, sequence, iterable, even, odd, divisibleby(n), lower, upper,
// and sameas with None, True or False.
func pyIs(name string, v any, args ...any) (bool, error) {
	n, isNum := ToNum(v)
	_, isBool := v.(bool)
	switch name {
	case "number":
		return isNum, nil
	case "integer":
		return isNum && !n.IsFloat && !isBool, nil
	case "float":
		return isNum && n.IsFloat, nil
	case "boolean":
		return isBool, nil
	case "true":
		return v == true, nil
	case "false":
		return v == false, nil
	case "sequence", "iterable":
		if _, ok := v.(string); ok {
			return true, nil
		}
		if _, ok := AsDict(v); ok {
			return true, nil
		}
		_, _, ok := AsList(v)
		return ok, nil
	case "even", "odd", "divisibleby":
		d := any(int64(2))
		if name == "divisibleby" {
			if len(args) != 1 {
				return false, errors.New("TypeError: divisibleby takes one argument")
			}
			d = args[0]
		}
		r, err := pyMod(v, d)
		if err != nil {
			return false, err
		}
		zero := pyEq(r, int64(0))
		if name == "odd" {
			return !zero, nil
		}
		return zero, nil
	case "lower", "upper":
		s := Str(v)
		cased := false
		for _, r := range s {
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				if name == "lower" {
					return false, nil
				}
				cased = true
			}
			if unicode.IsLower(r) {
				if name == "upper" {
					return false, nil
				}
				cased = true
			}
		}
		return cased, nil
	case "sameas":
		if len(args) != 1 {
			return false, errors.New("TypeError: sameas takes one argument")
		}
		switch o := args[0].(type) {
		case nil:
			return v == nil, nil
		case bool:
			b, ok := v.(bool)
			return ok && b == o, nil
		}
		return false, errors.New("sameas: only None, True and False have an identity reactord can test")
	}
	return false, fmt.Errorf("no test named '%s'", name)
}

// pyIndex is Jinja's v[k]: a list's or tuple's item (negative k counts
// from the end), a string's character (by code point), a dict's value.
// What Python refuses is undefined in Jinja, and an error under Salt's
// StrictUndefined, worded as Jinja words it.
func pyIndex(v, k any) (any, error) {
	if d, ok := AsDict(v); ok {
		s, isStr := k.(string)
		if isStr {
			if e, ok := d.Get(s); ok {
				return e, nil
			}
			return nil, fmt.Errorf("%s is undefined: 'dict object' has no attribute %s", reprOf(k), reprOf(k))
		}
		return nil, noElement(v, k)
	}
	if _, isStr := k.(string); isStr {
		return nil, fmt.Errorf("%s has no attribute %s", jinjaTypeRepr(v), reprOf(k))
	}
	n, ok := ToNum(k)
	if !ok || n.IsFloat {
		return nil, noElement(v, k)
	}
	if s, ok := v.(string); ok {
		rs := []rune(s)
		i, err := seqIndex(len(rs), n)
		if err != nil {
			return nil, noElement(v, k)
		}
		return string(rs[i]), nil
	}
	if items, _, ok := AsList(v); ok {
		i, err := seqIndex(len(items), n)
		if err != nil {
			return nil, noElement(v, k)
		}
		return items[i], nil
	}
	return nil, noElement(v, k)
}

// pyHasIndex is Jinja's v[k] is defined, for a key that is not a string
// literal: whether v[k] finds an element.
func pyHasIndex(v, k any) bool {
	_, err := pyIndex(v, k)
	return err == nil
}

// pyIndexOr is v[k]|default(d): v[k], or d where Jinja finds no element.
func pyIndexOr(v, k, d any) any {
	if e, err := pyIndex(v, k); err == nil {
		return e
	}
	return d
}

// noElement is StrictUndefined's error for v[k] that Jinja made
// undefined: "'int object' has no element 0".
func noElement(v, k any) error {
	return fmt.Errorf("%s has no element %s", jinjaTypeRepr(v), reprOf(k))
}

// jinjaTypeRepr is Jinja's object_type_repr as StrictUndefined quotes it:
// 'int object', 'None'.
func jinjaTypeRepr(v any) string {
	if v == nil {
		return "'None'"
	}
	return "'" + pyTypeName(v) + " object'"
}

func seqIndex(length int, n Num) (int, error) {
	if !n.I.IsInt64() {
		return 0, errors.New("IndexError: cannot fit 'int' into an index-sized integer")
	}
	i := n.I.Int64()
	if i < 0 {
		i += int64(length)
	}
	if i < 0 || i >= int64(length) {
		return 0, errors.New("IndexError: list index out of range")
	}
	return int(i), nil
}

// pySliceStep is Python's v[start:stop:step] on a string (by code point),
// list or tuple; nil is an open end.
func pySliceStep(v, start, stop, step any) (any, error) {
	st := int64(1)
	if step != nil {
		n, ok := ToNum(step)
		if !ok || n.IsFloat || !n.I.IsInt64() {
			return nil, errors.New("TypeError: slice indices must be integers or None or have an __index__ method")
		}
		st = n.I.Int64()
	}
	if st == 0 {
		return nil, errors.New("ValueError: slice step cannot be zero")
	}
	var items []any
	s, isStr := v.(string)
	tuple := false
	if isStr {
		for _, r := range s {
			items = append(items, string(r))
		}
	} else {
		var ok bool
		if items, tuple, ok = AsList(v); !ok {
			return nil, fmt.Errorf("TypeError: '%s' object is not subscriptable", pyTypeName(v))
		}
	}
	length := int64(len(items))
	lower, upper := int64(0), length
	if st < 0 {
		lower, upper = -1, length-1
	}
	clamp := func(x any, def int64) (int64, error) {
		if x == nil {
			return def, nil
		}
		n, ok := ToNum(x)
		if !ok || n.IsFloat {
			return 0, errors.New("TypeError: slice indices must be integers or None or have an __index__ method")
		}
		if !n.I.IsInt64() {
			if n.I.Sign() < 0 {
				return lower, nil
			}
			return upper, nil
		}
		i := n.I.Int64()
		if i < 0 {
			i += length
			if i < lower {
				i = lower
			}
		} else if i > upper {
			i = upper
		}
		return i, nil
	}
	defStart, defStop := lower, upper
	if st < 0 {
		defStart, defStop = upper, lower
	}
	lo, err := clamp(start, defStart)
	if err != nil {
		return nil, err
	}
	hi, err := clamp(stop, defStop)
	if err != nil {
		return nil, err
	}
	var out []any
	for i := lo; st > 0 && i < hi || st < 0 && i > hi; i += st {
		out = append(out, items[i])
	}
	if isStr {
		var b strings.Builder
		for _, e := range out {
			b.WriteString(e.(string))
		}
		return b.String(), nil
	}
	if out == nil {
		out = []any{}
	}
	if tuple {
		return pyTuple(out), nil
	}
	return out, nil
}

// pyOrdered is the dict m in a given key order, as a Jinja dict literal
// keeps it (a Go map forgets it): the keys named that m holds, in that
// order, then any others in m's own order.
func pyOrdered(m any, keys ...string) (*event.Map, error) {
	d, ok := AsDict(m)
	if !ok {
		return nil, fmt.Errorf("pyOrdered: %s is not a dict", pyTypeName(m))
	}
	out := event.NewMap(len(d.Keys))
	for _, k := range keys {
		if v, ok := d.Get(k); ok {
			out.Set(k, v)
		}
	}
	for _, k := range d.Keys {
		if _, done := out.Get(k); !done {
			v, _ := d.Get(k)
			out.Set(k, v)
		}
	}
	return out, nil
}

// jinjaSort (template name pySort) is Jinja's seq|sort(reverse, case_sensitive, attribute): the items
// (a dict's keys) in Python's order, strings compared lower-cased unless
// caseSensitive, by an attribute of each item when attribute is not empty.
// Items Python cannot compare (a str and an int) are an error, as in Salt.
func jinjaSort(seq any, reverse, caseSensitive bool, attribute string) ([]any, error) {
	items, err := iterate(seq)
	if err != nil {
		return nil, err
	}
	keys := make([]any, len(items))
	for i, it := range items {
		k := it
		if attribute != "" {
			v, ok := attrOf(it, attribute)
			if !ok {
				return nil, fmt.Errorf("UndefinedError: '%s object' has no attribute '%s'", pyTypeName(it), attribute)
			}
			k = v
		}
		if s, ok := AsString(k); ok && !caseSensitive {
			k = strings.ToLower(s)
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := keys[idx[a]], keys[idx[b]]
		if reverse {
			x, y = y, x
		}
		lt, err := pyCompare("<", x, y)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		return lt
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

// pyIndent is Jinja's s|indent(width, first, blank) (Jinja 3): every line
// but the first indented by width spaces (or by width itself when it is a
// string), the first too when first, blank lines too when blank. Lines
// are split as Python's str.splitlines splits them.
func pyIndent(s any, width any, first, blank any) (string, error) {
	text := Str(s)
	ind := ""
	if w, ok := AsString(width); ok {
		ind = w
	} else if n, ok := ToNum(width); ok && !n.IsFloat && n.I.IsInt64() && n.I.Int64() >= 0 && n.I.Int64() <= 1024 {
		ind = strings.Repeat(" ", int(n.I.Int64()))
	} else {
		return "", fmt.Errorf("TypeError: indent width must be an integer or a string, not %s", pyTypeName(width))
	}
	lines := pySplitLines(text + "\n")
	var b strings.Builder
	if pyTruth(blank) {
		b.WriteString(strings.Join(lines, "\n"+ind))
	} else if len(lines) > 0 {
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteString("\n")
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
	}
	if pyTruth(first) {
		return ind + b.String(), nil
	}
	return b.String(), nil
}

// pySplitLines is Python's str.splitlines(): lines split at \n, \r, \r\n,
// \v, \f, \x1c, \x1d, \x1e, \x85, U+2028 and U+2029, without the breaks;
// no empty last line for a trailing break.
func pySplitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			out = append(out, s[start:i])
			start = i + n
		case '\r':
			out = append(out, s[start:i])
			if strings.HasPrefix(s[i+1:], "\n") {
				n++
			}
			start = i + n
		}
		i += n
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
