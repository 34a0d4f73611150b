package reactor

import (
	"sync/atomic"
	"time"
)

// Delivery is one event handed to the reactor by a source.
type Delivery struct {
	// Body is the envelope JSON {"tag", "data"}.
	Body []byte
	// Received is when the source got it (for latency).
	Received time.Time
	// Sent is when the publisher sent it, when known (for latency).
	Sent time.Time
	// Hop is the number of reactions that led to this event.
	Hop int
	// Seq is the event's JetStream stream sequence (0 in core mode): it
	// tells a redelivery from another master's copy (Options.Copy).
	Seq uint64
	// MsgID is the publisher's message id for the event (Nats-Msg-Id),
	// when it gave one; each reaction's actions.Action.Key derives from
	// it.
	MsgID string

	// Settle ends the delivery. The reactor calls it exactly once for
	// each delivery Submit was given, refused ones too: Ack once the
	// event's reactions were dispatched or deliberately dropped and, with
	// an Archive, its archive records are durable (written, or in the
	// store's disk spool), so a crash loses no record of an acknowledged
	// event; Retry when it could not be handled now; Leave when it is no
	// longer this replica's. nil: nothing to settle.
	Settle func(Outcome)
	// Redelivers is set when a Retry brings the event back (JetStream).
	// The reactor then leaves an event it cannot handle now (the store
	// full, a copy check failing) for later; without it (core NATS) it
	// goes on, as nothing would bring the event back.
	Redelivers bool
	// Owned, when set, reports whether the event is still this replica's
	// (--partitions: its partition may move to another replica while the
	// event waits in its lane). An event no longer owned is not handled
	// here, so that it never runs alongside the new owner, which handles
	// it again from its acknowledgement floor; it is counted in
	// reactord_suppressed_total{reason="partition_moved"} and settled
	// with Leave.
	Owned func() bool

	// id is the event's id, given by Submit.
	id string
	// resume, set on an event a gate held for one rule and let go, makes
	// it resume at render for that rule alone (resubmit).
	resume *held
	// tag and raw are the envelope, split by Submit (once per event);
	// split is set once they are; minion is the event's minion
	// (event.MinionOf), found then too.
	tag    string
	raw    []byte
	split  bool
	minion string
}

// Outcome is how a delivery ends (Delivery.Settle).
type Outcome uint8

const (
	// Ack acknowledges the event: it was handled.
	Ack Outcome = iota + 1
	// Retry asks for the event again later (JetStream redelivers it; core
	// NATS cannot).
	Retry
	// Leave neither acknowledges nor refuses the event: another replica
	// owns it now.
	Leave
)

// settle ends the delivery with o, when it has something to settle.
func (dl *Delivery) settle(o Outcome) {
	if dl.Settle != nil {
		dl.Settle(o)
	}
}

// eventHold keeps an event unacknowledged while debounces hold it: its
// handling and each debounce holding it count one, and the last to let go
// acknowledges it, or refuses it (Retry) if any of them gave up.
type eventHold struct {
	n       atomic.Int32
	abandon atomic.Bool
	settle  func(nak bool)
}

func (h *eventHold) let(abandon bool) {
	if abandon {
		h.abandon.Store(true)
	}
	if h.n.Add(-1) == 0 {
		h.settle(h.abandon.Load())
	}
}
