package execdriver

// Queued reports how many reactions wait for a free slot, for tests that
// line reactions up behind a held one.
func (d *Driver) Queued() int {
	n := 0
	for _, p := range []*pool{&d.jobs, &d.calls} {
		p.mu.Lock()
		n += len(p.queue)
		p.mu.Unlock()
	}
	return n
}
