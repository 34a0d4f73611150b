package saltapi

// Queued reports how many reactions wait for a free request, for tests
// that line reactions up behind a held one.
func (d *Driver) Queued() int {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	return len(d.queue)
}
