package schemas

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// maxDepth bounds the nesting normalize follows, so a cyclic value yields a
// violation instead of a stack overflow.
const maxDepth = 1000

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// normalize converts v into the value model the validator understands:
// map[string]any, []any, string, bool, nil, json.Number and Go numbers.
// Values already in that model are copied only where a nested value needs
// conversion. Anything that cannot be expressed in JSON (a map with a
// non-string key, NaN, a channel...) is reported as a violation at its
// pointer.
func normalize(v any) (any, []Violation) {
	n := normalizer{}
	out := n.value(v, nil)
	return out, n.violations
}

type normalizer struct {
	violations []Violation
}

func (n *normalizer) fail(path []string, format string, args ...any) any {
	n.violations = append(n.violations, Violation{Pointer: pointer(path), Message: fmt.Sprintf(format, args...)})
	return nil
}

func (n *normalizer) value(v any, path []string) any {
	if len(path) > maxDepth {
		return n.fail(path, "value nested more than %d levels deep (cyclic?)", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, json.Number,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return v
	case float64:
		return n.float(x, path)
	case float32:
		return n.float(float64(x), path)
	case json.RawMessage:
		return n.raw(x, path)
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			ne := n.value(e, append(path, k))
			if out == nil && !same(ne, e) {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			if out != nil {
				out[k] = ne
			}
		}
		if out == nil {
			return x
		}
		return out
	case []any:
		var out []any
		for i, e := range x {
			ne := n.value(e, append(path, strconv.Itoa(i)))
			if out == nil && !same(ne, e) {
				out = make([]any, len(x))
				copy(out, x)
			}
			if out != nil {
				out[i] = ne
			}
		}
		if out == nil {
			return x
		}
		return out
	}
	return n.reflectValue(reflect.ValueOf(v), path)
}

// same reports whether normalisation left a value unchanged; only then can
// the original container be reused.
func same(a, b any) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta == nil {
		return true
	}
	switch ta.Kind() {
	case reflect.Map, reflect.Slice:
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	return true
}

func (n *normalizer) float(f float64, path []string) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return n.fail(path, "number %v cannot be represented in JSON", f)
	}
	return f
}

func (n *normalizer) raw(r json.RawMessage, path []string) any {
	d := json.NewDecoder(bytes.NewReader(r))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return n.fail(path, "invalid JSON: %v", err)
	}
	return v
}

// reflectValue handles every type outside the plain JSON model.
func (n *normalizer) reflectValue(rv reflect.Value, path []string) any {
	if rv.Type().Implements(jsonMarshalerType) || rv.Type().Implements(textMarshalerType) {
		if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
			return nil
		}
		return n.viaJSON(rv.Interface(), path)
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return n.value(rv.Elem().Interface(), path)
	case reflect.Bool:
		return rv.Bool()
	case reflect.String:
		return rv.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint()
	case reflect.Float32, reflect.Float64:
		return n.float(rv.Float(), path)
	case reflect.Map:
		if rv.IsNil() {
			return nil
		}
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key()
			for k.Kind() == reflect.Interface && !k.IsNil() {
				k = k.Elem()
			}
			if k.Kind() != reflect.String {
				n.fail(path, "mapping key %v (%s) is not a string; quote it", k, k.Type())
				continue
			}
			out[k.String()] = n.value(iter.Value().Interface(), append(path, k.String()))
		}
		return out
	case reflect.Slice:
		if rv.IsNil() {
			return nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return n.viaJSON(rv.Interface(), path) // []byte is a base64 string in JSON
		}
		fallthrough
	case reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = n.value(rv.Index(i).Interface(), append(path, strconv.Itoa(i)))
		}
		return out
	case reflect.Struct:
		return n.viaJSON(rv.Interface(), path)
	}
	return n.fail(path, "a value of type %s cannot be represented in JSON", rv.Type())
}

// viaJSON converts v by a round trip through encoding/json.
func (n *normalizer) viaJSON(v any, path []string) any {
	b, err := json.Marshal(v)
	if err != nil {
		return n.fail(path, "cannot encode %T as JSON: %v", v, err)
	}
	return n.raw(b, path)
}
