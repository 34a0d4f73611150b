package ruletest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// equal compares plain values exactly: maps by their keys and values,
// lists item by item, numbers by value (3 and 3.0 are equal, as in
// Python), other scalars by type and value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && sameNumber(x, y)
	}
	return a == b
}

// sameNumber compares two JSON numbers by value.
func sameNumber(a, b json.Number) bool {
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	if !okx || !oky {
		return a == b
	}
	return x.Cmp(y) == 0
}

// matches reports whether got has want's keys with matching values:
// nested maps compared the same way (on the keys want gives), lists
// exactly.
func matches(want, got any) bool {
	w, ok := want.(map[string]any)
	if !ok {
		return equal(want, got)
	}
	g, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range w {
		gv, ok := g[k]
		if !ok || !matches(v, gv) {
			return false
		}
	}
	return true
}

// differences lists, one line each, the keys of want that got lacks or
// holds another value for (nested maps by their dotted path).
func differences(want, got map[string]any, prefix string) []string {
	var out []string
	for _, k := range sortedKeys(want) {
		wv := want[k]
		gv, ok := got[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s%s: want %s, the chunk has no %s", prefix, k, compact(wv), k))
		case matches(wv, gv):
		default:
			wm, wIsMap := wv.(map[string]any)
			gm, gIsMap := gv.(map[string]any)
			if wIsMap && gIsMap {
				out = append(out, differences(wm, gm, prefix+k+".")...)
				continue
			}
			out = append(out, fmt.Sprintf("%s%s: want %s, got %s", prefix, k, compact(wv), compact(gv)))
		}
	}
	return out
}

// score is how many of want's keys got matches.
func score(want, got map[string]any) int {
	n := 0
	for k, v := range want {
		if gv, ok := got[k]; ok && matches(v, gv) {
			n++
		}
	}
	return n
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// indent prefixes each line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
