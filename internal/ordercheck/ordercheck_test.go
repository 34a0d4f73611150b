package ordercheck

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		seen                    map[string][]int
		distinct, dups, outOfOr int
	}{
		{"in order", map[string][]int{"a": {0, 1, 2}, "b": {0}}, 4, 0, 0},
		{"a duplicate", map[string][]int{"a": {0, 1, 1, 2}}, 3, 1, 0},
		{"redelivered after later ones", map[string][]int{"a": {0, 2, 1, 3}}, 3, 1, 1},
		{"nothing", map[string][]int{}, 0, 0, 0},
	} {
		d, dup, o := Count(tc.seen)
		if d != tc.distinct || dup != tc.dups || o != tc.outOfOr {
			t.Errorf("%s: %d %d %d, want %d %d %d", tc.name, d, dup, o, tc.distinct, tc.dups, tc.outOfOr)
		}
	}
}
