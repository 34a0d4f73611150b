// Package spool is reactord's one disk spool: a FIFO of records in a file,
// which the audit store's writer fills while its database is down and the
// bridge fills while NATS cannot take events. Records survive a stop, and
// with Sync a crash of the machine; the next run on the same directory
// reads them first.
//
// The file NAME.dat is a sequence of frames: a 4-byte length, a 4-byte
// CRC-32 of the payload, then the payload (one record). NAME.head keeps
// the offset of the first unread frame, written after each Advance. A
// frame written in part (a crash during an append) is cut off at Open;
// when the reader catches up, both files are emptied.
package spool

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrFull is returned by Append when the records would take the file past
// its bound.
var ErrFull = errors.New("spool full")

// maxFrame bounds one record.
const maxFrame = 1 << 30

// Options configure a spool.
type Options struct {
	// Limit bounds the file's size in bytes (0: no bound). Append moves
	// the unread records to the front of the file before it refuses.
	Limit int64
	// Sync makes each Append durable (fsync) before it returns: a crash
	// of the machine then loses no appended record.
	Sync bool
}

// File is an open spool. Its methods are not safe for concurrent use.
type File struct {
	path string
	o    Options
	f    *os.File
	head *os.File
	rOff int64 // first unread frame
	wOff int64 // end of the file
	n    int   // frames between rOff and wOff
}

// Open opens (or creates) the spool NAME in dir, locked against other
// processes. It returns how many records an earlier run left and how many
// bytes of a frame written in part it cut off.
func Open(dir, name string, o Options) (s *File, restored int, torn int64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, 0, fmt.Errorf("spool: %w", err)
	}
	path := filepath.Join(dir, name+".dat")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("spool: %w", err)
	}
	h, err := os.OpenFile(filepath.Join(dir, name+".head"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, 0, 0, fmt.Errorf("spool: %w", err)
	}
	// One process per spool: a second one on the same directory would
	// interleave its frames with ours.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		h.Close()
		return nil, 0, 0, fmt.Errorf("spool %s is in use by another process (each one needs its own data directory): %w", path, err)
	}
	s = &File{path: path, o: o, f: f, head: h}
	var hb [8]byte
	if n, _ := h.ReadAt(hb[:], 0); n == 8 {
		s.rOff = int64(binary.LittleEndian.Uint64(hb[:]))
	}
	st, err := f.Stat()
	if err != nil {
		s.Close()
		return nil, 0, 0, fmt.Errorf("spool: %w", err)
	}
	// Find the end of the last whole frame.
	end, _ := s.scan(0, st.Size())
	if s.rOff > end {
		// The head points past what the file holds: the file was cut by
		// hand. Start over from its beginning rather than lose it.
		s.rOff = 0
	}
	_, frames := s.scan(s.rOff, end)
	if torn = st.Size() - end; torn > 0 {
		if err := f.Truncate(end); err != nil {
			s.Close()
			return nil, 0, 0, fmt.Errorf("spool: %w", err)
		}
	}
	s.wOff, s.n = end, frames
	if s.n == 0 {
		if err := s.Reset(); err != nil {
			s.Close()
			return nil, 0, 0, err
		}
	}
	return s, s.n, torn, nil
}

// scan reads whole frames from off up to limit: the end of the last one
// and how many there are.
func (s *File) scan(off, limit int64) (end int64, frames int) {
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, off, limit-off), 1<<20)
	end = off
	for {
		_, size, err := readFrame(br)
		if err != nil {
			return end, frames
		}
		end += size
		frames++
	}
}

// Path is the spool's file, for messages.
func (s *File) Path() string { return s.path }

// Len is the number of records not read yet.
func (s *File) Len() int { return s.n }

// Bytes is the size of the records not read yet.
func (s *File) Bytes() int64 { return s.wOff - s.rOff }

// Size is the size of the file, read records included: Options.Limit
// bounds it.
func (s *File) Size() int64 { return s.wOff }

// Append writes recs at the end of the file, all or none (and syncs them,
// with Options.Sync). Past Options.Limit it returns ErrFull.
func (s *File) Append(recs ...[]byte) error {
	var buf []byte
	for _, r := range recs {
		if len(r) > maxFrame {
			return fmt.Errorf("spool: a record of %d bytes exceeds %d", len(r), maxFrame)
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.ChecksumIEEE(r))
		buf = append(buf, r...)
	}
	if s.o.Limit > 0 && s.wOff+int64(len(buf)) > s.o.Limit && s.rOff > 0 {
		if err := s.compact(); err != nil {
			return fmt.Errorf("spool %s: %w", s.path, err)
		}
	}
	if s.o.Limit > 0 && s.wOff+int64(len(buf)) > s.o.Limit {
		return ErrFull
	}
	if _, err := s.f.WriteAt(buf, s.wOff); err != nil {
		_ = s.f.Truncate(s.wOff)
		return fmt.Errorf("spool %s: %w", s.path, err)
	}
	if s.o.Sync {
		if err := s.f.Sync(); err != nil {
			_ = s.f.Truncate(s.wOff)
			return fmt.Errorf("spool %s: %w", s.path, err)
		}
	}
	s.wOff += int64(len(buf))
	s.n += len(recs)
	return nil
}

// Peek reads up to k records from the head, and the offset just past
// them, for Advance.
func (s *File) Peek(k int) ([][]byte, int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, s.rOff, s.wOff-s.rOff), 1<<16)
	off := s.rOff
	recs := make([][]byte, 0, min(k, s.n))
	for len(recs) < k && off < s.wOff {
		payload, size, err := readFrame(br)
		if err != nil {
			return nil, 0, fmt.Errorf("spool %s at offset %d: %w", s.path, off, err)
		}
		recs = append(recs, payload)
		off += size
	}
	return recs, off, nil
}

// PeekAt reads up to k records starting skip bytes past the head (the
// frames of records already read: 8 bytes and its record each), for a
// reader that holds records it has not dropped yet; it returns them and
// the size of each one's frame. A rewrite keeps the unread frames in
// order, so skip stays valid across Append and Prepend.
func (s *File) PeekAt(skip int64, k int) ([][]byte, []int64, error) {
	if skip < 0 || s.rOff+skip > s.wOff {
		return nil, nil, fmt.Errorf("spool %s: reading %d bytes past the head, which holds %d", s.path, skip, s.wOff-s.rOff)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, s.rOff+skip, s.wOff-s.rOff-skip), 1<<16)
	off := s.rOff + skip
	var recs [][]byte
	var sizes []int64
	for len(recs) < k && off < s.wOff {
		payload, size, err := readFrame(br)
		if err != nil {
			return nil, nil, fmt.Errorf("spool %s at offset %d: %w", s.path, off, err)
		}
		recs, sizes = append(recs, payload), append(sizes, size)
		off += size
	}
	return recs, sizes, nil
}

// Drop drops the first k records, whose frames take n bytes (the sizes
// PeekAt gave): they were taken.
func (s *File) Drop(k int, n int64) error {
	if k <= 0 {
		return nil
	}
	if k > s.n || s.rOff+n > s.wOff {
		return fmt.Errorf("spool %s: dropping %d records of %d bytes, but it holds %d of %d", s.path, k, n, s.n, s.wOff-s.rOff)
	}
	return s.Advance(k, s.rOff+n)
}

// Advance drops the k records up to off (what Peek returned): they were
// taken.
func (s *File) Advance(k int, off int64) error {
	s.rOff = off
	s.n -= k
	if s.n <= 0 {
		return s.Reset()
	}
	var hb [8]byte
	binary.LittleEndian.PutUint64(hb[:], uint64(off))
	if _, err := s.head.WriteAt(hb[:], 0); err != nil {
		return fmt.Errorf("spool %s: %w", s.path, err)
	}
	return nil
}

// Reset empties the spool.
func (s *File) Reset() error {
	s.rOff, s.wOff, s.n = 0, 0, 0
	if err := s.head.Truncate(0); err != nil {
		return fmt.Errorf("spool %s: %w", s.path, err)
	}
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("spool %s: %w", s.path, err)
	}
	return nil
}

// compact moves the unread frames to the front of a new file.
func (s *File) compact() error { return s.rewrite() }

// Prepend puts recs in front of the unread records: a stop uses it to keep
// what memory held ahead of what the file holds.
func (s *File) Prepend(recs ...[]byte) error {
	if len(recs) == 0 {
		return nil
	}
	return s.rewrite(recs...)
}

// rewrite replaces the file with front followed by the unread frames, at
// once: written aside, synced and renamed over it. The head goes back to 0
// just before the rename, so a crash in between reads some records again
// (delivery is at least once), never skips one.
func (s *File) rewrite(front ...[]byte) error {
	tmp := s.path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	ns := &File{path: s.path, f: f}
	err = ns.Append(front...)
	if err == nil {
		w := &sectionWriter{f: f, off: ns.wOff}
		_, err = io.Copy(w, io.NewSectionReader(s.f, s.rOff, s.wOff-s.rOff))
		ns.wOff = w.off
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = s.head.Truncate(0)
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("spool %s: %w", s.path, err)
	}
	// The lock goes with the old file: take it on the new one.
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	s.f.Close()
	s.f, s.rOff, s.wOff, s.n = f, 0, ns.wOff, s.n+len(front)
	return nil
}

// sectionWriter writes at a growing offset.
type sectionWriter struct {
	f   *os.File
	off int64
}

func (w *sectionWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// Close closes the spool's files; what was not read stays for the next
// Open.
func (s *File) Close() error {
	return errors.Join(s.f.Close(), s.head.Close())
}

// readFrame reads one frame; it fails on a short or damaged one.
func readFrame(r *bufio.Reader) (payload []byte, size int64, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, 0, fmt.Errorf("frame of %d bytes: damaged", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, 0, err
	}
	if crc32.ChecksumIEEE(payload) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, 0, errors.New("frame checksum mismatch: damaged")
	}
	return payload, int64(8 + n), nil
}
