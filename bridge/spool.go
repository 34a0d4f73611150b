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
)

// item is one event on its way to NATS.
type item struct {
	tag   string
	body  []byte
	msgID string
}

// size is what an item costs in memory.
func (it item) size() int64 { return int64(len(it.tag) + len(it.body) + len(it.msgID) + 64) }

// recordSize is what an item takes in the spool file.
func (it item) recordSize() int64 { return int64(8 + len(it.tag) + len(it.body) + len(it.msgID)) }

// spool is a FIFO of events that never blocks its writer: it holds up to
// memLimit bytes in memory, then up to diskLimit bytes in a file under dir,
// and refuses (the caller counts the drop) past both. Every item in memory is
// older than every item on disk: once the file holds something, new items go
// to the file until the reader has emptied it, so order is kept.
type spool struct {
	mu        sync.Mutex
	ready     chan struct{} // signalled (non-blocking) on every push
	mem       []item
	memHead   int
	memBytes  int64
	memLimit  int64
	diskLimit int64

	path     string // "" when there is no disk spool
	file     *os.File
	w        *bufio.Writer
	wOff     int64 // bytes written to the file
	rOff     int64 // bytes of the file already read back
	diskN    int   // items in the file not yet read
	diskErr  error // the file failed: memory only from then on
	lost     int   // records a damaged file lost, not yet reported
	closed   bool
	restored int   // items found in the file at open
	torn     int64 // bytes cut from the file at open: a record written in part
}

const spoolFile = "bridge-spool.dat"

// newSpool opens a spool; with dir it reopens the file an earlier run left,
// whose items come first.
func newSpool(dir string, memLimit, diskLimit int64) (*spool, error) {
	s := &spool{ready: make(chan struct{}, 1), memLimit: memLimit, diskLimit: diskLimit}
	if dir == "" || diskLimit <= 0 {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	s.path = filepath.Join(dir, spoolFile)
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.file = f
	// Count what an earlier run left, and cut a torn last record.
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), 1<<20)
	var off int64
	for {
		_, n, err := readRecord(br)
		if err != nil {
			break
		}
		off += n
		s.diskN++
	}
	if st, err := f.Stat(); err == nil {
		s.torn = st.Size() - off
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.wOff = off
	s.restored = s.diskN
	s.w = bufio.NewWriterSize(&offsetWriter{f: f, off: &s.wOff}, 1<<16)
	if s.diskN > 0 {
		s.signal()
	}
	return s, nil
}

// offsetWriter writes at a growing offset, so reads elsewhere in the file do
// not move it.
type offsetWriter struct {
	f   *os.File
	off *int64
}

func (o *offsetWriter) Write(p []byte) (int, error) {
	n, err := o.f.WriteAt(p, *o.off)
	*o.off += int64(n)
	return n, err
}

func (s *spool) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
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
	if s.diskN == 0 && s.memBytes+sz <= s.memLimit {
		s.mem = append(s.mem, it)
		s.memBytes += sz
		s.signal()
		return "memory", nil
	}
	if len(it.tag) > 0xffff || len(it.msgID) > 0xffff {
		return "", errors.New("tag or message id over 64 KiB")
	}
	if s.file != nil && s.diskErr == nil && s.wOff+it.recordSize() > s.diskLimit && s.rOff > 0 {
		// The file's read part is dead space: move the unread records to
		// the front, so the file itself stays within the bound.
		if err := s.compact(); err != nil {
			s.diskErr = err
			return "", fmt.Errorf("spool file %s: %w", s.path, err)
		}
	}
	if s.file != nil && s.diskErr == nil && s.wOff+it.recordSize() <= s.diskLimit {
		err := writeRecord(s.w, it)
		if err == nil {
			err = s.w.Flush()
		}
		if err != nil {
			s.diskErr = err
			return "", fmt.Errorf("spool file %s: %w", s.path, err)
		}
		s.diskN++
		s.signal()
		return "disk", nil
	}
	return "", nil
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

// tryPop removes the oldest item, if there is one.
func (s *spool) tryPop() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memHead < len(s.mem) {
		it := s.mem[s.memHead]
		s.mem[s.memHead] = item{}
		s.memHead++
		s.memBytes -= it.size()
		if s.memHead == len(s.mem) {
			s.mem, s.memHead = s.mem[:0], 0
		} else if s.memHead > 1024 && s.memHead*2 > len(s.mem) {
			s.mem = append(s.mem[:0], s.mem[s.memHead:]...)
			s.memHead = 0
		}
		return it, true
	}
	if s.diskN == 0 {
		return item{}, false
	}
	// Records are read at their offset, never through a buffer that could
	// have seen the end of the file before later records were written.
	it, n, err := readRecord(bufio.NewReaderSize(io.NewSectionReader(s.file, s.rOff, s.wOff-s.rOff), 64<<10))
	if err != nil {
		// A record written but unreadable: the file is damaged. The rest
		// is lost (lostOnDisk reports it) rather than spin.
		s.diskErr = fmt.Errorf("reading spool file %s: %w", s.path, err)
		s.lost += s.diskN
		s.diskN = 0
		return item{}, false
	}
	s.rOff += n
	s.diskN--
	if s.diskN == 0 {
		// Emptied: start the file again.
		if err := s.file.Truncate(0); err == nil {
			s.wOff, s.rOff = 0, 0
		}
	}
	return it, true
}

// compact moves the unread part of the file to its start. s.mu is held and
// the writer is flushed (push flushes every record).
func (s *spool) compact() error {
	buf := make([]byte, 1<<20)
	var dst int64
	for src := s.rOff; src < s.wOff; {
		n, err := s.file.ReadAt(buf[:min(int64(len(buf)), s.wOff-src)], src)
		if n > 0 {
			if _, werr := s.file.WriteAt(buf[:n], dst); werr != nil {
				return werr
			}
			src += int64(n)
			dst += int64(n)
		}
		if err != nil && err != io.EOF {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
	}
	if err := s.file.Truncate(dst); err != nil {
		return err
	}
	s.wOff, s.rOff = dst, 0
	return nil
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
	return len(s.mem) - s.memHead, s.diskN, s.memBytes + s.wOff - s.rOff
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
	if s.file == nil {
		return len(pending), nil
	}
	defer s.file.Close()
	if len(pending) == 0 && s.rOff == 0 {
		return 0, nil
	}
	tmp := s.path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return len(pending) + s.diskN, err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	for _, it := range pending {
		if err := writeRecord(w, it); err != nil {
			f.Close()
			return len(pending) + s.diskN, err
		}
	}
	if _, err := io.Copy(w, io.NewSectionReader(s.file, s.rOff, s.wOff-s.rOff)); err != nil {
		f.Close()
		return len(pending) + s.diskN, err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return len(pending) + s.diskN, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return len(pending) + s.diskN, err
	}
	if err := f.Close(); err != nil {
		return len(pending) + s.diskN, err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return len(pending) + s.diskN, err
	}
	return 0, nil
}

// A record is: uint32 total length, uint16 tag length, tag, uint16 id
// length, id, body.
func writeRecord(w *bufio.Writer, it item) error {
	if len(it.tag) > 0xffff || len(it.msgID) > 0xffff {
		return errors.New("tag or message id too long for the spool")
	}
	var hdr [8]byte
	total := 4 + len(it.tag) + len(it.msgID) + len(it.body)
	binary.BigEndian.PutUint32(hdr[0:4], uint32(total))
	binary.BigEndian.PutUint16(hdr[4:6], uint16(len(it.tag)))
	w.Write(hdr[:6])
	w.WriteString(it.tag)
	binary.BigEndian.PutUint16(hdr[6:8], uint16(len(it.msgID)))
	w.Write(hdr[6:8])
	w.WriteString(it.msgID)
	_, err := w.Write(it.body)
	return err
}

func readRecord(r *bufio.Reader) (item, int64, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return item{}, 0, err
	}
	total := int(binary.BigEndian.Uint32(hdr[:]))
	if total < 4 || total > 256<<20 {
		return item{}, 0, fmt.Errorf("bad record length %d", total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return item{}, 0, err
	}
	tl := int(binary.BigEndian.Uint16(buf[0:2]))
	if 2+tl+2 > total {
		return item{}, 0, errors.New("bad record")
	}
	tag := string(buf[2 : 2+tl])
	il := int(binary.BigEndian.Uint16(buf[2+tl : 4+tl]))
	if 4+tl+il > total {
		return item{}, 0, errors.New("bad record")
	}
	id := string(buf[4+tl : 4+tl+il])
	return item{tag: tag, msgID: id, body: buf[4+tl+il:]}, int64(4 + total), nil
}
