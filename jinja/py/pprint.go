package py

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/reactord/reactord/internal/yaml11"
)

// pprintWidth is pprint.pformat's default width.
const pprintWidth = 80

// pyPprint is Jinja's pprint filter: Python's pprint.pformat(v), with its
// defaults (width 80, indent 1, dict keys sorted). A value whose sorted
// repr fits the width prints as that repr; a longer dict, list or tuple
// puts one item a line, and a longer string is split into adjacent
// literals at spaces, as pformat does.
// A map or list that fits on one line is printed as its sorted repr, which
// Salt's loader reads back as the structure when it stands as a whole
// value (Printed).
func pyPprint(v any) any {
	var b strings.Builder
	(&pprinter{}).format(&b, v, 0, 0, 1)
	text := b.String()
	if _, isText := pyValue(v).(Printed); isText && !strings.Contains(text, "\n") {
		return Printed{v: v, text: text}
	}
	return text
}

// pprinter mirrors PrettyPrinter._format for the values an event holds.
type pprinter struct{}

// sortedRepr is the repr pformat measures: dict keys sorted, at every
// depth.
func sortedRepr(v any) string {
	if d, ok := AsDict(v); ok {
		keys := slices.Clone(d.Keys)
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			e, _ := d.Get(k)
			parts[i] = yaml11.PyRepr(k) + ": " + sortedRepr(e)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if items, tuple, ok := AsList(v); ok {
		parts := make([]string, len(items))
		for i, e := range items {
			parts[i] = sortedRepr(e)
		}
		if tuple {
			if len(items) == 1 {
				return "(" + parts[0] + ",)"
			}
			return "(" + strings.Join(parts, ", ") + ")"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return reprOf(v)
}

func runes(s string) int { return utf8.RuneCountInString(s) }

func (p *pprinter) format(b *strings.Builder, v any, indent, allowance, level int) {
	rep := sortedRepr(v)
	if runes(rep) <= pprintWidth-indent-allowance {
		b.WriteString(rep)
		return
	}
	if d, ok := AsDict(v); ok && len(d.Keys) > 0 {
		keys := slices.Clone(d.Keys)
		slices.Sort(keys)
		b.WriteByte('{')
		in := indent + 1
		for i, k := range keys {
			last := i == len(keys)-1
			kr := yaml11.PyRepr(k)
			b.WriteString(kr + ": ")
			e, _ := d.Get(k)
			p.format(b, e, in+runes(kr)+2, pick(last, allowance+1, 1), level+1)
			if !last {
				b.WriteString(",\n" + strings.Repeat(" ", in))
			}
		}
		b.WriteByte('}')
		return
	}
	if items, tuple, ok := AsList(v); ok && len(items) > 0 {
		open, end := "[", "]"
		if tuple {
			open, end = "(", ")"
			if len(items) == 1 {
				end = ",)"
			}
		}
		b.WriteString(open)
		in := indent + 1
		for i, e := range items {
			last := i == len(items)-1
			p.format(b, e, in, pick(last, allowance+runes(end), 1), level+1)
			if !last {
				b.WriteString(",\n" + strings.Repeat(" ", in))
			}
		}
		b.WriteString(end)
		return
	}
	if s, ok := AsString(v); ok && s != "" {
		p.str(b, s, indent, allowance, level)
		return
	}
	b.WriteString(rep)
}

// pick is allowance if last, else other.
func pick(last bool, allowance, other int) int {
	if last {
		return allowance
	}
	return other
}

var wordsAndSpaces = regexp.MustCompile(`\S*\s*`)

// str is PrettyPrinter._pprint_str: a long string as adjacent literals,
// split after whitespace, in parentheses at the top level.
func (p *pprinter) str(b *strings.Builder, s string, indent, allowance, level int) {
	if level == 1 {
		indent++
		allowance++
	}
	maxWidth := pprintWidth - indent
	lines := splitLinesKeep(s)
	var chunks []string
	for i, line := range lines {
		width1 := maxWidth
		if i == len(lines)-1 {
			width1 -= allowance
		}
		if rep := yaml11.PyRepr(line); runes(rep) <= width1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := wordsAndSpaces.FindAllString(line, -1)
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		width2, current := maxWidth, ""
		for j, part := range parts {
			candidate := current + part
			if j == len(parts)-1 && i == len(lines)-1 {
				width2 -= allowance
			}
			if runes(yaml11.PyRepr(candidate)) > width2 {
				if current != "" {
					chunks = append(chunks, yaml11.PyRepr(current))
				}
				current = part
			} else {
				current = candidate
			}
		}
		if current != "" {
			chunks = append(chunks, yaml11.PyRepr(current))
		}
	}
	if len(chunks) == 1 {
		b.WriteString(yaml11.PyRepr(s))
		return
	}
	if level == 1 {
		b.WriteByte('(')
	}
	b.WriteString(strings.Join(chunks, "\n"+strings.Repeat(" ", indent)))
	if level == 1 {
		b.WriteByte(')')
	}
}

// splitLinesKeep is Python's str.splitlines(True) for \n, \r\n and \r.
func splitLinesKeep(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		j := i + 1
		if s[i] == '\r' && j < len(s) && s[j] == '\n' {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}
