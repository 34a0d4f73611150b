// Package ordercheck tells, from the numbers of the events each key (a
// minion) saw handled, in the order they were handled, how many were
// distinct, handled twice, or handled before an earlier event of their key:
// the order tests of partitioned and replicated consumption share it.
package ordercheck

// Count reads seen, each key's event numbers (0, 1, 2, ... as published)
// in the order they were handled: a number not above the highest so far is
// a duplicate, one past it is in order, a larger one skipped an earlier
// event (out of order).
func Count(seen map[string][]int) (distinct, dups, outOfOrder int) {
	for _, ns := range seen {
		top := -1
		for _, n := range ns {
			switch {
			case n <= top:
				dups++
			case n == top+1:
				top = n
				distinct++
			default:
				outOfOrder++
				top = n
				distinct++
			}
		}
	}
	return distinct, dups, outOfOrder
}
