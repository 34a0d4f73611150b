package execdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reactord/reactord/event"
)

// The salt, salt-run and salt-call command lines hand every argument to
// salt.utils.args.parse_input, which splits off `key=value` words as keyword
// arguments (KWARG_REGEX, ^([^\d\W][\w.-]*)=(?!=)(.*)$) and passes every
// word and every value through yamlify_arg: a YAML 1.1 safe_load with a few
// exceptions (text holding a tab, CR or LF, or a '#' that would load as a
// string, is kept verbatim; "None" is None; lists and mappings must start
// with '[' or '{'). The encoders below write a value so that this parse gives
// it back exactly, with the type it had in the low chunk.

// argText encodes v as one positional argument.
func argText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return stringText(s)
	}
	return valueText(v)
}

// kwargText encodes one keyword argument as `key=value`. The key must be
// one parse_input recognises as a keyword.
func kwargText(key string, v any) (string, error) {
	if !validKwargName(key) {
		return "", fmt.Errorf("keyword argument name %q cannot be passed on the command line (salt reads only names matching [A-Za-z_][A-Za-z0-9_.-]*)", key)
	}
	val, err := argText(v)
	if err != nil {
		return "", fmt.Errorf("keyword argument %s: %w", key, err)
	}
	return key + "=" + val, nil
}

// validKwargName mirrors the key part of Salt's KWARG_REGEX, [^\d\W][\w.-]*,
// conservatively: a letter or underscore, then letters, digits, '_', '.'
// and '-'.
func validKwargName(key string) bool {
	if key == "" || !utf8.ValidString(key) {
		return false
	}
	for i, r := range key {
		switch {
		case r == '_' || unicode.IsLetter(r):
		case i > 0 && (unicode.IsDigit(r) || r == '.' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// stringText encodes a string: as it is when YAML reads the bare word back
// as the same string, else as a YAML double-quoted scalar.
func stringText(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("argument %q is not valid UTF-8", s)
	}
	if plainSafe(s) {
		return s, nil
	}
	return quoted(s), nil
}

// yamlWords are the bare words YAML 1.1 (PyYAML's resolver) or yamlify_arg
// turn into something other than a string. y/n are not booleans to PyYAML,
// but they are in the YAML 1.1 spec; they are quoted to be safe.
var yamlWords = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "no": true, "No": true, "NO": true,
	"true": true, "True": true, "TRUE": true, "false": true, "False": true, "FALSE": true,
	"on": true, "On": true, "ON": true, "off": true, "Off": true, "OFF": true,
	"y": true, "Y": true, "n": true, "N": true,
	"null": true, "Null": true, "NULL": true, "None": true,
}

// plainSafe reports whether s can be passed bare: it starts with an ASCII
// letter or '/', holds only letters, digits, single-byte punctuation from
// `_./@:+-,*%` and inner spaces, has no ": " and no trailing ':', and is not
// a YAML keyword. Such a word is a plain YAML scalar that no resolver
// (int, float, bool, null, timestamp, merge, value) matches, contains no '='
// (so parse_input never takes it for a keyword argument) and no '#'. Any
// other string is quoted; quoting is always correct, this only keeps common
// arguments (paths, state names, "ls -l /tmp") readable in process listings.
func plainSafe(s string) bool {
	if s == "" || s[len(s)-1] == ' ' || s[len(s)-1] == ':' {
		return false
	}
	if c := s[0]; !isASCIILetter(c) && c != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isASCIILetter(c), c >= '0' && c <= '9':
		case strings.IndexByte("_./@:+-,*%", c) >= 0:
		case c == ' ':
			if s[i-1] == ':' {
				return false
			}
		default:
			return false
		}
	}
	return !yamlWords[s]
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// quoted writes s as a YAML double-quoted scalar that needs no character
// yamlify_arg treats specially: tab, CR and LF are escaped (a raw one makes
// Salt skip YAML and keep the quotes), '#' is written \x23 (a raw one makes
// Salt keep the quotes when the result is a string), and characters YAML
// readers reject or fold (C0/C1 controls, DEL, NEL, U+2028, U+2029, U+FEFF,
// U+FFFE, U+FFFF) are escaped too.
func quoted(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '#':
			b.WriteString(`\x23`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			fmt.Fprintf(&b, `\x%02X`, r)
		case r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// valueText encodes a non-string value at the top of an argument: scalars
// as YAML 1.1 scalars, lists and mappings in flow style (which yamlify_arg
// requires to start with '[' or '{').
func valueText(v any) (string, error) {
	var b strings.Builder
	if err := writeFlow(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// maxDepth bounds nesting so a cyclic value cannot recurse forever.
const maxDepth = 100

// writeFlow writes v as a YAML flow node. Strings inside lists and mappings
// are always double-quoted, so flow indicators in them need no thought.
func writeFlow(b *strings.Builder, v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("argument nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return fmt.Errorf("argument %q is not valid UTF-8", x)
		}
		b.WriteString(quoted(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeFlow(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		items := make([]any, len(x))
		for i, s := range x {
			items[i] = s
		}
		return writeFlow(b, items, depth)
	case *event.Map:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('{')
		for i := 0; i < x.Len(); i++ {
			k, e := x.At(i)
			if err := writePair(b, i, k, e, depth); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if err := writePair(b, i, k, x[k], depth); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		s, err := scalarText(v)
		if err != nil {
			return err
		}
		b.WriteString(s)
	}
	return nil
}

func writePair(b *strings.Builder, i int, k string, v any, depth int) error {
	if i > 0 {
		b.WriteString(", ")
	}
	if !utf8.ValidString(k) {
		return fmt.Errorf("mapping key %q is not valid UTF-8", k)
	}
	b.WriteString(quoted(k))
	b.WriteString(": ")
	return writeFlow(b, v, depth+1)
}

// scalarText writes a non-string scalar as the YAML 1.1 text that loads as
// the same Python value.
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int8, int16, int32, int64:
		return fmt.Sprint(x), nil
	case uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	case float32:
		return floatText(float64(x)), nil
	case float64:
		return floatText(x), nil
	case *big.Int:
		if x == nil {
			return "null", nil
		}
		return x.String(), nil
	case json.Number:
		s := string(x)
		if isDecimalInt(s) {
			return s, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRangeErr(err) {
			return "", fmt.Errorf("number %q cannot be passed on the command line: %w", s, err)
		}
		return floatText(f), nil
	}
	return "", fmt.Errorf("a value of type %T cannot be passed on the command line", v)
}

func isRangeErr(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange)
}

// isDecimalInt reports whether s is an optional '-' and decimal digits
// without a superfluous leading zero (YAML 1.1 reads 0-prefixed digits as
// octal; Salt strips the zeros, but JSON never writes them anyway).
func isDecimalInt(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// floatText writes f as Python's repr does, adjusted to the YAML 1.1 float
// pattern PyYAML resolves, which needs a '.' in the mantissa and a signed
// exponent: 1e+16 becomes 1.0e+16; infinities and NaN are .inf, -.inf, .nan.
func floatText(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := event.PyFloat(f)
	if i := strings.IndexAny(s, "eE"); i >= 0 && !strings.Contains(s[:i], ".") {
		s = s[:i] + ".0" + s[i:]
	}
	return s
}
