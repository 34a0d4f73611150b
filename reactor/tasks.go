package reactor

// The reactor's tasks (Reactor.tasks) are the goroutines it runs beside
// its lanes — a freed concurrency slot's resubmission, a retry's timer, a
// debounce's or a collection's end — so that Stop waits for them before
// it reports what the stop left and the daemon closes the driver and the
// store under them.

// runTask runs f now, counted until it returns. After Stop waited it runs
// uncounted: what f calls refuses a stopped reactor (Submit settles the
// event with Retry; a retry's timer finds its job given back).
func (r *Reactor) runTask(f func()) {
	if r.tasks.Enter() {
		defer r.tasks.Leave()
	}
	f()
}

// spawnTask runs f in a goroutine of its own, counted as runTask counts
// it.
func (r *Reactor) spawnTask(f func()) {
	if !r.tasks.Go(f) {
		go f()
	}
}
