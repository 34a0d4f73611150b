package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON decoder specialised for event envelopes. It
// finds the tag without decoding the data, and decodes data in one pass
// straight into reactord's value forms (map[string]any, []any, string,
// bool, nil, int64, float64, json.Number for integers beyond int64), which
// encoding/json cannot do without a second pass over its output. Strings
// with escapes are handed to encoding/json, so escape handling is exactly
// the standard library's. FuzzDecoderMatchesStdlib checks it against
// encoding/json.

var errSyntax = errors.New("invalid JSON")

// ErrInvalidUTF8 reports a string in an event (its tag, a key or a value)
// that is not valid UTF-8: raw bytes that are not UTF-8, or an escaped
// lone surrogate such as "\udc80". Such an event is malformed: decoding
// would replace the bytes with U+FFFD and a rule could match the result.
// A lone surrogate escape is refused as well because it is how Python's
// json module writes a byte it could not decode (surrogateescape), the
// same defect spelled differently; escaped surrogate pairs and an escaped
// U+FFFD are valid.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

// stringEnd returns the index after the closing quote of the string that
// starts at s.i, and whether it contains escapes or non-ASCII bytes.
func (s *scanner) stringEnd() (end int, plain bool, err error) {
	plain = true
	i := s.i + 1
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			return i + 1, plain, nil
		case c == '\\':
			plain = false
			i += 2
			continue
		case c < 0x20:
			return 0, false, s.errorf("control character in string")
		case c >= 0x80:
			plain = false
		}
		i++
	}
	return 0, false, s.errorf("unterminated string")
}

func (s *scanner) str() (string, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", s.errorf("expected a string")
	}
	end, plain, err := s.stringEnd()
	if err != nil {
		return "", err
	}
	raw := s.b[s.i:end]
	if plain {
		s.i = end
		return string(raw[1 : len(raw)-1]), nil
	}
	if err := s.checkString(raw); err != nil {
		return "", err
	}
	s.i = end
	if !hasEscape(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", err
	}
	return out, nil
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// skip moves past one value, validating it without building it.
func (s *scanner) skip() error { return s.skipValue(0) }

func (s *scanner) skipValue(depth int) error {
	if depth > maxDepth {
		return s.errorf("nesting too deep")
	}
	s.ws()
	if s.i >= len(s.b) {
		return s.errorf("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		end, plain, err := s.stringEnd()
		if err != nil {
			return err
		}
		if !plain {
			if err := s.checkString(s.b[s.i:end]); err != nil {
				return err
			}
		}
		s.i = end
		return nil
	case c == '{' || c == '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == closing {
			s.i++
			return nil
		}
		for {
			if c == '{' {
				s.ws()
				if s.i >= len(s.b) || s.b[s.i] != '"' {
					return s.errorf("expected a string")
				}
				if err := s.skipValue(depth + 1); err != nil {
					return err
				}
				s.ws()
				if s.i >= len(s.b) || s.b[s.i] != ':' {
					return s.errorf("expected ':'")
				}
				s.i++
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				return s.errorf("unterminated value")
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == closing {
				s.i++
				return nil
			}
			return s.errorf("expected ',' or %q", closing)
		}
	}
	_, err := s.value(depth)
	return err
}

// checkString checks a raw JSON string (quotes included) that has escapes
// or non-ASCII bytes: its escapes are valid, its bytes are UTF-8 and no
// escape is a lone surrogate (ErrInvalidUTF8). The error's offset is the
// string's.
func (s *scanner) checkString(raw []byte) error {
	if !utf8.Valid(raw) {
		return fmt.Errorf("offset %d: %w in a string", s.i, ErrInvalidUTF8)
	}
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			r, ok := hex4(raw, i+1)
			if !ok {
				return s.errorf("invalid escape in string")
			}
			i += 4
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00:
				// A high surrogate needs a low one right after it.
				if lo, ok := hex4(raw, i+3); ok && raw[i+1] == '\\' && raw[i+2] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
				fallthrough
			case utf16.IsSurrogate(r):
				return fmt.Errorf("offset %d: %w in a string: lone surrogate escape \\u%04x", s.i, ErrInvalidUTF8, r)
			}
		default:
			return s.errorf("invalid escape in string")
		}
	}
	return nil
}

// hex4 decodes the four hex digits at raw[i:], which must end before the
// closing quote.
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 >= len(raw) {
		return 0, false
	}
	var r rune
	for _, h := range raw[i : i+4] {
		switch {
		case '0' <= h && h <= '9':
			r = r<<4 | rune(h-'0')
		case 'a' <= h && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case 'A' <= h && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

const maxDepth = 10000

func (s *scanner) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, s.errorf("nesting too deep")
	}
	s.ws()
	if s.i >= len(s.b) {
		return nil, s.errorf("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		m := make(map[string]any, 8)
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return m, nil
		}
		for {
			s.ws()
			k, err := s.str()
			if err != nil {
				return nil, err
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return nil, s.errorf("expected ':'")
			}
			s.i++
			v, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
			s.ws()
			if s.i >= len(s.b) {
				return nil, s.errorf("unterminated object")
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == '}' {
				s.i++
				return m, nil
			}
			return nil, s.errorf("expected ',' or '}'")
		}
	case c == '[':
		s.i++
		out := []any{}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return out, nil
		}
		for {
			v, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			s.ws()
			if s.i >= len(s.b) {
				return nil, s.errorf("unterminated array")
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == ']' {
				s.i++
				return out, nil
			}
			return nil, s.errorf("expected ',' or ']'")
		}
	case c == '"':
		return s.str()
	case c == 't':
		return s.literal("true", true)
	case c == 'f':
		return s.literal("false", false)
	case c == 'n':
		return s.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return nil, s.errorf("unexpected character %q", s.b[s.i])
}

func (s *scanner) literal(word string, v any) (any, error) {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return nil, s.errorf("invalid literal")
	}
	s.i += len(word)
	return v, nil
}

// MaxIntDigits is the most digits an integer in an event may have: Python
// (and so Salt, whose json.loads and str() raise ValueError past it)
// refuses int↔str conversions beyond 4,300 digits, and converting a
// longer one costs seconds of CPU.
const MaxIntDigits = 4300

// number scans a JSON number with the grammar's exact rules.
func (s *scanner) number() (any, error) {
	start := s.i
	i := s.i
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	if i >= len(s.b) {
		return nil, s.errorf("invalid number")
	}
	switch {
	case s.b[i] == '0':
		i++
	case s.b[i] >= '1' && s.b[i] <= '9':
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
	default:
		return nil, s.errorf("invalid number")
	}
	isInt := true
	if i < len(s.b) && s.b[i] == '.' {
		isInt = false
		i++
		d := i
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, s.errorf("invalid number")
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		isInt = false
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		d := i
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, s.errorf("invalid number")
		}
	}
	s.i = i
	if digits := i - start; isInt && digits > MaxIntDigits {
		if s.b[start] == '-' {
			digits--
		}
		if digits > MaxIntDigits {
			s.i = start
			return nil, s.errorf("an integer of %d digits: over the limit of %d digits for integer string conversion (Python's, so Salt's)", digits, MaxIntDigits)
		}
	}
	text := string(s.b[start:i])
	if isInt {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n, nil
		}
		return json.Number(text), nil
	}
	return Number(text), nil
}

// splitFast is SplitEnvelope's fast path.
func splitFast(line []byte) (tag string, data []byte, err error) {
	s := &scanner{b: line}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return "", nil, errors.New("malformed event: not a JSON object")
	}
	s.i++
	haveTag := false
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
	} else {
		for {
			s.ws()
			k, err := s.str()
			if err != nil {
				return "", nil, fmt.Errorf("malformed event: %w", err)
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return "", nil, fmt.Errorf("malformed event: %w", s.errorf("expected ':'"))
			}
			s.i++
			s.ws()
			start := s.i
			switch k {
			case "tag":
				if s.i >= len(s.b) || s.b[s.i] != '"' {
					return "", nil, errors.New("malformed event: tag is not a string")
				}
				tag, err = s.str()
				haveTag = true
			default:
				err = s.skip()
				if k == "data" {
					data = s.b[start:s.i]
				}
			}
			if err != nil {
				return "", nil, fmt.Errorf("malformed event: member %q: %w", k, err)
			}
			s.ws()
			if s.i >= len(s.b) {
				return "", nil, errors.New("malformed event: unterminated object")
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == '}' {
				s.i++
				break
			}
			return "", nil, fmt.Errorf("malformed event: %w", s.errorf("expected ',' or '}'"))
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return "", nil, errors.New("malformed event: trailing bytes after the object")
	}
	if !haveTag || tag == "" {
		return "", nil, ErrNoTag
	}
	return tag, data, nil
}

// decodeFast is DecodeData's fast path.
func decodeFast(raw []byte) (map[string]any, error) {
	s := &scanner{b: raw}
	v, err := s.value(0)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, errors.New("data: trailing bytes after the object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("data is a %s, Salt requires a dictionary", jsonKindFast(v))
	}
	return m, nil
}

func jsonKindFast(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case int64, float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "value"
}
