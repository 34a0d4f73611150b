// Package poison finds the events that take the daemon down. Each lane
// writes the stream sequence of the event it handles into a slot of a
// small memory-mapped file, and clears it when done: a process that dies
// mid-event leaves the sequence behind, in the page cache if not on disk.
// The next start counts each sequence left behind as one crash in its
// suspects file; an event that was in hand at Threshold crashes is
// poisoned, and the daemon parks it instead of handling it again, so the
// events behind it flow.
package poison

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// Slots is the number of lanes the journal tracks; a lane beyond it
// shares a slot (detection then only weakens).
const Slots = 4096

// DefaultThreshold is the number of crashes with an event in hand after
// which it is poisoned.
const DefaultThreshold = 3

// maxSuspects bounds the suspects file; the lowest sequences go first.
const maxSuspects = 1024

const (
	journalName  = "inflight.map"
	suspectsName = "suspects.json"
)

// Journal is one process's record of the events in hand, and the crash
// counts its predecessors left. It is safe for concurrent use; each lane
// uses its own slot.
type Journal struct {
	dir       string
	threshold int
	f         *os.File
	// slotMu guards slots against Close: a lane still handling an event
	// when a stop's drain timed out ends it after the journal closed, and
	// must not write to unmapped memory.
	slotMu sync.RWMutex
	slots  []byte // Slots × 8 bytes, shared with the file; nil once closed

	any      atomic.Bool // suspects is not empty
	mu       sync.Mutex
	suspects map[uint64]int
	dirty    bool
}

// Open opens the journal under dir (created 0700), counts one crash for
// every event its predecessor left in hand, and clears the slots. It
// fails when another process holds the journal.
func Open(dir string, threshold int) (*Journal, []uint64, error) {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	j := &Journal{dir: dir, threshold: threshold, suspects: map[uint64]int{}}
	if b, err := os.ReadFile(filepath.Join(dir, suspectsName)); err == nil {
		var saved map[string]int
		if json.Unmarshal(b, &saved) == nil {
			for k, v := range saved {
				var seq uint64
				if _, err := fmt.Sscan(k, &seq); err == nil && seq > 0 && v > 0 {
					j.suspects[seq] = v
				}
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := lock(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s is in use by another process (give each replica its own --data-dir): %w", f.Name(), err)
	}
	if err := f.Truncate(Slots * 8); err != nil {
		f.Close()
		return nil, nil, err
	}
	slots, err := mapFile(f, Slots*8)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	j.f, j.slots = f, slots
	var left []uint64
	for i := range Slots {
		if seq := binary.LittleEndian.Uint64(slots[i*8:]); seq != 0 {
			left = append(left, seq)
			binary.LittleEndian.PutUint64(slots[i*8:], 0)
		}
	}
	slices.Sort(left)
	// An event in two places at the crash (its lane's and a driver call
	// it handed over) counts one crash.
	left = slices.Compact(left)
	for _, seq := range left {
		j.suspects[seq]++
	}
	for len(j.suspects) > maxSuspects {
		delete(j.suspects, slices.Min(slices.Collect(maps.Keys(j.suspects))))
	}
	j.any.Store(len(j.suspects) > 0)
	if len(left) > 0 {
		j.dirty = true
		if err := j.Save(); err != nil {
			j.Close()
			return nil, nil, err
		}
	}
	return j, left, nil
}

// Begin records that lane handles the event of stream sequence seq.
func (j *Journal) Begin(lane int, seq uint64) {
	if j == nil || seq == 0 {
		return
	}
	j.slotMu.RLock()
	if j.slots != nil {
		binary.LittleEndian.PutUint64(j.slots[(lane%Slots)*8:], seq)
	}
	j.slotMu.RUnlock()
}

// End records that lane is done with its event; an event that was a
// suspect is one no more.
func (j *Journal) End(lane int, seq uint64) {
	if j == nil || seq == 0 {
		return
	}
	j.slotMu.RLock()
	closed := j.slots == nil
	if !closed {
		binary.LittleEndian.PutUint64(j.slots[(lane%Slots)*8:], 0)
	}
	j.slotMu.RUnlock()
	if closed || !j.any.Load() {
		// Closed: the lock is released and a new process may own the
		// suspects file now.
		return
	}
	j.mu.Lock()
	_, ok := j.suspects[seq]
	if ok {
		delete(j.suspects, seq)
		j.dirty = true
		j.any.Store(len(j.suspects) > 0)
	}
	j.mu.Unlock()
	if ok {
		_ = j.Save() // rare: only after a crash
	}
}

// Crashes returns how many times the process died with the event of
// sequence seq in hand, and whether that makes it poisoned.
func (j *Journal) Crashes(seq uint64) (int, bool) {
	if j == nil || seq == 0 || !j.any.Load() {
		return 0, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.suspects[seq]
	return n, n >= j.threshold
}

// Parked forgets a poisoned event once it was parked.
func (j *Journal) Parked(seq uint64) {
	if j == nil {
		return
	}
	j.mu.Lock()
	delete(j.suspects, seq)
	j.dirty = true
	j.any.Store(len(j.suspects) > 0)
	j.mu.Unlock()
	_ = j.Save()
}

// Save writes the suspects file if it changed.
func (j *Journal) Save() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	if !j.dirty {
		j.mu.Unlock()
		return nil
	}
	saved := make(map[string]int, len(j.suspects))
	for seq, n := range j.suspects {
		saved[fmt.Sprint(seq)] = n
	}
	j.dirty = false
	j.mu.Unlock()
	b, _ := json.Marshal(saved)
	tmp := filepath.Join(j.dir, suspectsName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(j.dir, suspectsName))
}

// Close saves the suspects and releases the journal; the slots are all
// clear after a clean stop. An event still in hand (a stop whose drain
// timed out) stays in its slot, a suspect at the next start; its End,
// after Close, does nothing.
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	err := j.Save()
	j.slotMu.Lock()
	if j.slots != nil {
		err = errors.Join(err, unmapFile(j.slots))
		j.slots = nil
	}
	j.slotMu.Unlock()
	return errors.Join(err, j.f.Close())
}
