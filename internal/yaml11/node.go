package yaml11

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Kind is the kind of a Node.
type Kind uint8

const (
	// ScalarNode is a scalar: Text holds its value.
	ScalarNode Kind = iota + 1
	// MappingNode is a mapping: Content holds keys and values alternately.
	MappingNode
	// SequenceNode is a sequence: Content holds the items.
	SequenceNode
)

// String returns the name PyYAML uses for the node kind ("scalar",
// "mapping", "sequence").
func (k Kind) String() string {
	switch k {
	case ScalarNode:
		return "scalar"
	case MappingNode:
		return "mapping"
	case SequenceNode:
		return "sequence"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Style is how a node was written.
type Style uint8

const (
	// Plain is an unquoted scalar, or a block (indented) collection.
	Plain Style = iota
	// SingleQuoted is a 'single quoted' scalar.
	SingleQuoted
	// DoubleQuoted is a "double quoted" scalar.
	DoubleQuoted
	// Literal is a | block scalar.
	Literal
	// Folded is a > block scalar.
	Folded
	// Flow is a [flow] sequence or {flow} mapping.
	Flow
)

// String returns the style's name.
func (s Style) String() string {
	switch s {
	case Plain:
		return "plain"
	case SingleQuoted:
		return "single-quoted"
	case DoubleQuoted:
		return "double-quoted"
	case Literal:
		return "literal"
	case Folded:
		return "folded"
	case Flow:
		return "flow"
	}
	return "Style(" + strconv.Itoa(int(s)) + ")"
}

// Node is a parsed YAML node with Salt typing information and its position.
//
// Aliases are expanded: an alias is the very *Node of its anchor (so the
// tree is a DAG, and a node's position is that of the anchored node, as in
// PyYAML). Mapping merge keys (`<<`) have been applied the way Salt's
// SaltYamlSafeLoader.flatten_mapping does it, so Content never holds a merge
// pair. Walk shared nodes once if the document may be alias-heavy.
type Node struct {
	// Kind is ScalarNode, MappingNode or SequenceNode.
	Kind Kind
	// Line and Column are 1-based; Column counts characters.
	Line, Column int
	// Style is how the node was written; collections are Plain (block) or
	// Flow.
	Style Style
	// Tag is the explicit tag as written, in long form (`!!str` is
	// "tag:yaml.org,2002:str", local tags such as "!foo" stay as they
	// are), "!" for the non-specific tag, and "" when there is no tag.
	Tag string
	// Text is a scalar's value after YAML unescaping and folding.
	Text string
	// Content holds a mapping's keys and values (k1, v1, k2, v2, ...) or a
	// sequence's items.
	Content []*Node
	// Chomp is a block scalar's chomping indicator: '-' (strip), '+'
	// (keep), or 0 (clip); Indent its explicit indentation indicator (1-9),
	// 0 when the indentation is detected from the first line.
	Chomp  byte
	Indent int
	// ContentIndent is the indentation, in spaces, of a block scalar's
	// content as detected from its first non-empty line (0 when it has an
	// explicit indentation indicator, or none).
	ContentIndent int

	flat bool // merge keys applied
}

// Parse parses src, which must hold at most one YAML document. It returns a
// nil Node and no error when there is no document or the document is empty
// (`---` alone, only comments). Errors are *Error:
//
//   - syntax errors from go.yaml.in/yaml/v3, at the problem (found by
//     parsing prefixes of src: the library tells only a line, for some
//     errors the enclosing collection's), at the quote of a string not
//     closed on its line, at the bracket not closed, at the tab; the
//     column is 0 when it cannot be told;
//   - undecodable input (bad UTF-8, control characters), at the offending
//     character;
//   - "found undefined alias 'x'", at the first "*x";
//   - "expected a single document in the stream, but found another
//     document", at the second document;
//   - "found recursive alias", for an alias inside its own anchored node
//     (Salt would build a value that contains itself; reactord refuses);
//   - malformed merge keys ("expected a mapping or list of mappings for
//     merging, but found scalar"), at the merged value.
func Parse(src []byte) (n *Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, &Error{Msg: fmt.Sprintf("internal parser error: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, convertYAMLError(src, err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil:
		return nil, &Error{Line: more.Line, Column: more.Column, Msg: "expected a single document in the stream, but found another document"}
	case err != io.EOF:
		return nil, convertYAMLError(src, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	c := &converter{src: src, memo: map[*yaml.Node]*Node{}, active: map[*yaml.Node]bool{}}
	root, err := c.convert(doc.Content[0])
	if err != nil {
		return nil, err
	}
	if root.Kind == ScalarNode && root.Tag == "" && root.Style == Plain && root.Text == "" {
		return nil, nil
	}
	if err := flattenAll(root, map[*Node]bool{}); err != nil {
		return nil, err
	}
	return root, nil
}

var lineMsg = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
var unknownAnchor = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)

// Problems go.yaml.in/yaml/v3's parser (as opposed to its scanner)
// reports. For those, the line in its message is the 0-based line of the
// context mark (or of the problem mark when the context is on the first
// line); the scanner's lines are 1-based. Both leave the line out when it
// would be the first one.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// readerProblems are decoding errors, reported without a position.
var readerProblems = map[string]bool{
	"invalid leading UTF-8 octet":        true,
	"incomplete UTF-8 octet sequence":    true,
	"invalid trailing UTF-8 octet":       true,
	"invalid length of a UTF-8 sequence": true,
	"invalid Unicode character":          true,
	"control characters are not allowed": true,
	"incomplete UTF-16 character":        true,
	"incomplete UTF-16 surrogate pair":   true,
	"expected low surrogate area":        true,
}

// convertYAMLError turns a go.yaml.in/yaml/v3 error into an *Error at
// the problem's position (refineSyntaxError), with the fix in the message
// where the cause is a classic one.
func convertYAMLError(src []byte, err error) *Error {
	msg := err.Error()
	if m := lineMsg.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++
		}
		return refineSyntaxError(src, line, m[2])
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		e := &Error{Msg: "found undefined alias " + pyRepr(m[1])}
		e.Line, e.Column = findAlias(src, m[1])
		return e
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return &Error{Msg: strings.Join(te.Errors, "; ")}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	e := &Error{Msg: msg}
	switch {
	case readerProblems[msg]:
		if off := badCharOffset(src); off >= 0 {
			e.Line, e.Column = position(src, off)
		}
	case !strings.HasPrefix(msg, "internal error"):
		return refineSyntaxError(src, 1, msg)
	}
	return e
}

// badCharOffset returns the offset of the first invalid UTF-8 sequence or
// character libyaml's reader refuses, or -1.
func badCharOffset(src []byte) int {
	for i := 0; i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && w <= 1 {
			return i
		}
		if !(r == 0x09 || r == 0x0a || r == 0x0d || (r >= 0x20 && r <= 0x7e) || r == 0x85 ||
			(r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || r >= 0x10000) {
			return i
		}
		i += w
	}
	return -1
}

// findAlias guesses where the first alias "*name" is in src, for an error
// message: the first "*name" that starts a token and ends at a blank, a flow
// indicator or the end.
func findAlias(src []byte, name string) (line, col int) {
	pat := "*" + name
	s := string(src)
	for off := 0; ; {
		i := strings.Index(s[off:], pat)
		if i < 0 {
			return 0, 0
		}
		i += off
		off = i + 1
		if i > 0 && !strings.ContainsRune(" \t\r\n[{,:-?", rune(s[i-1])) {
			continue
		}
		if j := i + len(pat); j < len(s) && !strings.ContainsRune(" \t\r\n,]}:", rune(s[j])) {
			continue
		}
		return position(src, i)
	}
}

// position returns the 1-based line and character column of a byte offset,
// counting line breaks as libyaml does (CR LF, CR, LF, NEL, LS, PS).
func position(src []byte, off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		switch r {
		case '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				w = 2
			}
			line, col = line+1, 1
		case '\n', 0x85, 0x2028, 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
		i += w
	}
	return line, col
}

// lineStarts returns the byte offset at which each line starts, breaking
// lines as libyaml does.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i := 0; i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		switch r {
		case '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				w = 2
			}
			starts = append(starts, i+w)
		case '\n', 0x85, 0x2028, 0x2029:
			starts = append(starts, i+w)
		}
		i += w
	}
	return starts
}

type converter struct {
	src    []byte
	memo   map[*yaml.Node]*Node
	active map[*yaml.Node]bool
	lines  []int // lineStarts(src), computed when first needed
}

// offset returns the byte offset of a 1-based line and character column,
// or -1.
func (c *converter) offset(line, col int) int {
	if c.lines == nil {
		c.lines = lineStarts(c.src)
	}
	if line < 1 || line > len(c.lines) || col < 1 {
		return -1
	}
	i := c.lines[line-1]
	for ; col > 1 && i < len(c.src); col-- {
		_, w := utf8.DecodeRune(c.src[i:])
		i += w
	}
	if col > 1 {
		return -1
	}
	return i
}

func (c *converter) convert(y *yaml.Node) (*Node, error) {
	if y.Kind == yaml.AliasNode {
		if y.Alias == nil {
			return nil, &Error{Line: y.Line, Column: y.Column, Msg: "found undefined alias " + pyRepr(y.Value)}
		}
		if c.active[y.Alias] {
			return nil, &Error{Line: y.Line, Column: y.Column, Msg: "found recursive alias " + pyRepr(y.Value) + " (a node containing itself is not supported)"}
		}
		return c.convert(y.Alias)
	}
	if n, ok := c.memo[y]; ok {
		return n, nil
	}
	n := &Node{Line: y.Line, Column: y.Column}
	c.memo[y] = n
	if y.Style&yaml.TaggedStyle != 0 {
		n.Tag = longTag(y.Tag)
	}
	switch y.Kind {
	case yaml.ScalarNode:
		n.Kind = ScalarNode
		n.Text = y.Value
		switch {
		case y.Style&yaml.DoubleQuotedStyle != 0:
			n.Style = DoubleQuoted
		case y.Style&yaml.SingleQuotedStyle != 0:
			n.Style = SingleQuoted
		case y.Style&yaml.LiteralStyle != 0:
			n.Style = Literal
			n.Chomp, n.Indent, n.ContentIndent = c.blockHeader(y)
		case y.Style&yaml.FoldedStyle != 0:
			n.Style = Folded
			n.Chomp, n.Indent, n.ContentIndent = c.blockHeader(y)
		}
		// yaml.v3 drops the non-specific tag "!", which makes PyYAML
		// resolve even a quoted scalar implicitly; look for it.
		if n.Tag == "" && c.nonSpecificTag(y) {
			n.Tag = "!"
		}
		return n, nil
	case yaml.MappingNode:
		n.Kind = MappingNode
	case yaml.SequenceNode:
		n.Kind = SequenceNode
	default:
		return nil, &Error{Line: y.Line, Column: y.Column, Msg: "unexpected YAML node kind"}
	}
	if y.Style&yaml.FlowStyle != 0 {
		n.Style = Flow
	}
	nonSpecific := n.Tag == "" && c.nonSpecificTag(y)
	c.active[y] = true
	n.Content = make([]*Node, 0, len(y.Content))
	for _, yc := range y.Content {
		cn, err := c.convert(yc)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, cn)
	}
	delete(c.active, y)
	// A block mapping starts where its first key does: properties there
	// are the key's.
	if nonSpecific && !(n.Kind == MappingNode && len(y.Content) > 0 && y.Content[0].Line == n.Line && y.Content[0].Column == n.Column) {
		n.Tag = "!"
	}
	return n, nil
}

// nonSpecificTag reports whether the node's properties, which start at its
// position, include the tag "!" (or its verbatim form "!<!>").
func (c *converter) nonSpecificTag(y *yaml.Node) bool {
	i := c.offset(y.Line, y.Column)
	if i < 0 || i >= len(c.src) || (c.src[i] != '!' && c.src[i] != '&') {
		return false
	}
	s := c.src
	for props := 0; props < 2 && i < len(s); props++ {
		if s[i] != '!' && s[i] != '&' {
			return false
		}
		j := i
		for j < len(s) && !isBlankOrBreak(s[j]) {
			j++
		}
		if tok := string(s[i:j]); tok == "!" || tok == "!<!>" {
			return true
		} else if s[i] == '!' {
			return false
		}
		// Skip separating white space and comments.
		for j < len(s) {
			switch {
			case isBlankOrBreak(s[j]):
				j++
			case s[j] == '#':
				for j < len(s) && s[j] != '\n' && s[j] != '\r' {
					j++
				}
			default:
				goto next
			}
		}
	next:
		i = j
	}
	return false
}

// blockHeader reads a block scalar's chomping and indentation indicators
// from its header (after any tag and anchor: `!!str &a |-2`).
func (c *converter) blockHeader(y *yaml.Node) (chomp byte, indent, content int) {
	i := c.offset(y.Line, y.Column)
	if i < 0 {
		return 0, 0, 0
	}
	s := c.src
	for i < len(s) && s[i] != '|' && s[i] != '>' && s[i] != '\n' && s[i] != '\r' {
		i++
	}
	if i >= len(s) || (s[i] != '|' && s[i] != '>') {
		return 0, 0, 0
	}
	for i++; i < len(s); i++ {
		switch b := s[i]; {
		case b == '-' || b == '+':
			chomp = b
		case b >= '1' && b <= '9':
			indent = int(b - '0')
		default:
			if indent == 0 {
				content = contentIndent(s[i:])
			}
			return chomp, indent, content
		}
	}
	return chomp, indent, 0
}

// contentIndent is the number of spaces starting the first line that is
// not empty after the block scalar header that s starts in.
func contentIndent(s []byte) int {
	nl := bytes.IndexByte(s, '\n')
	if nl < 0 {
		return 0
	}
	for _, line := range bytes.Split(s[nl+1:], []byte("\n")) {
		n := 0
		for n < len(line) && line[n] == ' ' {
			n++
		}
		if n < len(bytes.TrimRight(line, "\r")) {
			return n
		}
	}
	return 0
}

func isBlankOrBreak(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// longTag expands the "!!" handle yaml.v3 leaves in tags.
func longTag(tag string) string {
	if strings.HasPrefix(tag, "!!") {
		return "tag:yaml.org,2002:" + tag[2:]
	}
	return tag
}

// flattenAll applies merge keys in every mapping reachable from n.
func flattenAll(n *Node, seen map[*Node]bool) error {
	if seen[n] {
		return nil
	}
	seen[n] = true
	if n.Kind == MappingNode {
		if err := flatten(n); err != nil {
			return err
		}
	}
	for _, cn := range n.Content {
		if err := flattenAll(cn, seen); err != nil {
			return err
		}
	}
	return nil
}

// isMergeKey reports whether a key node has the merge tag: an explicit
// !!merge, or `<<` resolved implicitly.
func isMergeKey(k *Node) bool {
	if k.Kind != ScalarNode {
		return false
	}
	if k.Tag == TagMerge {
		return true
	}
	return implicitlyResolved(k) && classify(k.Text, false) == kMerge
}

// implicitlyResolved reports whether PyYAML would run the implicit
// resolvers on a scalar: plain without a tag, or any style with "!".
func implicitlyResolved(n *Node) bool {
	return (n.Tag == "" && n.Style == Plain) || n.Tag == "!"
}

// flatten is SaltYamlSafeLoader.flatten_mapping. Merge pairs are removed;
// the pairs of the merged mapping (or of each mapping of a merged sequence,
// the later ones first) are gathered, after flattening them in turn, and
// those whose key text is not the text of one of the remaining keys are put
// in front of the remaining pairs.
func flatten(n *Node) error {
	if n.flat {
		return nil
	}
	n.flat = true
	var merged, rest []*Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !isMergeKey(k) {
			rest = append(rest, k, v)
			continue
		}
		switch v.Kind {
		case MappingNode:
			if err := flatten(v); err != nil {
				return err
			}
			merged = append(merged, v.Content...)
		case SequenceNode:
			for _, s := range v.Content {
				if s.Kind != MappingNode {
					return errAt(s, "expected a mapping for merging, but found "+s.Kind.String())
				}
				if err := flatten(s); err != nil {
					return err
				}
			}
			for j := len(v.Content) - 1; j >= 0; j-- {
				merged = append(merged, v.Content[j].Content...)
			}
		default:
			return errAt(v, "expected a mapping or list of mappings for merging, but found "+v.Kind.String())
		}
	}
	if len(merged) == 0 {
		if len(rest) != len(n.Content) {
			n.Content = rest
		}
		return nil
	}
	existing := map[string]bool{}
	for i := 0; i < len(rest); i += 2 {
		if rest[i].Kind == ScalarNode {
			existing[rest[i].Text] = true
		}
	}
	out := make([]*Node, 0, len(merged)+len(rest))
	for i := 0; i+1 < len(merged); i += 2 {
		if k := merged[i]; k.Kind != ScalarNode || !existing[k.Text] {
			out = append(out, k, merged[i+1])
		}
	}
	n.Content = append(out, rest...)
	return nil
}

// WithinSize reports whether the tree, with every alias expanded, has at
// most limit nodes. Aliases share nodes, so a small document can stand for
// an exponentially large value ("billion laughs"); callers that walk the
// expanded tree check this first.
func (n *Node) WithinSize(limit int) bool {
	budget := limit
	return n.withinSize(&budget)
}

func (n *Node) withinSize(budget *int) bool {
	*budget--
	if *budget < 0 {
		return false
	}
	for _, c := range n.Content {
		if !c.withinSize(budget) {
			return false
		}
	}
	return true
}
