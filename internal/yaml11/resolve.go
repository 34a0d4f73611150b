package yaml11

import (
	"strconv"
	"strings"
)

// Long forms of the tags that PyYAML's SafeLoader knows about.
const (
	// TagNull is the tag of null scalars.
	TagNull = "tag:yaml.org,2002:null"
	// TagBool is the tag of boolean scalars.
	TagBool = "tag:yaml.org,2002:bool"
	// TagInt is the tag of integer scalars.
	TagInt = "tag:yaml.org,2002:int"
	// TagFloat is the tag of floating point scalars.
	TagFloat = "tag:yaml.org,2002:float"
	// TagStr is the tag of string scalars.
	TagStr = "tag:yaml.org,2002:str"
	// TagTimestamp is the tag of timestamps; Salt builds them as strings.
	TagTimestamp = "tag:yaml.org,2002:timestamp"
	// TagBinary is the tag of base64 encoded binary scalars.
	TagBinary = "tag:yaml.org,2002:binary"
	// TagMerge is the tag of the `<<` merge key.
	TagMerge = "tag:yaml.org,2002:merge"
	// TagValue is the tag of the `=` value key; as a mapping key Salt
	// turns it into the string "=", anywhere else it cannot be built.
	TagValue = "tag:yaml.org,2002:value"
	// TagYAML is the tag PyYAML gives the texts "!", "&" and "*"; nothing
	// can build it.
	TagYAML = "tag:yaml.org,2002:yaml"
	// TagMap is the tag of mappings.
	TagMap = "tag:yaml.org,2002:map"
	// TagOmap is the tag of ordered mappings; Salt builds a `!!omap`
	// mapping like any other mapping.
	TagOmap = "tag:yaml.org,2002:omap"
	// TagSeq is the tag of sequences.
	TagSeq = "tag:yaml.org,2002:seq"
	// TagPythonUnicode is the PyYAML tag `!!python/unicode`, which Salt
	// builds as a string.
	TagPythonUnicode = "tag:yaml.org,2002:python/unicode"
)

// kind is the outcome of implicit resolution.
type kind uint8

const (
	kStr kind = iota
	kNull
	kBool
	kInt
	kFloat
	kTimestamp
	kMerge
	kValue
	kYAML
)

var kindTags = [...]string{
	kStr:       TagStr,
	kNull:      TagNull,
	kBool:      TagBool,
	kInt:       TagInt,
	kFloat:     TagFloat,
	kTimestamp: TagTimestamp,
	kMerge:     TagMerge,
	kValue:     TagValue,
	kYAML:      TagYAML,
}

// firstByte tells which implicit resolvers PyYAML registers for a first
// character (Resolver.yaml_implicit_resolvers is keyed by it). Texts whose
// first byte maps to fNone are always strings.
const (
	fNone = iota
	fNullBool
	fBool
	fNumber
	fDot
	fMerge
	fValue
	fYAML
)

var firstByte = func() (t [256]uint8) {
	for _, c := range "nN~" {
		t[c] = fNullBool
	}
	for _, c := range "yYtTfFoO" {
		t[c] = fBool
	}
	for _, c := range "-+0123456789" {
		t[c] = fNumber
	}
	t['.'] = fDot
	t['<'] = fMerge
	t['='] = fValue
	t['!'] = fYAML
	t['&'] = fYAML
	t['*'] = fYAML
	return t
}()

// Resolve returns the value Salt's loader builds for a plain (unquoted,
// untagged) scalar whose text is text, following PyYAML's YAML 1.1 implicit
// resolvers and constructors with Salt's overrides:
//
//   - nil for the empty text, `~`, `null`, `Null`, `NULL`;
//   - bool for yes/no/true/false/on/off in lower, Capitalized or UPPER case
//     (not `y`, `n`);
//   - int64, or *big.Int when it does not fit, for 0b binary, 0x hex,
//     decimal, sexagesimal (`1:30` is 90) and signed octal (`-010` is -8)
//     integers; underscores are ignored and an unsigned leading zero does not
//     make octal in Salt (`010` is 10, see SaltYamlSafeLoader.construct_scalar);
//   - float64 for `1.5`, `1.`, `.5`, `1.0e+3` (the exponent needs a sign:
//     `1e3` is a string), `1:30.5`, `.inf`, `-.inf`, `.nan`;
//   - the text itself otherwise, timestamps such as `2024-01-15` included.
//
// For the few texts the resolvers claim but the constructors reject, Resolve
// returns an *Error (with no position) whose Msg is what the loader raises:
// `<<` and `=` (merge and value tags, which only mean something as mapping
// keys), `0_`, `0b_`, `0x_` and a few more. Check for an error with a type
// switch or `v.(error)`.
//
// As in Python's re, a single trailing "\n" does not stop a resolver from
// matching, though a plain scalar never ends with one.
//
// Resolve is inlined, so when the result is the text itself the string is
// boxed in the caller's frame: nothing is allocated unless the caller lets
// the result escape to the heap (a type switch on it does not).
func Resolve(text string) any {
	if v, ok := resolveNonString(text); ok {
		return v
	}
	return text
}

// ImplicitTag returns the tag PyYAML's resolver gives a plain scalar with
// this text: one of TagNull, TagBool, TagInt, TagFloat, TagTimestamp,
// TagMerge, TagValue, TagYAML or TagStr.
func ImplicitTag(text string) string {
	return kindTags[classify(text, true)]
}

// resolveNonString does the work of Resolve; ok is false when the value is
// the text itself, so that Resolve (which inlines) boxes the string in its
// caller's frame, where it need not escape to the heap.
func resolveNonString(text string) (any, bool) {
	if text != "" && firstByte[text[0]] == fNone {
		return nil, false
	}
	if n, ok := smallDecimal(text); ok {
		return n, true
	}
	k := classify(text, false)
	if k == kStr {
		return nil, false
	}
	v, err := constructImplicit(k, text)
	if err != nil {
		return err, true
	}
	return v, true
}

// smallDecimal is the fast path for the commonest numbers: "0", or up to
// 18 ASCII digits with no leading zero, which the int resolver matches and
// construct_yaml_int parses as plain decimal.
func smallDecimal(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// constructImplicit builds the value of an implicitly resolved scalar.
func constructImplicit(k kind, text string) (any, *Error) {
	switch k {
	case kNull:
		return nil, nil
	case kBool:
		b, err := constructBool(text)
		if err != nil {
			return nil, err
		}
		return b, nil
	case kInt:
		return constructInt(text)
	case kFloat:
		if simpleFloat(text) {
			// What construct_yaml_float computes, without the detour.
			f, _ := strconv.ParseFloat(text, 64)
			return f, nil
		}
		f, _, err := constructFloat(text)
		if err != nil {
			return nil, err
		}
		return f, nil
	case kTimestamp, kStr:
		return text, nil
	default:
		return nil, noConstructor(kindTags[k])
	}
}

// simpleFloat reports whether a text the float resolver matched is made
// of digits, '.', signs and 'e' only: no underscore, sexagesimal, inf, nan,
// nor a trailing newline, so strconv.ParseFloat reads it as Python would.
func simpleFloat(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '.', c == '-', c == '+', c == 'e', c == 'E':
		default:
			return false
		}
	}
	return true
}

// noConstructor is SafeConstructor.construct_undefined's error.
func noConstructor(tag string) *Error {
	return &Error{Msg: "could not determine a constructor for the tag " + pyRepr(tag)}
}

// classify is PyYAML's Resolver.resolve for a plain scalar. The resolvers
// tried are the ones registered for the first character, in registration
// order (bool, float, int, merge, null, timestamp, value, yaml); the
// timestamp resolver is only run when withTimestamp is set because Salt
// builds timestamps as strings anyway.
func classify(text string, withTimestamp bool) kind {
	if text == "" {
		return kNull
	}
	c := text[0]
	f := firstByte[c]
	if f == fNone {
		return kStr
	}
	// Python's `$` also matches before one final newline.
	body := text
	if body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
	}
	switch f {
	case fNullBool:
		if isBoolWord(body) {
			return kBool
		}
		switch body {
		case "~", "null", "Null", "NULL":
			return kNull
		}
	case fBool:
		if isBoolWord(body) {
			return kBool
		}
	case fNumber:
		if matchFloat(body) {
			return kFloat
		}
		if matchInt(body) {
			return kInt
		}
		if withTimestamp && c >= '0' && c <= '9' && matchTimestamp(body) {
			return kTimestamp
		}
	case fDot:
		if matchFloat(body) {
			return kFloat
		}
	case fMerge:
		if body == "<<" {
			return kMerge
		}
	case fValue:
		if body == "=" {
			return kValue
		}
	case fYAML:
		if len(body) == 1 {
			return kYAML
		}
	}
	return kStr
}

// isBoolWord matches yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|
// on|On|ON|off|Off|OFF.
func isBoolWord(s string) bool {
	switch s {
	case "yes", "Yes", "YES", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF":
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipDigitsUnderscore returns the index of the first byte at or after i
// that is neither a digit nor '_'.
func skipDigitsUnderscore(s string, i int) int {
	for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
		i++
	}
	return i
}

// skipSexagesimal matches (?::[0-5]?[0-9])+ at i and returns the index after
// it, or -1 when there is no such group. Each group is ':' and one digit, or
// two digits the first of which is 0-5; what follows a group is never a
// digit, so the longest digit run decides.
func skipSexagesimal(s string, i int) int {
	n := 0
	for i < len(s) && s[i] == ':' {
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		switch j - (i + 1) {
		case 1:
		case 2:
			if s[i+1] > '5' {
				return -1
			}
		default:
			return -1
		}
		i = j
		n++
	}
	if n == 0 {
		return -1
	}
	return i
}

// matchInt is PyYAML's int resolver:
//
//	[-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*)
//	| [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
func matchInt(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
		if i == len(s) {
			return true
		}
		switch s[i] {
		case 'b':
			i++
			if i == len(s) {
				return false
			}
			for ; i < len(s); i++ {
				if c := s[i]; c != '0' && c != '1' && c != '_' {
					return false
				}
			}
			return true
		case 'x':
			i++
			if i == len(s) {
				return false
			}
			for ; i < len(s); i++ {
				c := s[i]
				if !isDigit(c) && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') && c != '_' {
					return false
				}
			}
			return true
		}
		for ; i < len(s); i++ {
			if c := s[i]; (c < '0' || c > '7') && c != '_' {
				return false
			}
		}
		return true
	}
	if s[i] < '1' || s[i] > '9' {
		return false
	}
	i = skipDigitsUnderscore(s, i+1)
	if i == len(s) {
		return true
	}
	return skipSexagesimal(s, i) == len(s)
}

// matchFloat is PyYAML's float resolver:
//
//	[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
//	| \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
//	| [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
//	| [-+]?\.(?:inf|Inf|INF)
//	| \.(?:nan|NaN|NAN)
func matchFloat(s string) bool {
	i := 0
	signed := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
		signed = true
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '.' {
		switch rest := s[i+1:]; rest {
		case "inf", "Inf", "INF":
			return true
		case "nan", "NaN", "NAN":
			return !signed
		}
		if signed || i+1 >= len(s) || !isDigit(s[i+1]) {
			return false
		}
		return matchExponent(s, skipDigitsUnderscore(s, i+2))
	}
	if !isDigit(s[i]) {
		return false
	}
	i = skipDigitsUnderscore(s, i+1)
	if i == len(s) {
		return false
	}
	if s[i] == '.' {
		return matchExponent(s, skipDigitsUnderscore(s, i+1))
	}
	if s[i] != ':' {
		return false
	}
	i = skipSexagesimal(s, i)
	if i < 0 || i == len(s) || s[i] != '.' {
		return false
	}
	return skipDigitsUnderscore(s, i+1) == len(s)
}

// matchExponent matches (?:[eE][-+][0-9]+)?$ at i.
func matchExponent(s string, i int) bool {
	if i == len(s) {
		return true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return false
	}
	i++
	if i == len(s) || (s[i] != '-' && s[i] != '+') {
		return false
	}
	i++
	if i == len(s) {
		return false
	}
	for ; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// matchTimestamp is PyYAML's timestamp resolver:
//
//	[0-9]{4}-[0-9]{2}-[0-9]{2}
//	| [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}
//	  (?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?
func matchTimestamp(s string) bool {
	digits := func(i, min, max int) int {
		j := i
		for j < len(s) && j-i < max && isDigit(s[j]) {
			j++
		}
		if j-i < min {
			return -1
		}
		return j
	}
	i := digits(0, 4, 4)
	if i < 0 || i == len(s) || s[i] != '-' {
		return false
	}
	i = digits(i+1, 1, 2)
	if i < 0 || i == len(s) || s[i] != '-' {
		return false
	}
	dayStart := i + 1
	i = digits(dayStart, 1, 2)
	if i < 0 {
		return false
	}
	if i == len(s) {
		return i == 10 && dayStart == 8
	}
	switch s[i] {
	case 'T', 't':
		i++
	case ' ', '\t':
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	default:
		return false
	}
	if i = digits(i, 1, 2); i < 0 || i == len(s) || s[i] != ':' {
		return false
	}
	if i = digits(i+1, 2, 2); i < 0 || i == len(s) || s[i] != ':' {
		return false
	}
	if i = digits(i+1, 2, 2); i < 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i == len(s) {
		return true
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return false
	}
	if s[i] == 'Z' {
		return i+1 == len(s)
	}
	if s[i] != '-' && s[i] != '+' {
		return false
	}
	if i = digits(i+1, 1, 2); i < 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != ':' {
		return false
	}
	i = digits(i+1, 2, 2)
	return i == len(s)
}

// trimLeftZeros is Python's str.lstrip("0").
func trimLeftZeros(s string) string {
	return strings.TrimLeft(s, "0")
}
