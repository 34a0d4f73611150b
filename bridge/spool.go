package bridge

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	diskspool "github.com/reactord/reactord/internal/spool"
)

// item is one event on its way to NATS.
type item struct {
	tag   string
	body  []byte
	msgID string
}

// size is what an item costs in memory.
func (it item) size() int64 { return int64(len(it.tag) + len(it.body) + len(it.msgID) + 64) }

// recordSize is what an item takes in the spool file: its frame header
// and its record (see encodeItem).
func (it item) recordSize() int64 { return int64(8 + 4 + len(it.tag) + len(it.body) + len(it.msgID)) }

// spool is a FIFO of events that never blocks its writer: it holds up to
// memLimit bytes in memory, then up to diskLimit bytes in a disk spool
// (internal/spool) under dir, and refuses (the caller counts the drop) past
// both. Every item in memory is older than every item on disk: once the
// file holds something, new items go to the file until the reader has
// emptied it, so order is kept.
type spool struct {
	mu       sync.Mutex
	ready    chan struct{} // signalled (non-blocking) on every push
	mem      []item
	memHead  int
	memBytes int64
	memLimit int64

	disk     *diskspool.File // nil when there is no disk spool
	path     string
	diskErr  error // the file failed: memory only from then on
	lost     int   // records a damaged file lost, not yet reported
	closed   bool
	restored int   // items found in the file at open
	torn     int64 // bytes cut from the file at open: a record written in part

	// Handed out by next and not released yet (they stay in the spool,
	// and close keeps them): the first outMem items in memory, then the
	// disk records whose frame sizes diskOut holds (diskOutBytes in all).
	// diskAhead are the records read from the file after those, not
	// handed out yet.
	outMem       int
	diskOut      []int64
	diskOutBytes int64
	diskAhead    []item
	aheadSizes   []int64
}

// diskReadAhead is how many records next reads from the file at once.
const diskReadAhead = 256

// spoolName names the bridge's disk spool under its data directory.
const spoolName = "bridge-events"

// legacySpoolFile is the spool file of reactord before the disk spool
// was shared with the store: its events are moved into the new one.
const legacySpoolFile = "bridge-spool.dat"

// newSpool opens a spool; with dir it reopens the file an earlier run left,
// whose items come first.
func newSpool(dir string, memLimit, diskLimit int64) (*spool, error) {
	s := &spool{ready: make(chan struct{}, 1), memLimit: memLimit}
	if dir == "" || diskLimit <= 0 {
		return s, nil
	}
	// Synced: what the spool holds, the master no longer does.
	disk, restored, torn, err := diskspool.Open(dir, spoolName, diskspool.Options{Limit: diskLimit, Sync: true})
	if err != nil {
		return nil, err
	}
	s.disk, s.path, s.restored, s.torn = disk, disk.Path(), restored, torn
	n, err := s.migrate(filepath.Join(dir, legacySpoolFile))
	if err != nil {
		disk.Close()
		return nil, err
	}
	s.restored += n
	if s.disk.Len() > 0 {
		s.signal()
	}
	return s, nil
}

// migrate moves the events of a legacy spool file into the disk spool and
// removes the file.
func (s *spool) migrate(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		it, err := readLegacyRecord(br)
		if err != nil {
			break // the end, or a record written in part
		}
		if err := s.disk.Append(encodeItem(it)); err != nil {
			return n, fmt.Errorf("moving %s into %s: %w", path, s.disk.Path(), err)
		}
		n++
	}
	return n, os.Remove(path)
}

func (s *spool) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// diskLen is the number of items on disk; s.mu is held.
func (s *spool) diskLen() int {
	if s.disk == nil {
		return 0
	}
	return s.disk.Len()
}

// push adds an item; it reports where it went: "memory", "disk", or "" when
// both are full (the item is dropped).
func (s *spool) push(it item) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("spool closed")
	}
	sz := it.size()
	if s.diskLen() == 0 && s.memBytes+sz <= s.memLimit {
		s.mem = append(s.mem, it)
		s.memBytes += sz
		s.signal()
		return "memory", nil
	}
	if len(it.tag) > 0xffff || len(it.msgID) > 0xffff {
		return "", errors.New("tag or message id over 64 KiB")
	}
	if s.disk == nil || s.diskErr != nil {
		return "", nil
	}
	switch err := s.disk.Append(encodeItem(it)); {
	case errors.Is(err, diskspool.ErrFull):
		return "", nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// The file system is full: this event is dropped (Append
		// wrote none of it), the file stays in use for when there is
		// room again.
		return "", err
	case err != nil:
		s.diskErr = err
		return "", err
	}
	s.signal()
	return "disk", nil
}

// pop waits for the oldest item and removes it.
func (s *spool) pop(ctx context.Context) (item, bool) {
	for {
		if it, ok := s.tryPop(); ok {
			return it, true
		}
		select {
		case <-ctx.Done():
			return item{}, false
		case <-s.ready:
		}
	}
}

// popMem takes the oldest item off the memory queue (s.mu held; one is
// there).
func (s *spool) popMem() item {
	it := s.mem[s.memHead]
	s.mem[s.memHead] = item{}
	s.memHead++
	s.memBytes -= it.size()
	return it
}

// compactMem gives the memory queue's taken head back (s.mu held): all of
// it when the queue is empty, else once it is most of the slice.
func (s *spool) compactMem() {
	if s.memHead == len(s.mem) {
		s.mem, s.memHead = s.mem[:0], 0
	} else if s.memHead > 1024 && s.memHead*2 > len(s.mem) {
		s.mem = append(s.mem[:0], s.mem[s.memHead:]...)
		s.memHead = 0
	}
}

// tryPop removes the oldest item, if there is one.
func (s *spool) tryPop() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memHead < len(s.mem) {
		it := s.popMem()
		s.compactMem()
		return it, true
	}
	if s.diskLen() == 0 || s.diskErr != nil {
		return item{}, false
	}
	recs, off, err := s.disk.Peek(1)
	var it item
	if err == nil {
		it, err = decodeItem(recs[0])
	}
	if err == nil {
		err = s.disk.Advance(1, off)
	}
	if err != nil {
		// A record written but unreadable: the file is damaged. The rest
		// is lost (takeLost reports it) rather than spin.
		s.diskErr = fmt.Errorf("reading spool file %s: %w", s.path, err)
		s.lost += s.disk.Len()
		_ = s.disk.Reset()
		return item{}, false
	}
	return it, true
}

// next hands out the oldest item not handed out yet, leaving it in the
// spool until release (or rewind) says what became of it; it never waits.
// Items are handed out in order: those in memory, then those on disk.
func (s *spool) next() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memHead+s.outMem < len(s.mem) {
		it := s.mem[s.memHead+s.outMem]
		s.outMem++
		return it, true
	}
	if len(s.diskAhead) == 0 {
		if s.diskErr != nil || s.diskLen() <= len(s.diskOut) {
			return item{}, false
		}
		recs, sizes, err := s.disk.PeekAt(s.diskOutBytes, diskReadAhead)
		for i := 0; err == nil && i < len(recs); i++ {
			var it item
			if it, err = decodeItem(recs[i]); err == nil {
				s.diskAhead, s.aheadSizes = append(s.diskAhead, it), append(s.aheadSizes, sizes[i])
			}
		}
		if err != nil {
			// A record written but unreadable: the file is damaged. The
			// records from there on are lost (takeLost reports them);
			// the file is emptied once those handed out are released.
			s.diskErr = fmt.Errorf("reading spool file %s: %w", s.path, err)
			s.lost += s.diskLen() - len(s.diskOut) - len(s.diskAhead)
			if len(s.diskAhead) == 0 {
				s.resetDamaged()
				return item{}, false
			}
		}
	}
	it, size := s.diskAhead[0], s.aheadSizes[0]
	s.diskAhead[0] = item{}
	s.diskAhead, s.aheadSizes = s.diskAhead[1:], s.aheadSizes[1:]
	s.diskOut = append(s.diskOut, size)
	s.diskOutBytes += size
	return it, true
}

// release removes the n oldest items handed out: they were published.
func (s *spool) release(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; n > 0 && s.outMem > 0; n-- {
		s.outMem--
		s.popMem()
	}
	s.compactMem()
	if n <= 0 {
		return nil
	}
	if n > len(s.diskOut) {
		return fmt.Errorf("spool: releasing %d items more than were handed out", n-len(s.diskOut))
	}
	var bytes int64
	for _, sz := range s.diskOut[:n] {
		bytes += sz
	}
	s.diskOut = s.diskOut[n:]
	s.diskOutBytes -= bytes
	if s.diskErr != nil && len(s.diskOut) == 0 && len(s.diskAhead) == 0 {
		s.resetDamaged()
		return nil
	}
	if err := s.disk.Drop(n, bytes); err != nil {
		return err
	}
	return nil
}

// resetDamaged empties a damaged file once nothing read from it is held;
// s.mu is held.
func (s *spool) resetDamaged() {
	_ = s.disk.Reset()
	s.diskOut, s.diskOutBytes, s.diskAhead, s.aheadSizes = nil, 0, nil, nil
}

// rewind takes back every item handed out and not released: next hands
// them out again, from the oldest.
func (s *spool) rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outMem = 0
	s.diskOut, s.diskOutBytes, s.diskAhead, s.aheadSizes = nil, 0, nil, nil
	s.signal()
}

// takeLost reports (once) how many records a damaged file lost, and why.
func (s *spool) takeLost() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.lost
	s.lost = 0
	return n, s.diskErr
}

// unpop puts back the item pop returned last, in front of the others.
func (s *spool) unpop(it item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memHead > 0 {
		s.memHead--
		s.mem[s.memHead] = it
	} else {
		s.mem = append([]item{it}, s.mem...)
	}
	s.memBytes += it.size()
	s.signal()
}

// len reports the items held in memory and on disk.
func (s *spool) len() (mem, disk int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bytes = s.memBytes
	if s.disk != nil {
		bytes += s.disk.Bytes()
	}
	return len(s.mem) - s.memHead, s.diskLen(), bytes
}

// close persists what memory still holds in front of what the file holds, so
// the next run publishes it first. Without a disk spool, it reports how many
// items are lost.
func (s *spool) close() (lost int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, nil
	}
	s.closed = true
	pending := s.mem[s.memHead:]
	if s.disk == nil {
		return len(pending), nil
	}
	defer s.disk.Close()
	recs := make([][]byte, len(pending))
	for i, it := range pending {
		recs[i] = encodeItem(it)
	}
	if err := s.disk.Prepend(recs...); err != nil {
		return len(pending) + s.disk.Len(), err
	}
	return 0, nil
}

// encodeItem is an item's record in the disk spool: uint16 tag length,
// tag, uint16 message id length, id, body.
func encodeItem(it item) []byte {
	b := make([]byte, 0, 4+len(it.tag)+len(it.msgID)+len(it.body))
	b = binary.BigEndian.AppendUint16(b, uint16(len(it.tag)))
	b = append(b, it.tag...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(it.msgID)))
	b = append(b, it.msgID...)
	return append(b, it.body...)
}

// decodeItem reads what encodeItem wrote.
func decodeItem(b []byte) (item, error) {
	if len(b) < 2 {
		return item{}, errors.New("bad record")
	}
	tl := int(binary.BigEndian.Uint16(b))
	if 2+tl+2 > len(b) {
		return item{}, errors.New("bad record")
	}
	tag := string(b[2 : 2+tl])
	il := int(binary.BigEndian.Uint16(b[2+tl:]))
	if 4+tl+il > len(b) {
		return item{}, errors.New("bad record")
	}
	return item{tag: tag, msgID: string(b[4+tl : 4+tl+il]), body: b[4+tl+il:]}, nil
}

// readLegacyRecord reads one record of a legacy spool file: uint32 total
// length, then what encodeItem writes.
func readLegacyRecord(r *bufio.Reader) (item, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return item{}, err
	}
	total := int(binary.BigEndian.Uint32(hdr[:]))
	if total < 4 || total > 256<<20 {
		return item{}, fmt.Errorf("bad record length %d", total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return item{}, err
	}
	return decodeItem(buf)
}
