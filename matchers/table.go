package matchers

import (
	"slices"
	"strings"
)

// Table is an ordered list of reactor rules, each a compiled glob whose
// payload is identified by its position in the list.
//
// Rules are indexed by their literal prefixes in a radix tree, so a lookup
// only runs the full matcher for rules whose prefix the tag starts with. A
// Table is immutable once built and safe for concurrent use.
type Table struct {
	globs []*Glob
	root  *node
}

// node is a radix tree node keyed by literal pattern prefixes.
type node struct {
	// label is the text on the edge from the parent to this node.
	label string
	// firsts holds the first byte of each child's label, in kids order.
	firsts string
	kids   []*node
	// own lists the rules whose prefix ends exactly at this node.
	own []int32
	// cands lists, in ascending order, every rule whose prefix is a prefix
	// of the text spelled from the root to this node.
	cands []int32
}

// NewTable compiles patterns into a rule table. Rule i is patterns[i];
// duplicate patterns are kept as separate rules.
func NewTable(patterns []string) *Table {
	t := &Table{globs: make([]*Glob, len(patterns)), root: &node{}}
	for i, p := range patterns {
		g := Compile(p)
		t.globs[i] = g
		if g.never {
			continue
		}
		t.root.insert(g.prefix, int32(i))
	}
	t.root.finish(nil)
	return t
}

// Len returns the number of rules in t.
func (t *Table) Len() int {
	return len(t.globs)
}

// Match appends to dst the index of every rule that matches tag, in rule
// order, and returns the extended slice. It does not allocate when dst has
// enough spare capacity.
func (t *Table) Match(tag string, dst []int) []int {
	n := t.root
	rest := tag
	for len(rest) > 0 {
		i := strings.IndexByte(n.firsts, rest[0])
		if i < 0 {
			break
		}
		kid := n.kids[i]
		if !strings.HasPrefix(rest, kid.label) {
			break
		}
		rest = rest[len(kid.label):]
		n = kid
	}
	for _, ri := range n.cands {
		g := t.globs[ri]
		if len(tag) >= g.minLen && g.matchRest(tag) {
			dst = append(dst, int(ri))
		}
	}
	return dst
}

// insert records rule idx under key, splitting edges as needed.
func (n *node) insert(key string, idx int32) {
	for key != "" {
		i := strings.IndexByte(n.firsts, key[0])
		if i < 0 {
			kid := &node{label: key, own: []int32{idx}}
			n.firsts += key[:1]
			n.kids = append(n.kids, kid)
			return
		}
		kid := n.kids[i]
		common := commonPrefix(kid.label, key)
		if common < len(kid.label) {
			// Split the edge: mid takes the shared part of the label.
			mid := &node{
				label:  kid.label[:common],
				firsts: kid.label[common : common+1],
				kids:   []*node{kid},
			}
			kid.label = kid.label[common:]
			n.kids[i] = mid
			kid = mid
		}
		key = key[common:]
		n = kid
	}
	n.own = append(n.own, idx)
}

// finish fills in the candidate lists of n and its descendants, given the
// candidates inherited from the ancestors of n.
func (n *node) finish(inherited []int32) {
	cands := inherited
	if len(n.own) > 0 {
		cands = make([]int32, 0, len(inherited)+len(n.own))
		cands = append(cands, inherited...)
		cands = append(cands, n.own...)
		slices.Sort(cands)
	}
	n.cands = cands
	for _, kid := range n.kids {
		kid.finish(cands)
	}
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
