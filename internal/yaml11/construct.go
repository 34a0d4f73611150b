package yaml11

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error is a YAML error: a syntax error from the parser or an error Salt's
// loader would raise while building values. Line and Column are 1-based;
// zero means unknown.
type Error struct {
	Line, Column int
	Msg          string
}

// Error formats the error as "yaml: line L, column C: msg", leaving out the
// parts of the position that are unknown.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("yaml: line %d, column %d: %s", e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("yaml: line %d: %s", e.Line, e.Msg)
	}
	return "yaml: " + e.Msg
}

func errAt(n *Node, msg string) *Error {
	e := &Error{Msg: msg}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// Python exceptions other than ConstructorError escape Salt's loader as they
// are; their messages keep the Python exception name.
func valueError(msg string) *Error { return &Error{Msg: "ValueError: " + msg} }

var errIndex = &Error{Msg: "IndexError: string index out of range"}

func indexError() *Error { e := *errIndex; return &e }

// constructBool is SafeConstructor.construct_yaml_bool:
// bool_values[value.lower()].
func constructBool(text string) (bool, *Error) {
	switch strings.ToLower(text) {
	case "yes", "true", "on":
		return true, nil
	case "no", "false", "off":
		return false, nil
	}
	return false, &Error{Msg: "KeyError: " + pyRepr(strings.ToLower(text))}
}

// constructInt is SaltYamlSafeLoader.construct_scalar followed by PyYAML's
// SafeConstructor.construct_yaml_int, for any text (explicit !!int tags
// reach it with texts the resolver would not have matched).
//
// Salt's construct_scalar: when the text is not "0", starts with "0" and
// starts with neither "0b" nor "0x", the leading zeros are stripped
// (value.lstrip("0"), and "" becomes "0"). Only then does PyYAML remove
// underscores, take one sign, and pick the base: "0" is 0, "0b" binary,
// "0x" hex, another leading "0" octal (reachable only with a sign, e.g.
// "-010" is -8, or via underscores: "0_10" becomes "_10" then "10"), ":"
// sexagesimal, else decimal. The Python errors of odd texts are kept:
// "0_" becomes "_" then "" and value[0] raises IndexError.
func constructInt(text string) (any, *Error) {
	v := text
	if v != "0" && strings.HasPrefix(v, "0") && !strings.HasPrefix(v, "0b") && !strings.HasPrefix(v, "0x") {
		v = trimLeftZeros(v)
		if v == "" {
			v = "0"
		}
	}
	if strings.IndexByte(v, '_') >= 0 {
		v = strings.ReplaceAll(v, "_", "")
	}
	if v == "" {
		return nil, indexError()
	}
	neg := v[0] == '-'
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	var (
		r   pyInt
		err *Error
	)
	switch {
	case v == "0":
		return int64(0), nil
	case strings.HasPrefix(v, "0b"):
		r, err = parsePyInt(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		r, err = parsePyInt(v[2:], 16)
	case v == "":
		return nil, indexError()
	case v[0] == '0':
		r, err = parsePyInt(v, 8)
	case strings.Contains(v, ":"):
		r, err = sexagesimalInt(v)
	default:
		r, err = parsePyInt(v, 10)
	}
	if err != nil {
		return nil, err
	}
	if neg {
		r = r.neg()
	}
	return r.value(), nil
}

// sexagesimalInt sums the ":"-separated parts, the last one being units.
func sexagesimalInt(v string) (pyInt, *Error) {
	parts := strings.Split(v, ":")
	digits := make([]pyInt, len(parts))
	for i, p := range parts {
		d, err := parsePyInt(p, 10)
		if err != nil {
			return pyInt{}, err
		}
		digits[i] = d
	}
	sum := new(big.Int)
	base := big.NewInt(1)
	sixty := big.NewInt(60)
	t := new(big.Int)
	for i := len(digits) - 1; i >= 0; i-- {
		sum.Add(sum, t.Mul(digits[i].toBig(), base))
		base.Mul(base, sixty)
	}
	return pyIntFromBig(sum), nil
}

// pyInt is a Python int: small unless big is set.
type pyInt struct {
	small int64
	big   *big.Int
}

func pyIntFromBig(b *big.Int) pyInt {
	if b.IsInt64() {
		return pyInt{small: b.Int64()}
	}
	return pyInt{big: b}
}

func (p pyInt) toBig() *big.Int {
	if p.big != nil {
		return p.big
	}
	return big.NewInt(p.small)
}

func (p pyInt) neg() pyInt {
	if p.big == nil && p.small != math.MinInt64 {
		return pyInt{small: -p.small}
	}
	return pyIntFromBig(new(big.Int).Neg(p.toBig()))
}

// value returns int64 or *big.Int.
func (p pyInt) value() any {
	if p.big != nil {
		return p.big
	}
	return p.small
}

// maxStrDigits is CPython's default sys.get_int_max_str_digits() (3.10.7+).
const maxStrDigits = 4300

// parsePyInt is Python's int(arg, base) for the bases PyYAML uses (2, 8,
// 10, 16) on a string without underscores: surrounding whitespace, one sign,
// a base prefix matching base, and Unicode decimal digits are accepted.
func parsePyInt(arg string, base int) (pyInt, *Error) {
	bad := func() (pyInt, *Error) {
		return pyInt{}, valueError(fmt.Sprintf("invalid literal for int() with base %d: %s", base, pyRepr(arg)))
	}
	s := pyTrimSpace(arg)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if base != 10 && len(s) >= 2 && s[0] == '0' {
		if p := s[1] | 0x20; (base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b') {
			s = s[2:]
		}
	}
	if s == "" {
		return bad()
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if d := digitVal(rune(s[i])); s[i] >= utf8.RuneSelf || d < 0 || d >= base {
			ascii = false
			break
		}
	}
	digits := s
	if !ascii {
		var b strings.Builder
		for _, r := range s {
			d := digitVal(r)
			if d < 0 || d >= base {
				return bad()
			}
			b.WriteByte("0123456789abcdef"[d])
		}
		digits = b.String()
	}
	if base == 10 && len(digits) > maxStrDigits {
		return pyInt{}, valueError(fmt.Sprintf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits; use sys.set_int_max_str_digits() to increase the limit", maxStrDigits, len(digits)))
	}
	var r pyInt
	if u, err := strconv.ParseUint(digits, base, 63); err == nil {
		r = pyInt{small: int64(u)}
	} else {
		b, _ := new(big.Int).SetString(digits, base)
		r = pyIntFromBig(b)
	}
	if neg {
		r = r.neg()
	}
	return r, nil
}

// digitVal returns the value of a digit in bases up to 16: ASCII digits and
// letters, and Unicode decimal digits (category Nd), which Python's int()
// and float() accept. It returns -1 for anything else.
func digitVal(r rune) int {
	switch {
	case r >= '0' && r <= '9':
		return int(r - '0')
	case r >= 'a' && r <= 'z':
		return int(r-'a') + 10
	case r >= 'A' && r <= 'Z':
		return int(r-'A') + 10
	case r < utf8.RuneSelf:
		return -1
	case unicode.Is(unicode.Nd, r):
		// Nd characters come in runs of whole 0-9 sets.
		z := r
		for unicode.Is(unicode.Nd, z-1) {
			z--
		}
		return int(r-z) % 10
	}
	return -1
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyTrimSpace is Python's str.strip().
func pyTrimSpace(s string) string {
	return strings.TrimFunc(s, pyIsSpace)
}

// constructFloat is PyYAML's SafeConstructor.construct_yaml_float for any
// text: underscores removed, lower-cased, one sign taken, then ".inf",
// ".nan", sexagesimal with ":" or Python's float(). sharedNaN reports that
// the result is PyYAML's single nan_value object (from ".nan"), which
// compares equal to itself as a dict key; other NaNs never do.
func constructFloat(text string) (f float64, sharedNaN bool, err *Error) {
	v := text
	if strings.IndexByte(v, '_') >= 0 {
		v = strings.ReplaceAll(v, "_", "")
	}
	v = strings.ToLower(v)
	if v == "" {
		return 0, false, indexError()
	}
	sign := 1.0
	if v[0] == '-' {
		sign = -1
	}
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1), false, nil
	case v == ".nan":
		return math.NaN(), true, nil
	case strings.Contains(v, ":"):
		f, err = sexagesimalFloat(v)
	default:
		f, err = parsePyFloat(v)
	}
	if err != nil {
		return 0, false, err
	}
	return sign * f, false, nil
}

// sexagesimalFloat mirrors PyYAML: value = 0.0, base = 1 (a Python int),
// and for each part from the last: value += float(part) * base; base *= 60.
func sexagesimalFloat(v string) (float64, *Error) {
	parts := strings.Split(v, ":")
	digits := make([]float64, len(parts))
	for i, p := range parts {
		d, err := parsePyFloat(p)
		if err != nil {
			return 0, err
		}
		digits[i] = d
	}
	value := 0.0
	base := big.NewInt(1)
	sixty := big.NewInt(60)
	for i := len(digits) - 1; i >= 0; i-- {
		b, _ := new(big.Float).SetInt(base).Float64()
		if math.IsInf(b, 0) {
			return 0, &Error{Msg: "OverflowError: int too large to convert to float"}
		}
		value += digits[i] * b
		base.Mul(base, sixty)
	}
	return value, nil
}

// parsePyFloat is Python's float(arg) on a string without underscores:
// surrounding whitespace, a sign, decimal digits (Unicode ones too) with an
// optional point and exponent, or inf, infinity, nan in any case.
func parsePyFloat(arg string) (float64, *Error) {
	bad := func() (float64, *Error) {
		return 0, valueError("could not convert string to float: " + pyRepr(arg))
	}
	s := pyTrimSpace(arg)
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			var b strings.Builder
			for _, r := range s {
				if r >= utf8.RuneSelf {
					d := digitVal(r)
					if d < 0 || d > 9 {
						return bad()
					}
					r = rune('0' + d)
				}
				b.WriteRune(r)
			}
			s = b.String()
			break
		}
	}
	body := s
	neg := false
	if body != "" && (body[0] == '-' || body[0] == '+') {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if neg {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	case "nan":
		return math.NaN(), nil
	}
	// digits [. digits] | . digits, then optional e[sign]digits.
	i, mant := 0, 0
	for i < len(body) && isDigit(body[i]) {
		i++
		mant++
	}
	if i < len(body) && body[i] == '.' {
		i++
		for i < len(body) && isDigit(body[i]) {
			i++
			mant++
		}
	}
	if mant == 0 {
		return bad()
	}
	if i < len(body) && (body[i] == 'e' || body[i] == 'E') {
		i++
		if i < len(body) && (body[i] == '-' || body[i] == '+') {
			i++
		}
		exp := 0
		for i < len(body) && isDigit(body[i]) {
			i++
			exp++
		}
		if exp == 0 {
			return bad()
		}
	}
	if i != len(body) {
		return bad()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return bad()
		}
	}
	return f, nil
}

// constructBinary is SafeConstructor.construct_yaml_binary: the text must
// be ASCII and is decoded like Python's base64.decodebytes (binascii's
// non-strict a2b_base64: characters outside the alphabet are skipped and a
// complete pad ends the data).
func constructBinary(text string) (string, *Error) {
	if e := asciiEncodeError(text); e != "" {
		return "", &Error{Msg: "failed to convert base64 data into ascii: " + e}
	}
	out := make([]byte, 0, len(text)*3/4)
	quad, pads := 0, 0
	var left byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '=' {
			if quad >= 2 {
				pads++
				if quad+pads >= 4 {
					return string(out), nil
				}
			}
			continue
		}
		v := base64Val(c)
		if v < 0 {
			continue
		}
		pads = 0
		b := byte(v)
		switch quad {
		case 0:
			left = b
		case 1:
			out = append(out, left<<2|b>>4)
			left = b & 0x0f
		case 2:
			out = append(out, left<<4|b>>2)
			left = b & 0x03
		case 3:
			out = append(out, left<<6|b)
			left = 0
		}
		quad = (quad + 1) % 4
	}
	switch quad {
	case 0:
		return string(out), nil
	case 1:
		return "", &Error{Msg: fmt.Sprintf("failed to decode base64 data: Invalid base64-encoded string: number of data characters (%d) cannot be 1 more than a multiple of 4", len(out)/3*4+1)}
	}
	return "", &Error{Msg: "failed to decode base64 data: Incorrect padding"}
}

// asciiEncodeError is the message of the UnicodeEncodeError Python's
// str.encode("ascii") raises for text, or "" when text is ASCII.
func asciiEncodeError(text string) string {
	start, end, pos := -1, -1, 0
	var first rune
	for _, r := range text {
		if r >= utf8.RuneSelf {
			if start < 0 {
				start, first = pos, r
			}
			end = pos
		} else if start >= 0 {
			break
		}
		pos++
	}
	if start < 0 {
		return ""
	}
	what := fmt.Sprintf("characters in position %d-%d", start, end)
	if start == end {
		esc := fmt.Sprintf(`\U%08x`, first)
		switch {
		case first < 0x100:
			esc = fmt.Sprintf(`\x%02x`, first)
		case first < 0x10000:
			esc = fmt.Sprintf(`\u%04x`, first)
		}
		what = fmt.Sprintf("character '%s' in position %d", esc, start)
	}
	return "'ascii' codec can't encode " + what + ": ordinal not in range(128)"
}

func base64Val(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '+':
		return 62
	case c == '/':
		return 63
	}
	return -1
}

// pyRepr is Python's repr() of a str.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r == ' ' || (r != 0xa0 && unicode.IsPrint(r)):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyBytesRepr is Python's repr() of a bytes object.
func pyBytesRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// PyRepr spells a string as Python's repr() does, the form Salt's messages
// and Jinja's printing of containers use.
func PyRepr(s string) string { return pyRepr(s) }

// PyBytesRepr spells bytes as Python's repr() does (b'...').
func PyBytesRepr(s string) string { return pyBytesRepr(s) }
