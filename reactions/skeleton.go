package reactions

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/yaml11"
	"github.com/reactord/reactord/jinja/py"
)

// A skeleton is the YAML structure of one rendered reaction file with
// placeholders where the template printed values. Its shape is fixed before
// any event value is looked at, so no value can add, remove or move a key,
// list item or reaction: each value can only fill the scalar it stands in.
// Skeletons are cached by their text, so the YAML parser runs once per
// distinct shape rather than once per event.
type skeleton struct {
	root *pnode // nil for an empty document
}

type pkind uint8

const (
	pScalar pkind = iota
	pMap
	pSeq
)

// maxNodes bounds the size of a rendered document after alias expansion.
const maxNodes = 200000

// pnode is one node of a skeleton.
type pnode struct {
	kind  pkind
	style yaml11.Style
	// Block scalars: chomping indicator and explicit indentation.
	chomp, indent byte
	// A plain scalar item of a flow sequence, and whether it is the last.
	flowItem, lastItem bool
	// Block scalars: the indentation of the content lines (0: unknown or
	// beyond 255), stripped from a printed value's later lines as Salt's
	// loader strips it from the pasted text.
	bindent   byte
	line, col int

	// Scalars without placeholders carry their final value.
	constant any
	// Scalars with placeholders: parts[0] ref[0] parts[1] ... parts[n].
	parts []string
	refs  []int
	tag   string

	content []*pnode // mapping: key, value, key, value...; sequence: items
}

func (n *pnode) fromData() bool { return len(n.refs) > 0 }

// parseSkeleton parses rendered text into a skeleton.
func parseSkeleton(text []byte) (*skeleton, error) {
	root, err := yaml11.Parse(text)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return &skeleton{}, nil
	}
	if !root.WithinSize(maxNodes) {
		return nil, &yaml11.Error{Line: 1, Column: 1, Msg: fmt.Sprintf("the rendered document has more than %d nodes once its aliases are expanded", maxNodes)}
	}
	p, err := buildPlan(root)
	if err != nil {
		return nil, err
	}
	return &skeleton{root: p}, nil
}

func buildPlan(n *yaml11.Node) (*pnode, error) {
	p := &pnode{line: n.Line, col: n.Column}
	switch n.Kind {
	case yaml11.MappingNode:
		p.kind = pMap
	case yaml11.SequenceNode:
		p.kind = pSeq
	default:
		p.kind = pScalar
		p.style, p.tag = n.Style, n.Tag
		p.chomp, p.indent = n.Chomp, byte(n.Indent)
		if n.ContentIndent > 0 && n.ContentIndent < 256 {
			p.bindent = byte(n.ContentIndent)
		}
		parts, refs := splitPlaceholders(n.Text)
		if len(refs) == 0 {
			v, err := scalarValue(n.Text, n.Style, n.Tag)
			if err != nil {
				return nil, &yaml11.Error{Line: n.Line, Column: n.Column, Msg: err.Error()}
			}
			p.constant = v
			return p, nil
		}
		p.parts, p.refs = parts, refs
		return p, nil
	}
	p.content = make([]*pnode, len(n.Content))
	for i, c := range n.Content {
		cp, err := buildPlan(c)
		if err != nil {
			return nil, err
		}
		p.content[i] = cp
		if n.Kind == yaml11.SequenceNode && n.Style == yaml11.Flow && cp.kind == pScalar && cp.style == yaml11.Plain && cp.tag == "" {
			cp.flowItem, cp.lastItem = true, i == len(n.Content)-1
		}
	}
	return p, nil
}

// splitPlaceholders cuts s at every placeholder.
func splitPlaceholders(s string) (parts []string, refs []int) {
	if !strings.Contains(s, sentinel) {
		return nil, nil
	}
	for {
		i := strings.Index(s, sentinel)
		if i < 0 {
			break
		}
		j := i + len(sentinel)
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j || k >= len(s) || s[k] != '_' {
			// Not a well-formed placeholder: keep it as text.
			parts = appendPart(parts, refs, s[:j])
			s = s[j:]
			continue
		}
		idx, _ := strconv.Atoi(s[j:k])
		parts = appendPart(parts, refs, s[:i])
		refs = append(refs, idx)
		s = s[k+1:]
	}
	parts = appendPart(parts, refs, s)
	return parts, refs
}

// appendPart adds text to the part that follows the last placeholder.
func appendPart(parts []string, refs []int, s string) []string {
	if len(parts) == len(refs)+1 {
		parts[len(parts)-1] += s
		return parts
	}
	return append(parts, s)
}

const (
	tagStr   = "tag:yaml.org,2002:str"
	tagInt   = "tag:yaml.org,2002:int"
	tagFloat = "tag:yaml.org,2002:float"
	tagBool  = "tag:yaml.org,2002:bool"
	tagNull  = "tag:yaml.org,2002:null"
	tagBin   = "tag:yaml.org,2002:binary"
	tagTime  = "tag:yaml.org,2002:timestamp"
)

// resolve types a plain scalar; texts Salt's loader fails on are errors.
func resolve(text string) (any, error) {
	v := yaml11.Resolve(text)
	if err, ok := v.(error); ok {
		return nil, err
	}
	return v, nil
}

// scalarValue types a scalar as Salt's YAML loader does.
func scalarValue(text string, style yaml11.Style, tag string) (any, error) {
	switch tag {
	case "":
		if style == yaml11.Plain {
			return resolve(text)
		}
		return text, nil
	case "!":
		return resolve(text)
	case tagBin:
		dec, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
		if err != nil {
			return nil, fmt.Errorf("failed to decode base64 data: %v", err)
		}
		return py.Bytes(dec), nil
	case tagStr, tagTime:
		return text, nil
	case tagInt, tagFloat, tagBool, tagNull:
		v, err := resolve(text)
		if err != nil {
			return nil, err
		}
		ok := false
		switch v.(type) {
		case int64, *big.Int:
			ok = tag == tagInt
			if tag == tagFloat {
				f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
				return f, nil
			}
		case float64:
			ok = tag == tagFloat
		case bool:
			ok = tag == tagBool
		case nil:
			ok = tag == tagNull
		}
		if !ok {
			return nil, fmt.Errorf("cannot construct %s from %q", strings.TrimPrefix(tag, "tag:yaml.org,2002:"), text)
		}
		return v, nil
	}
	return nil, fmt.Errorf("could not determine a constructor for the tag %q", tag)
}

// key is a mapping key after typing, with what is needed to compare keys as
// Python compares dictionary keys (1 == 1.0 == True).
type key struct {
	v        any
	line     int
	col      int
	fromData bool
}

// entry is one key/value pair of a materialized top-level or body mapping.
type entry struct {
	key   key
	value any
}

// materializer fills a skeleton with the recorded values of one execution.
type materializer struct {
	vals []recorded
	// budget is how many more bytes of printed values may be filled in
	// (limit is the total): YAML aliases can repeat a value many times.
	budget, limit int
	file          string // for the error when the budget runs out
	// targets collects the tgt arguments printed from data of the reaction
	// being materialized (see noteTargets).
	targets []printedTarget
	// reprStructs: a map or list printed raw as a whole plain value becomes
	// the structure Salt's loader reads from its Python repr (files
	// converted from Jinja, File.Translated), instead of the repr's text.
	reprStructs bool
}

// value materializes any node. Mappings become *event.Map with keys spelled
// as Python's json module spells them.
func (m *materializer) value(n *pnode) (any, error) {
	switch n.kind {
	case pScalar:
		return m.scalar(n)
	case pSeq:
		out := make([]any, 0, len(n.content))
		for _, c := range n.content {
			if c.flowItem && m.blank(c) {
				// `[, x]` is no YAML, and `[x, ]` a list of one item: Salt
				// pasting an empty value fails the file, or drops the item.
				if !c.lastItem {
					return nil, &yaml11.Error{Line: c.line, Column: c.col, Msg: "while parsing a flow node, expected the node content, but found ',' (a value printed into a flow sequence is empty)"}
				}
				continue
			}
			v, err := m.value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	entries, err := m.mapping(n)
	if err != nil {
		return nil, err
	}
	out := event.NewMap(len(entries))
	for _, e := range entries {
		out.Set(keyString(e.key.v), e.value)
	}
	return out, nil
}

// mapping materializes a mapping node into typed entries, rejecting
// duplicate keys and structures used as keys, as Salt's loader does.
func (m *materializer) mapping(n *pnode) ([]entry, error) {
	entries := make([]entry, 0, len(n.content)/2)
	var seen keySet
	for i := 0; i+1 < len(n.content); i += 2 {
		kn, vn := n.content[i], n.content[i+1]
		if kn.kind != pScalar {
			return nil, &yaml11.Error{Line: kn.line, Column: kn.col, Msg: "found unhashable key (a mapping or list used as a key, possible double curly-brace)"}
		}
		kv, err := m.scalar(kn)
		if err != nil {
			return nil, err
		}
		switch kv.(type) {
		case []any, *event.Map:
			return nil, &yaml11.Error{Line: kn.line, Column: kn.col, Msg: "found unhashable key (a value printed as a key is a structure, possible double curly-brace)"}
		}
		if seen.add(kv) {
			return nil, &yaml11.Error{Line: kn.line, Column: kn.col, Msg: fmt.Sprintf("found conflicting ID '%s'", py.Str(kv))}
		}
		vv, err := m.value(vn)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{key: key{v: kv, line: kn.line, col: kn.col, fromData: kn.fromData()}, value: vv})
	}
	return entries, nil
}

// spend takes the printed size of value ref from the budget.
func (m *materializer) spend(n *pnode, ref int) error {
	if m.limit <= 0 || ref < 0 || ref >= len(m.vals) {
		return nil
	}
	r := m.vals[ref]
	size := len(r.text)
	if r.kind == rawValue {
		size = printedSize(r.v, m.budget)
	}
	m.budget -= size
	if m.budget < 0 {
		le := &LimitError{What: "Aliases", Limit: m.limit}
		return &PosError{Pos: position.Pos{File: m.file, Line: n.line, Col: max(n.col, 1)}, Msg: le.Error(), Err: le}
	}
	return nil
}

// scalar materializes a scalar node.
func (m *materializer) scalar(n *pnode) (any, error) {
	if !n.fromData() {
		return n.constant, nil
	}
	for _, ref := range n.refs {
		if err := m.spend(n, ref); err != nil {
			return nil, err
		}
	}
	if n.style == yaml11.Plain && n.tag == "" && len(n.refs) == 1 && n.parts[0] == "" && n.parts[1] == "" {
		return m.whole(n.refs[0])
	}
	var b strings.Builder
	block := n.style == yaml11.Literal || n.style == yaml11.Folded
	for i, p := range n.parts {
		b.WriteString(p)
		if i < len(n.refs) {
			t := m.text(n.refs[i])
			if block && n.bindent > 0 {
				t = dedentLines(t, int(n.bindent))
			}
			if block && i == len(n.refs)-1 && strings.TrimFunc(n.parts[i+1], isBreak) == "" {
				// Lines of spaces ending the last value start at column
				// 0 in Salt's text: empty lines of the block.
				t = trimBlankLines(t)
			}
			b.WriteString(t)
		}
	}
	text := b.String()
	switch n.style {
	case yaml11.Plain:
		text = trimPlain(text)
	case yaml11.Literal, yaml11.Folded:
		text = blockText(n, text)
	}
	if n.tag == "" {
		if n.style == yaml11.Plain {
			return typedText(text), nil
		}
		return text, nil
	}
	v, err := scalarValue(text, yaml11.DoubleQuoted, n.tag)
	if err != nil {
		return nil, &yaml11.Error{Line: n.line, Column: n.col, Msg: err.Error()}
	}
	return v, nil
}

// text is the printed form of a recorded value inside a longer scalar.
func (m *materializer) text(ref int) string {
	if ref < 0 || ref >= len(m.vals) {
		return ""
	}
	r := m.vals[ref]
	if r.kind != rawValue {
		return r.text
	}
	return py.Text(r.v)
}

// whole is the value of a plain scalar that is exactly one printed value.
func (m *materializer) whole(ref int) (any, error) {
	if ref < 0 || ref >= len(m.vals) {
		return nil, nil
	}
	r := m.vals[ref]
	switch r.kind {
	case jsonValue:
		if r.enc != encNone {
			if v, ok := jsonAsYAML(r.v, r.enc == encSorted, 0); ok {
				return v, nil
			}
		}
		v, err := decodeOrderedJSON(r.text)
		if err != nil {
			return r.text, nil
		}
		return v, nil
	case quotedValue:
		if s, err := strconv.Unquote(r.text); err == nil {
			return s, nil
		}
		return r.text, nil
	case squoteValue:
		if len(r.text) >= 2 && r.text[0] == '\'' && r.text[len(r.text)-1] == '\'' {
			return r.text[1 : len(r.text)-1], nil
		}
		return r.text, nil
	}
	switch v := r.v.(type) {
	case string:
		return typedText(trimPlain(v)), nil
	case py.Printed:
		if s, ok := reprAsYAML(v.Value()); ok {
			return s, nil
		}
		return py.Text(v.Value()), nil
	case py.YAMLQuoted:
		// yamlDquote/yamlSquote: Salt's loader reads the quoted scalar.
		return v.Value(), nil
	case nil:
		return "None", nil
	case bool, int64:
		return v, nil
	case int:
		return int64(v), nil
	case float64, json.Number:
		// Salt prints the number and YAML types the text: 1e+16 stays a
		// string, 1.5 is a float.
		return typedText(py.Text(v)), nil
	}
	// A map or list printed raw is text, never structure: toJson inserts
	// structured values. In a file converted from Jinja it is what Salt's
	// loader reads from the repr Jinja prints, inserted as one node, as
	// toJson's is (so the same checks apply to it).
	if m.reprStructs {
		if v, ok := reprAsYAML(r.v); ok {
			return v, nil
		}
	}
	return py.Text(r.v), nil
}

// reprAsYAML is the value Salt's YAML loader reads from the Python repr of
// a map or list pasted as a whole plain value: None becomes the string
// "None", True and False booleans, a float typed from its repr (1e+16 is a
// string), a string as YAML reads its quoted repr. ok is false for other
// values, and for a repr YAML cannot read (Salt would fail the file; the
// value then stays its text, as other values Salt's loader rejects do).
func reprAsYAML(v any) (any, bool) {
	switch v.(type) {
	case []any, *event.Map, map[string]any:
	default:
		return nil, false
	}
	sk, err := parseSkeleton([]byte(py.Text(v)))
	if err != nil || sk.root == nil || sk.root.kind == pScalar {
		return nil, false
	}
	out, err := (&materializer{}).value(sk.root)
	if err != nil {
		return nil, false
	}
	return out, true
}

// jsonAsYAML is what Salt's loader makes of v written as JSON by Python
// (Salt's |json) and pasted as a whole plain scalar: JSON is YAML, so
// strings, integers, null and booleans stay, but a float is typed from
// Python's spelling of it: 1.0 and -0.0 are floats, 1e+16, 1e-07, Infinity
// and NaN strings. ok is false for what Python's json cannot write.
func jsonAsYAML(v any, sortKeys bool, depth int) (any, bool) {
	if depth > py.MaxJSONDepth {
		return nil, false
	}
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, true
	case float64:
		return jsonFloatAsYAML(x), true
	case py.Bytes:
		return nil, false
	}
	if s, ok := py.AsString(v); ok {
		return s, true
	}
	if n, ok := py.ToNum(v); ok {
		if n.IsFloat {
			return jsonFloatAsYAML(n.F), true
		}
		return numValue(n), true
	}
	if items, _, ok := py.AsList(v); ok {
		out := make([]any, len(items))
		for i, e := range items {
			ev, ok := jsonAsYAML(e, sortKeys, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = ev
		}
		return out, true
	}
	if d, ok := py.AsDict(v); ok {
		keys := d.Keys
		if sortKeys && !sort.StringsAreSorted(keys) {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		out := event.NewMap(len(keys))
		for _, k := range keys {
			e, _ := d.Get(k)
			ev, ok := jsonAsYAML(e, sortKeys, depth+1)
			if !ok {
				return nil, false
			}
			out.Set(k, ev)
		}
		return out, true
	}
	return nil, false
}

// jsonFloatAsYAML types Python's JSON spelling of a float as YAML 1.1 does.
func jsonFloatAsYAML(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return f // Python writes 1.0: a float
	}
	return typedText(pyFloat(f))
}

// typedText is the value of text pasted as a whole plain scalar: Salt's
// YAML typing when it is a safe plain scalar (`.inf` and `.nan` are floats,
// as in Salt), else the text itself.
func typedText(text string) any {
	if !yaml11.PlainSafe(text) {
		return text
	}
	v, err := resolve(text)
	if err != nil {
		return text
	}
	return v
}

// plainEnd is what a plain scalar cannot end with: YAML's blanks and line
// breaks; it cannot begin with a blank either. Salt's loader does not read
// them as part of a value pasted as plain text (`arg: {{ v }}` with " a\n"
// is "a", all blank is null).
const plainEnd = " \t\n\r\u0085\u2028\u2029"

// trimPlain trims from a plain scalar's text what Salt's loader would not
// read as part of it: blanks before, blanks and line breaks after. (A line
// break before text is kept: Salt would fail on it.)
func trimPlain(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; c > ' ' && c < 0x80 {
		if c := s[len(s)-1]; c > ' ' && c < 0x80 {
			return s // the common case: nothing to trim
		}
	}
	return strings.TrimLeft(strings.TrimRight(s, plainEnd), " \t")
}

// blockText applies to a block scalar's text with printed values what
// Salt's loader does at its edges: spaces starting its first line are
// indentation (when that is detected); lines of spaces at its end are empty
// lines, and its trailing line breaks follow the chomping indicator (clip:
// one, strip: none, keep: all), \r, \r\n and \u0085 read as \n.
func blockText(n *pnode, text string) string {
	if n.indent == 0 && len(n.parts) > 0 && n.parts[0] == "" {
		text = strings.TrimLeft(text, " ")
	}
	// end is where the last line that is not empty ends.
	end := strings.LastIndexFunc(text, func(r rune) bool { return !isBreak(r) })
	if end >= 0 {
		_, w := utf8.DecodeRuneInString(text[end:])
		end += w
		if i := strings.IndexFunc(text[end:], isBreak); i >= 0 {
			end += i
		} else {
			end = len(text)
		}
	} else {
		end = 0
	}
	rest := text[end:]
	if n.chomp == '-' || rest == "" {
		return text[:end]
	}
	var b strings.Builder
	b.WriteString(text[:end])
	for i := 0; i < len(rest); {
		r, w := utf8.DecodeRuneInString(rest[i:])
		i += w
		switch r {
		case ' ':
			continue
		case '\r':
			if i < len(rest) && rest[i] == '\n' {
				i++
			}
			b.WriteByte('\n')
		case 0x85, '\n':
			b.WriteByte('\n')
		default:
			b.WriteRune(r) // \u2028, \u2029 stay
		}
		if n.chomp != '+' {
			break // clip: the first line break only
		}
	}
	if n.chomp != '+' && end == 0 {
		return "" // nothing but empty lines
	}
	return b.String()
}

// dedentLines removes the indentation of a block scalar (indent spaces)
// from every line of s but the first, as Salt's loader strips it from a
// multi-line value pasted into the block (`{{ out|indent(10) }}`); a line
// of nothing but fewer spaces is an empty line, as in YAML. A line with
// text indented less keeps what it has: to Salt it would end the block,
// and event data does not change a reaction's structure.
func dedentLines(s string, indent int) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		l := lines[i]
		n := 0
		for n < len(l) && l[n] == ' ' {
			n++
		}
		switch {
		case n >= indent:
			lines[i] = l[indent:]
		case n == len(strings.TrimRight(l, "\r")):
			lines[i] = l[n:]
		}
	}
	return strings.Join(lines, "\n")
}

// trimBlankLines drops the spaces of the lines of spaces that end s after a
// line break.
func trimBlankLines(s string) string {
	end := strings.LastIndexFunc(s, func(r rune) bool { return r != ' ' && !isBreak(r) })
	i := strings.IndexFunc(s[end+1:], isBreak)
	if i < 0 || !strings.Contains(s[end+1+i:], " ") {
		return s
	}
	tail := strings.ReplaceAll(s[end+1+i:], " ", "")
	return s[:end+1+i] + tail
}

// isBreak reports whether r is a YAML line break.
func isBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// blank reports whether a plain scalar is one printed value that prints
// as nothing once trimmed (so Salt would see no node at all).
func (m *materializer) blank(n *pnode) bool {
	if len(n.refs) != 1 || n.parts[0] != "" || n.parts[1] != "" {
		return false
	}
	ref := n.refs[0]
	if ref < 0 || ref >= len(m.vals) || m.vals[ref].kind != rawValue {
		return false
	}
	switch v := m.vals[ref].v.(type) {
	case string:
		return trimPlain(v) == ""
	case py.YAMLQuoted:
		return false
	}
	return trimPlain(py.Text(m.vals[ref].v)) == ""
}

// decodeOrderedJSON decodes JSON text keeping object key order.
func decodeOrderedJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := event.NewMap(4)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return out, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return event.Number(string(t)), nil
	default:
		return t, nil
	}
}

func pyFloat(f float64) string { return event.PyFloat(f) }

// keyString spells a mapping key as Python's json module writes it.
func keyString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
	}
	return py.Str(v)
}

// pyEqual compares two scalar keys as Python compares dict keys.
func pyEqual(a, b any) bool {
	if x, ok := a.(string); ok {
		y, ok := b.(string)
		return ok && x == y
	}
	if _, ok := b.(string); ok {
		return false
	}
	an, aNum := numeric(a)
	bn, bNum := numeric(b)
	if aNum || bNum {
		if !aNum || !bNum {
			return false
		}
		return an.Cmp(bn) == 0
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// keySet detects duplicate keys with Python's equality: a linear scan for
// small mappings, a hash of a canonical form beyond.
type keySet struct {
	list []any
	hash map[string]struct{}
}

// add records k and reports whether an equal key was already present.
func (s *keySet) add(k any) bool {
	if s.hash == nil && len(s.list) < 16 {
		for _, prev := range s.list {
			if pyEqual(prev, k) {
				return true
			}
		}
		s.list = append(s.list, k)
		return false
	}
	if s.hash == nil {
		s.hash = make(map[string]struct{}, 64)
		for _, prev := range s.list {
			if id, ok := canonicalKey(prev); ok {
				s.hash[id] = struct{}{}
			}
		}
	}
	id, ok := canonicalKey(k)
	if !ok {
		return false
	}
	if _, dup := s.hash[id]; dup {
		return true
	}
	s.hash[id] = struct{}{}
	return false
}

// canonicalKey spells a key so that Python-equal keys spell the same; NaN
// equals nothing.
func canonicalKey(k any) (string, bool) {
	switch x := k.(type) {
	case string:
		return "s" + x, true
	case nil:
		return "n", true
	case py.Bytes:
		return "b" + string(x), true
	}
	if r, ok := numeric(k); ok {
		return "#" + r.RatString(), true
	}
	return "", false
}

// numeric converts Python-numeric values (bool, int, float) to a rational.
func numeric(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewRat(1, 1), true
		}
		return new(big.Rat), true
	case int64:
		return new(big.Rat).SetInt64(x), true
	case *big.Int:
		return new(big.Rat).SetInt(x), true
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(x) == nil {
			return nil, false // NaN and infinities equal nothing here
		}
		return r, true
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		return r, ok
	}
	return nil, false
}
