package yaml11

import (
	"strings"
	"unicode/utf8"
)

// PlainSafe reports whether s, written verbatim as a plain scalar value
// (after "key: " or "- " in block context, or as an item of a flow
// collection), reads back as exactly one plain scalar whose text is s, so
// that Resolve(s) is what Salt gets. The empty string is safe: it reads
// back as an empty plain scalar, which Resolve (and Salt) types as null.
//
// PlainSafe is syntactic only: "yes", "010" or "<<" are plain-safe, yet
// Salt will not read them as strings; check Resolve(s) for the type.
//
// It is conservative (false negatives only cost quoting). It rejects:
// invalid UTF-8; characters YAML does not allow unescaped (control
// characters other than tab, DEL, C1 controls, U+FEFF, U+FFFE, U+FFFF);
// line breaks (CR, LF, NEL U+0085, LS U+2028, PS U+2029); leading or
// trailing blanks; a first character that is an indicator
// (-?:,[]{}#&*!|>'"%@ and backquote), except "-" followed by a non-blank;
// the document markers "---" and "..." at the start; a ':' next to a blank
// or at the end; " #" or tab + "#"; any flow indicator , [ ] { }; and any
// '?' (go.yaml.in/yaml/v3 ends a plain scalar at '?' in flow context, so
// URLs with a query string need quoting).
func PlainSafe(s string) bool {
	if s == "" {
		return true
	}
	switch s[0] {
	case '-':
		if len(s) == 1 || s[1] == ' ' || s[1] == '\t' || strings.HasPrefix(s, "---") {
			return false
		}
	case '.':
		if strings.HasPrefix(s, "...") {
			return false
		}
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ', '\t':
		return false
	}
	switch s[len(s)-1] {
	case ' ', '\t', ':':
		return false
	}
	prev := rune(-1)
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			// Invalid UTF-8 (a literal U+FFFD is also refused: harmless).
			return false
		case r < 0x20 && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
			return false
		case r == ',' || r == '[' || r == ']' || r == '{' || r == '}' || r == '?':
			// Flow indicators; go.yaml.in/yaml/v3 also ends a plain
			// scalar at '?' in flow context.
			return false
		case r == '#':
			if prev == ' ' || prev == '\t' {
				return false
			}
		case r == ':':
			// ": " is a value indicator; in flow context so is a ':'
			// starting a token.
			if i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\t') || prev == ' ' || prev == '\t' {
				return false
			}
		}
		prev = r
	}
	return true
}
