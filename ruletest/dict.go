package ruletest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reactord/reactord/event"
)

// jsonMarshal encodes a value a render passes (event maps in order).
func jsonMarshal(v any) ([]byte, error) { return event.AppendJSON(nil, v) }

// dictCall answers the pillar, grains and config functions from the
// stubs' maps, with Salt's signatures: key, then default (an empty
// string when the call gives none), then delimiter (a colon). ok is false
// when the function is none of them or its map is not given.
func (s *Stubs) dictCall(fun string, args []any, kwargs map[string]any) (v any, ok bool, err error) {
	mod, name, _ := strings.Cut(fun, ".")
	var m map[string]any
	switch mod {
	case "pillar":
		m = s.Pillar
	case "grains":
		m = s.Grains
	case "config":
		m = s.Opts
	default:
		return nil, false, nil
	}
	if m == nil {
		return nil, false, nil
	}
	a := callArgs{args: args, kwargs: kwargs}
	switch mod + "." + name {
	case "pillar.items", "grains.items", "config.items":
		return m, true, nil
	case "pillar.get", "grains.get":
		v, _ := traverse(m, a.str(0, "key", ""), a.str(-1, "delimiter", ":"), a.get(1, "default", ""))
		return v, true, nil
	case "config.get":
		key, delim, def := a.str(0, "key", ""), a.str(-1, "delimiter", ":"), a.get(1, "default", "")
		for _, src := range []map[string]any{s.Opts, s.Grains, s.Pillar} {
			if v, found := traverse(src, key, delim, nil); found {
				return v, true, nil
			}
		}
		return def, true, nil
	case "config.option":
		key, def := a.str(0, "value", ""), a.get(1, "default", "")
		for _, src := range []map[string]any{s.Opts, s.Pillar} {
			if v, found := src[key]; found {
				return v, true, nil
			}
		}
		return def, true, nil
	case "pillar.item", "grains.item":
		out := map[string]any{}
		delim, def := a.str(-1, "delimiter", ":"), a.get(-1, "default", "")
		for _, k := range args {
			key := fmt.Sprint(k)
			out[key], _ = traverse(m, key, delim, def)
		}
		return out, true, nil
	case "pillar.raw":
		if key := a.str(0, "key", ""); key != "" {
			v, found := m[key]
			if !found {
				v = map[string]any{}
			}
			return v, true, nil
		}
		return m, true, nil
	case "pillar.keys", "grains.ls":
		sub := any(m)
		if mod == "pillar" {
			sub, _ = traverse(m, a.str(0, "key", ""), a.str(-1, "delimiter", ":"), nil)
		}
		d, isMap := sub.(map[string]any)
		if !isMap {
			return nil, true, fmt.Errorf("%q is not a dictionary in the stubbed %s", a.str(0, "key", ""), mod)
		}
		keys := make([]any, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y any) int { return strings.Compare(x.(string), y.(string)) })
		return keys, true, nil
	}
	return nil, false, nil
}

// callArgs are a call's arguments, read by position or keyword.
type callArgs struct {
	args   []any
	kwargs map[string]any
}

// get returns the argument at position i (-1: by keyword only) or named
// name, def when the call gives neither.
func (a callArgs) get(i int, name string, def any) any {
	if v, ok := a.kwargs[name]; ok {
		return v
	}
	if i >= 0 && i < len(a.args) {
		return a.args[i]
	}
	return def
}

// str is get for a string argument.
func (a callArgs) str(i int, name, def string) string {
	switch v := a.get(i, name, def).(type) {
	case string:
		return v
	case nil:
		return def
	default:
		return fmt.Sprint(v)
	}
}

// traverse looks key up in m as Salt's traverse_dict_and_list does: each
// part of key between delimiters a map's key or a list's index. def is
// returned, with found false, when a part is missing.
func traverse(m map[string]any, key, delim string, def any) (v any, found bool) {
	if m == nil {
		return def, false
	}
	if key == "" {
		return m, true
	}
	cur := any(m)
	for part := range strings.SplitSeq(key, delim) {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[part]
			if !ok {
				return def, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return def, false
			}
			cur = c[i]
		default:
			return def, false
		}
	}
	return cur, true
}
