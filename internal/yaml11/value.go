package yaml11

import (
	"math"
	"math/big"
	"strconv"

	"github.com/reactord/reactord/event"
)

// Map is an ordered mapping, as Salt builds mappings (OrderedDict), whose
// keys are any hashable scalar value. Keys are typed like Resolve's results
// (nil, bool, int64, *big.Int, float64, string; a !!binary key is its
// decoded bytes as a string); Values are any value Node.Value returns.
// KeyNodes holds the node of each key (nil when the Map was built by hand).
type Map struct {
	Keys     []any
	Values   []any
	KeyNodes []*Node
}

// Len returns the number of pairs.
func (m *Map) Len() int { return len(m.Keys) }

// Get returns the value of key k, comparing keys as Python does: numbers
// by numeric value whatever their type (1 == 1.0 == true, 0 == false),
// strings by content, nil only to nil; NaN matches nothing. k may also be
// an int.
func (m *Map) Get(k any) (any, bool) {
	nk, ok := normKey(k)
	if !ok {
		return nil, false
	}
	for i, key := range m.Keys {
		if kk, ok := normKey(key); ok && kk == nk {
			return m.Values[i], true
		}
	}
	return nil, false
}

// keyNorm is a key reduced to a comparable form in which equal Python
// values are equal Go values.
type keyNorm struct {
	kind byte // 'z' None, 's' str, 'b' bytes, 'i' integral number, 'I' big integral, 'f' other float, 'n' PyYAML's nan_value
	s    string
	i    int64
	f    float64
}

// normKey normalizes a key value; ok is false for values that never
// compare equal to anything (NaN) or are not scalars.
func normKey(v any) (keyNorm, bool) {
	switch x := v.(type) {
	case nil:
		return keyNorm{kind: 'z'}, true
	case string:
		return keyNorm{kind: 's', s: x}, true
	case bool:
		if x {
			return keyNorm{kind: 'i', i: 1}, true
		}
		return keyNorm{kind: 'i'}, true
	case int:
		return keyNorm{kind: 'i', i: int64(x)}, true
	case int64:
		return keyNorm{kind: 'i', i: x}, true
	case *big.Int:
		if x.IsInt64() {
			return keyNorm{kind: 'i', i: x.Int64()}, true
		}
		return keyNorm{kind: 'I', s: x.String()}, true
	case float64:
		switch {
		case math.IsNaN(x):
			return keyNorm{}, false
		case math.IsInf(x, 0) || x != math.Trunc(x):
			return keyNorm{kind: 'f', f: x}, true
		case x >= -(1<<63) && x < 1<<63:
			return keyNorm{kind: 'i', i: int64(x)}, true
		}
		b, _ := big.NewFloat(x).Int(nil)
		return keyNorm{kind: 'I', s: b.String()}, true
	}
	return keyNorm{}, false
}

// pyStr is Python's str() of a scalar value, for messages.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case *big.Int:
		return x.String()
	case float64:
		return event.PyFloatRepr(x)
	case string:
		return x
	}
	return "?"
}

// Value builds the value Salt's loader would build for the node:
//
//   - mappings become *Map, sequences []any;
//   - plain scalars without a tag (or with the non-specific tag "!", on
//     any scalar) are typed by Resolve; other untagged scalars are strings;
//   - explicit tags are built by SafeConstructor's constructors with Salt's
//     overrides: !!str, !!python/unicode and !!timestamp give the text,
//     !!int, !!float, !!bool and !!null parse it like PyYAML (any text,
//     Python errors kept), !!binary gives the decoded bytes as a string,
//     !!map, !!omap and !!seq build collections; !!set and !!pairs are not
//     supported; any other tag is an error ("could not determine a
//     constructor for the tag ...").
//
// Errors are *Error positioned at the offending node. Mappings are checked
// like SaltYamlSafeLoader.construct_mapping: a mapping or sequence key is
// "found unacceptable key" (what Salt's YAML renderer reports as "Invalid
// YAML, possible double curly-brace"), and a key equal by Python's == to an
// earlier key of the same mapping is "found conflicting ID '<key>'" at the
// later key. As in PyYAML, collections are filled breadth first, so the
// error reported is the one Salt would report first. Nodes shared through
// aliases give shared values.
func (n *Node) Value() (any, error) {
	b := &builder{memo: map[*Node]any{}}
	v, err := b.object(n)
	if err != nil {
		return nil, err
	}
	for len(b.queue) > 0 {
		job := b.queue[0]
		b.queue = b.queue[1:]
		if err := job(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

type builder struct {
	memo  map[*Node]any
	queue []func() error
}

func (b *builder) object(n *Node) (any, error) {
	if v, ok := b.memo[n]; ok {
		return v, nil
	}
	var v any
	switch n.Kind {
	case ScalarNode:
		sv, err := scalarValue(n)
		if err != nil {
			return nil, err
		}
		v = sv
	case MappingNode:
		switch n.Tag {
		case "", "!", TagMap, TagOmap:
		default:
			return nil, b.badTag(n)
		}
		m := &Map{}
		v = m
		b.queue = append(b.queue, func() error { return b.fillMap(n, m) })
	case SequenceNode:
		switch n.Tag {
		case "", "!", TagSeq:
		default:
			return nil, b.badTag(n)
		}
		s := make([]any, len(n.Content))
		v = s
		b.queue = append(b.queue, func() error { return b.fillSeq(n, s) })
	default:
		return nil, errAt(n, "unexpected node kind "+n.Kind.String())
	}
	b.memo[n] = v
	return v, nil
}

// badTag is the error for a collection with a tag whose constructor does
// not accept it.
func (b *builder) badTag(n *Node) error {
	switch n.Tag {
	case TagInt:
		// SaltYamlSafeLoader.construct_scalar calls node.value.startswith
		// before PyYAML checks the node kind.
		return errAt(n, "AttributeError: 'list' object has no attribute 'startswith'")
	case TagStr, TagFloat, TagBool, TagNull, TagTimestamp, TagBinary, TagPythonUnicode:
		return errAt(n, "expected a scalar node, but found "+n.Kind.String())
	case TagMap, TagOmap:
		return errAt(n, "expected a mapping node, but found "+n.Kind.String())
	case TagSeq:
		return errAt(n, "expected a sequence node, but found "+n.Kind.String())
	case "tag:yaml.org,2002:set", "tag:yaml.org,2002:pairs":
		return errAt(n, "the tag "+pyRepr(n.Tag)+" is not supported")
	}
	e := noConstructor(n.Tag)
	e.Line, e.Column = n.Line, n.Column
	return e
}

func (b *builder) fillSeq(n *Node, s []any) error {
	for i, c := range n.Content {
		v, err := b.object(c)
		if err != nil {
			return err
		}
		s[i] = v
	}
	return nil
}

func (b *builder) fillMap(n *Node, m *Map) error {
	pairs := len(n.Content) / 2
	m.Keys = make([]any, 0, pairs)
	m.Values = make([]any, 0, pairs)
	m.KeyNodes = make([]*Node, 0, pairs)
	seen := make(map[keyNorm]struct{}, pairs)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		var k any
		if kn.Kind == ScalarNode && implicitlyResolved(kn) && classify(kn.Text, false) == kValue {
			// flatten_mapping retags the `=` key as a string.
			k = kn.Text
		} else {
			kv, err := b.object(kn)
			if err != nil {
				return err
			}
			k = kv
		}
		if kn.Kind != ScalarNode {
			return errAt(kn, "found unacceptable key (Invalid YAML, possible double curly-brace)")
		}
		v, err := b.object(vn)
		if err != nil {
			return err
		}
		nk, ok := keyOf(kn, k)
		if ok {
			if _, dup := seen[nk]; dup {
				return errAt(kn, "found conflicting ID '"+keyStr(kn, k)+"'")
			}
			seen[nk] = struct{}{}
		}
		m.Keys = append(m.Keys, k)
		m.Values = append(m.Values, v)
		m.KeyNodes = append(m.KeyNodes, kn)
	}
	return nil
}

// keyOf normalizes a built key for duplicate detection, knowing its node:
// !!binary keys are bytes (never equal to a str), and NaN keys built from
// ".nan" are PyYAML's shared nan_value (equal to each other by identity).
func keyOf(kn *Node, k any) (keyNorm, bool) {
	if kn.Tag == TagBinary {
		return keyNorm{kind: 'b', s: k.(string)}, true
	}
	if f, ok := k.(float64); ok && math.IsNaN(f) {
		if _, shared, _ := constructFloat(kn.Text); shared {
			return keyNorm{kind: 'n'}, true
		}
		return keyNorm{}, false
	}
	return normKey(k)
}

func keyStr(kn *Node, k any) string {
	if kn.Tag == TagBinary {
		return pyBytesRepr(k.(string))
	}
	return pyStr(k)
}

// scalarValue builds a scalar node.
func scalarValue(n *Node) (any, error) {
	var (
		v   any
		err *Error
	)
	switch n.Tag {
	case "":
		if n.Style != Plain {
			return n.Text, nil
		}
		v, err = resolveScalar(n.Text)
	case "!":
		v, err = resolveScalar(n.Text)
	case TagStr, TagPythonUnicode, TagTimestamp:
		return n.Text, nil
	case TagNull:
		return nil, nil
	case TagBool:
		v, err = constructBool(n.Text)
	case TagInt:
		v, err = constructInt(n.Text)
	case TagFloat:
		var f float64
		f, _, err = constructFloat(n.Text)
		v = f
	case TagBinary:
		v, err = constructBinary(n.Text)
	case TagMap, TagOmap:
		err = &Error{Msg: "expected a mapping node, but found scalar"}
	case TagSeq:
		err = &Error{Msg: "expected a sequence node, but found scalar"}
	case "tag:yaml.org,2002:set", "tag:yaml.org,2002:pairs":
		err = &Error{Msg: "the tag " + pyRepr(n.Tag) + " is not supported"}
	default:
		err = noConstructor(n.Tag)
	}
	if err != nil {
		err.Line, err.Column = n.Line, n.Column
		return nil, err
	}
	return v, nil
}

// resolveScalar is Resolve with the error separated.
func resolveScalar(text string) (any, *Error) {
	k := classify(text, false)
	if k == kStr {
		return text, nil
	}
	return constructImplicit(k, text)
}
