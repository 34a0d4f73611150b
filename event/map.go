package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Map is an ordered mapping with string keys: the Go form of the
// OrderedDicts Salt builds from YAML. Setting an existing key keeps its
// position, as Python's dict.update does. The zero value is empty and ready.
type Map struct {
	keys []string
	vals []any
	idx  map[string]int // built once the map grows past indexAt keys
}

const indexAt = 16

// Chunk is one compiled low chunk: Salt's keys (state, __id__, name, __sls__,
// order, fun) plus every key of the reaction body as written.
type Chunk = Map

// NewMap returns an empty map with room for n keys.
func NewMap(n int) *Map {
	return &Map{keys: make([]string, 0, n), vals: make([]any, 0, n)}
}

// Len reports the number of keys.
func (m *Map) Len() int { return len(m.keys) }

// Keys returns the keys in order. The slice must not be modified.
func (m *Map) Keys() []string { return m.keys }

// At returns the i-th key and value.
func (m *Map) At(i int) (string, any) { return m.keys[i], m.vals[i] }

func (m *Map) index(k string) int {
	if len(m.keys) > indexAt {
		if m.idx == nil {
			m.idx = make(map[string]int, len(m.keys)*2)
			for i, key := range m.keys {
				if _, dup := m.idx[key]; !dup {
					m.idx[key] = i
				}
			}
		}
		if i, ok := m.idx[k]; ok {
			return i
		}
		return -1
	}
	for i, key := range m.keys {
		if key == k {
			return i
		}
	}
	return -1
}

// Get returns the value stored under k.
func (m *Map) Get(k string) (any, bool) {
	if i := m.index(k); i >= 0 {
		return m.vals[i], true
	}
	return nil, false
}

// Has reports whether k is present.
func (m *Map) Has(k string) bool { return m.index(k) >= 0 }

// Str returns the value under k when it is a string, else "".
func (m *Map) Str(k string) string {
	v, _ := m.Get(k)
	s, _ := v.(string)
	return s
}

// Set stores v under k, keeping k's position when it already exists.
func (m *Map) Set(k string, v any) {
	if i := m.index(k); i >= 0 {
		m.vals[i] = v
		return
	}
	m.keys = append(m.keys, k)
	m.vals = append(m.vals, v)
	if m.idx != nil {
		m.idx[k] = len(m.keys) - 1
	}
}

// Delete removes k.
func (m *Map) Delete(k string) {
	if i := m.index(k); i >= 0 {
		m.keys = append(m.keys[:i], m.keys[i+1:]...)
		m.vals = append(m.vals[:i], m.vals[i+1:]...)
		m.idx = nil
	}
}

// Update copies every key of o into m, in o's order (Python's dict.update).
func (m *Map) Update(o *Map) {
	for i, k := range o.keys {
		m.Set(k, o.vals[i])
	}
}

// Clone returns a deep copy.
func (m *Map) Clone() *Map {
	c := &Map{keys: append([]string(nil), m.keys...), vals: make([]any, len(m.vals))}
	for i, v := range m.vals {
		c.vals[i] = CloneValue(v)
	}
	return c
}

// CloneValue deep-copies maps and lists; scalars are returned as they are.
func CloneValue(v any) any {
	switch x := v.(type) {
	case *Map:
		return x.Clone()
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = CloneValue(e)
		}
		return c
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = CloneValue(e)
		}
		return c
	}
	return v
}

// MarshalJSON writes the map as a JSON object in key order.
func (m *Map) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// AppendJSON appends the JSON encoding of v (maps in order) to dst.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	err := writeJSON(b, v)
	return b.Bytes(), err
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case *Map:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeJSON(b, x.vals[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case string:
		writeString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		// JSON has no NaN or infinities (Python's json.dumps writes invalid
		// JSON for them); write YAML's spelling as a string.
		switch {
		case math.IsNaN(x):
			b.WriteString(`".nan"`)
		case math.IsInf(x, 1):
			b.WriteString(`".inf"`)
		case math.IsInf(x, -1):
			b.WriteString(`"-.inf"`)
		default:
			b.WriteString(PyFloat(x))
		}
	case *big.Int:
		b.WriteString(x.String())
	case json.Number:
		b.WriteString(string(x))
	default:
		enc, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encoding %T: %w", v, err)
		}
		b.Write(enc)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}

// PyFloatRepr is Python's repr() of any float: "nan", "inf", "-inf", and
// PyFloat's spelling of the finite ones.
func PyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return PyFloat(f)
}

// PyFloat formats f as Python's repr does: shortest round-trip digits, always
// with a decimal point or exponent ("1.0", "1.1", "1e+16").
func PyFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	abs := math.Abs(f)
	if abs >= 1e16 || abs < 1e-4 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+16, Python e+16; Go writes e-05, Python e-05.
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
