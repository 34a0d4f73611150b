package reactor

import "time"

// The defaults New applies to zero Options, which the daemon's flags show
// as theirs.
const (
	// DefaultLanes is the number of ordered worker lanes (Options.Lanes).
	DefaultLanes = 8
	// DefaultQueueSize bounds each lane's queue (Options.QueueSize).
	DefaultQueueSize = 1024
	// DefaultInFlight is how many driver calls a lane may have in flight
	// (Options.InFlight).
	DefaultInFlight = 8
	// DefaultHandOverAfter is how long a lane waits for a driver call
	// that does not say when its request left before it hands the call
	// over (Options.HandOverAfter).
	DefaultHandOverAfter = 50 * time.Millisecond
	// DefaultMaxHops is the hop limit (Options.MaxHops): events that
	// reactions caused more times in a row are suppressed.
	DefaultMaxHops = 3
)

// answersAtOnce is a driver whose calls return without a round trip to
// Salt (dryrun, null, nats): handing such a call over would cost more than
// waiting for it.
type answersAtOnce interface {
	AnswersAtOnce() bool
}

// defaultInFlight is Options.InFlight's default for drv: 1 for a driver
// that answers at once, DefaultInFlight for one that waits for Salt.
func defaultInFlight(drv any) int {
	if q, ok := drv.(answersAtOnce); ok && q.AnswersAtOnce() {
		return 1
	}
	return DefaultInFlight
}
