package guard

import (
	"container/heap"
	"time"
)

// deadlines is a min-heap of things that may expire, by time. A concern
// pushes an item when it sets or moves its expiry and, when the item
// comes due, checks it still expires (a later push may have moved it).
type deadlines[T any] struct{ h timedHeap[T] }

type timed[T any] struct {
	at   time.Time
	item T
}

// push adds item, due at at.
func (d *deadlines[T]) push(at time.Time, item T) { heap.Push(&d.h, timed[T]{at, item}) }

// due removes and returns the items due by now, oldest first.
func (d *deadlines[T]) due(now time.Time) []T {
	var out []T
	for len(d.h) > 0 && !now.Before(d.h[0].at) {
		out = append(out, heap.Pop(&d.h).(timed[T]).item)
	}
	return out
}

// timedHeap implements heap.Interface for deadlines.
type timedHeap[T any] []timed[T]

func (h timedHeap[T]) Len() int           { return len(h) }
func (h timedHeap[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timedHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push is heap.Interface's; use deadlines.push.
func (h *timedHeap[T]) Push(x any) { *h = append(*h, x.(timed[T])) }

// Pop is heap.Interface's; use deadlines.due.
func (h *timedHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
