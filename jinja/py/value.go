package py

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/reactord/reactord/event"
)

// Text renders a value the way Salt's Jinja would print it in text:
// Python's spelling of booleans, None and structures (repr).
func Text(v any) string {
	switch x := v.(type) {
	case string, nil, bool, int64, int, float64, *event.Map, []any, map[string]any, pyTuple, YAMLQuoted, json.Number:
		return Str(x) // Python's str(): repr for structures, nested too
	case fmt.Stringer:
		return x.String()
	case error:
		return x.Error()
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		// Jinja prints Python's repr: ['a', None, True], {'k': 1}.
		if nv := normalizeValue(v); nv != nil {
			return reprOf(nv)
		}
	}
	return fmt.Sprint(v)
}

// normalizeValue converts Go values from event data or template functions
// into the value forms reactord passes around: *event.Map, []any, string,
// bool, int64, float64, json.Number, nil. It returns nil for values it does
// not know.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int64, float64, json.Number:
		return x
	case int:
		return int64(x)
	case *event.Map:
		return x.Clone()
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := event.NewMap(len(keys))
		for _, k := range keys {
			out.Set(k, normalizeValue(x[k]))
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = normalizeValue(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil
		}
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		out := event.NewMap(len(keys))
		for _, k := range keys {
			out.Set(k.String(), normalizeValue(rv.MapIndex(k).Interface()))
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := rv.Uint(); u <= 1<<63-1 {
			return int64(u)
		}
		return json.Number(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.Bool:
		return rv.Bool()
	case reflect.String:
		return rv.String()
	}
	return nil
}

// Bytes is a Python bytes value (YAML's !!binary); its JSON form is a
// string.
type Bytes string
