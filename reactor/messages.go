package reactor

// The reactor's log lines outside decisions (the decisions' are in
// specOf, record.go): short constants, the detail and the fix in
// attributes. docs/operating.md, under "Log messages", says what each
// warning and error means and what to do.
const (
	msgCopyUnknownLeft    = "could not tell if the event is another master's copy; left"
	msgCopyUnknownReacted = "could not tell if the event is another master's copy; reacting"
	fixCopyUnknown        = "the shared state (--dedupe-masters) is unreachable: check the NATS KV bucket"

	msgCollectLeftOut = "collection ended with events left out past its max"
	fixCollectFull    = "more events than the rule's collect max within its window; raise max"
	msgCollectEnded   = "collection ended: the rule reacts once for its events"

	msgRetrySucceeded  = "retried reaction succeeded"
	msgRetrying        = "reaction failed on minions; retrying them"
	msgRetryReadFailed = "could not read a reaction's pending retries; it runs whole"
	msgRetryResumed    = "resuming a reaction's retries: its event came back"
	msgRetryHandOver   = "stopping: shared state did not confirm the pending retries"
	msgRetryFailed     = "retry of a reaction failed to dispatch"
	fixShared          = "the shared state's NATS KV bucket is unreachable: check the NATS server"

	msgAwaitDispatch = "loop guard judged an event without a reaction's dispatch in flight"
	fixAwaitDispatch = "the driver took longer than the wait for it to answer: check the driver (its timeouts) and the master"

	msgDispatchedSince  = "reactions dispatched since the last count"
	msgDispatchedMinute = "reactions dispatched in the last minute"

	msgStopCollectedLeft    = "stopping: collected events left for redelivery"
	msgStopCollectedDropped = "stopping: collected events dropped"
	msgStopRetriesLeft      = "stopping: events of reactions awaiting a retry left for redelivery"
	msgStopQueuedLeft       = "stopping: events queued by a concurrency limit left for redelivery"
	msgStopQueuedDropped    = "stopping: events queued by a concurrency limit dropped"
	msgStopDebouncedLeft    = "stopping: debounced events left for redelivery"
	msgStopDebouncedDropped = "stopping: debounced events dropped"
	fixStopDropped          = "core NATS mode has no redelivery: use --jetstream"
)
