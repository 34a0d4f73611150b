package store

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
	"time"
)

// Spool file names under WriterOptions.SpoolDir.
const (
	spoolFile = "store-spool.dat"
	spoolHead = "store-spool.head"
)

// errSpoolFull is returned by spool.append when the records would take the
// file past its bound.
var errSpoolFull = errors.New("store: spool full")

// spool is the Writer's disk FIFO: records that could not be written to the
// database yet, kept durably (appended and fsynced) so that an event whose
// records are in it can be acknowledged, and so that a stop or a crash
// while the database is down loses nothing. The next Writer on the same
// directory writes them first.
//
// The file is a sequence of frames: a 4-byte length, a 4-byte CRC-32 of
// the payload, then the payload (one record, see encodeRecord). The read
// offset is kept in a small side file, updated after each batch the
// database took; after a crash the batch in flight is written again
// (delivery into the store is at least once, as for the Writer). When the
// reader catches up, both files are emptied.
type spool struct {
	path  string
	f     *os.File
	head  *os.File
	rOff  int64 // first unread frame
	wOff  int64 // end of the file
	n     int   // frames between rOff and wOff
	limit int64 // largest size of the file
}

// openSpool opens (or creates) the spool in dir. It returns how many
// records an earlier run left and how many bytes of a frame written in part
// (a crash during an append) it cut off.
func openSpool(dir string, limit int64) (s *spool, restored int, torn int64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, 0, fmt.Errorf("store spool: %w", err)
	}
	path := filepath.Join(dir, spoolFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("store spool: %w", err)
	}
	h, err := os.OpenFile(filepath.Join(dir, spoolHead), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, 0, 0, fmt.Errorf("store spool: %w", err)
	}
	// One Writer per spool: a second daemon on the same data directory
	// would interleave its frames with ours.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		h.Close()
		return nil, 0, 0, fmt.Errorf("store spool %s is in use by another process (each reactord needs its own --data-dir): %w", path, err)
	}
	s = &spool{path: path, f: f, head: h, limit: limit}
	var hb [8]byte
	if n, _ := h.ReadAt(hb[:], 0); n == 8 {
		s.rOff = int64(binary.LittleEndian.Uint64(hb[:]))
	}
	// Find the end of the last whole frame.
	st, err := f.Stat()
	if err != nil {
		s.close()
		return nil, 0, 0, fmt.Errorf("store spool: %w", err)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, st.Size()), 1<<20)
	var off int64
	frames := 0
	for {
		_, size, err := readFrame(br)
		if err != nil {
			break
		}
		if off >= s.rOff {
			frames++
		}
		off += size
	}
	if s.rOff > off {
		// The head points past what the file holds: the file was cut by
		// hand. Start over from its beginning rather than lose it.
		s.rOff, frames = 0, 0
		br.Reset(io.NewSectionReader(f, 0, off))
		for {
			if _, _, err := readFrame(br); err != nil {
				break
			}
			frames++
		}
	}
	torn = st.Size() - off
	if torn > 0 {
		if err := f.Truncate(off); err != nil {
			s.close()
			return nil, 0, 0, fmt.Errorf("store spool: %w", err)
		}
	}
	s.wOff, s.n = off, frames
	if s.n == 0 {
		if err := s.reset(); err != nil {
			s.close()
			return nil, 0, 0, err
		}
	}
	return s, s.n, torn, nil
}

// append writes recs at the end of the file and syncs it: all or none.
func (s *spool) append(recs []any) error {
	var buf []byte
	for _, r := range recs {
		start := len(buf)
		buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
		buf = encodeRecord(buf, r)
		payload := buf[start+8:]
		binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
		binary.LittleEndian.PutUint32(buf[start+4:], crc32.ChecksumIEEE(payload))
	}
	if s.limit > 0 && s.wOff+int64(len(buf)) > s.limit {
		return errSpoolFull
	}
	if _, err := s.f.WriteAt(buf, s.wOff); err != nil {
		_ = s.f.Truncate(s.wOff)
		return fmt.Errorf("store spool: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		_ = s.f.Truncate(s.wOff)
		return fmt.Errorf("store spool: %w", err)
	}
	s.wOff += int64(len(buf))
	s.n += len(recs)
	return nil
}

// peek reads up to k records from the head, and the offset just past them.
func (s *spool) peek(k int) ([]any, int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, s.rOff, s.wOff-s.rOff), 1<<16)
	off := s.rOff
	recs := make([]any, 0, min(k, s.n))
	for len(recs) < k && off < s.wOff {
		payload, size, err := readFrame(br)
		if err != nil {
			return nil, 0, fmt.Errorf("store spool %s at offset %d: %w", s.path, off, err)
		}
		r, err := decodeRecord(payload)
		if err != nil {
			return nil, 0, fmt.Errorf("store spool %s at offset %d: %w", s.path, off, err)
		}
		recs = append(recs, r)
		off += size
	}
	return recs, off, nil
}

// advance drops the k records up to off (the database took them).
func (s *spool) advance(k int, off int64) error {
	s.rOff = off
	s.n -= k
	if s.n <= 0 {
		return s.reset()
	}
	var hb [8]byte
	binary.LittleEndian.PutUint64(hb[:], uint64(off))
	if _, err := s.head.WriteAt(hb[:], 0); err != nil {
		return fmt.Errorf("store spool: %w", err)
	}
	return nil
}

// reset empties the spool.
func (s *spool) reset() error {
	s.rOff, s.wOff, s.n = 0, 0, 0
	if err := s.head.Truncate(0); err != nil {
		return fmt.Errorf("store spool: %w", err)
	}
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("store spool: %w", err)
	}
	return nil
}

// bytes returns the size of the records not yet read.
func (s *spool) bytes() int64 { return s.wOff - s.rOff }

func (s *spool) close() error {
	return errors.Join(s.f.Close(), s.head.Close())
}

// readFrame reads one frame; it fails on a short or damaged one.
func readFrame(r *bufio.Reader) (payload []byte, size int64, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > 1<<30 {
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

// Record kinds in the spool.
const (
	kindEvent  = 'E'
	kindJob    = 'J'
	kindReturn = 'R'
	kindLedger = 'L'
)

// encodeRecord appends rec: a kind byte, then its fields as
// length-prefixed strings, times as Unix nanoseconds (0: zero time).
func encodeRecord(b []byte, rec any) []byte {
	str := func(s string) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	raw := func(s []byte) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	tm := func(t time.Time) {
		if t.IsZero() {
			b = binary.AppendVarint(b, 0)
		} else {
			b = binary.AppendVarint(b, t.UnixNano())
		}
	}
	switch r := rec.(type) {
	case Event:
		b = append(b, kindEvent)
		str(r.ID)
		str(r.Tag)
		raw(r.Data)
		str(r.MasterID)
		tm(r.Time)
	case Job:
		b = append(b, kindJob)
		str(r.JID)
		raw(r.Load)
		tm(r.Time)
	case Return:
		b = append(b, kindReturn)
		str(r.JID)
		str(r.MinionID)
		str(r.Fun)
		raw(r.Return)
		if r.Success {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		raw(r.FullRet)
		tm(r.Time)
	case LedgerEntry:
		b = append(b, kindLedger)
		for _, s := range []string{r.EventID, r.Tag, r.Stage, r.Rule, r.File, r.ReactionID, r.JID, r.Minion, r.Detail} {
			str(s)
		}
		tm(r.Time)
	default:
		panic(fmt.Sprintf("store spool: unsupported record %T", rec))
	}
	return b
}

// decodeRecord reads what encodeRecord wrote.
func decodeRecord(p []byte) (any, error) {
	var bad error
	next := func() []byte {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			bad = errors.New("record damaged")
			return nil
		}
		v := p[k : k+int(n)]
		p = p[k+int(n):]
		return v
	}
	str := func() string { return string(next()) }
	raw := func() []byte {
		v := next()
		if v == nil {
			return nil
		}
		return append([]byte(nil), v...)
	}
	tm := func() time.Time {
		v, k := binary.Varint(p)
		if k <= 0 {
			bad = errors.New("record damaged")
			return time.Time{}
		}
		p = p[k:]
		if v == 0 {
			return time.Time{}
		}
		return time.Unix(0, v)
	}
	if len(p) == 0 {
		return nil, errors.New("empty record")
	}
	kind := p[0]
	p = p[1:]
	var rec any
	switch kind {
	case kindEvent:
		rec = Event{ID: str(), Tag: str(), Data: raw(), MasterID: str(), Time: tm()}
	case kindJob:
		rec = Job{JID: str(), Load: raw(), Time: tm()}
	case kindReturn:
		r := Return{JID: str(), MinionID: str(), Fun: str(), Return: raw()}
		if len(p) == 0 {
			return nil, errors.New("record damaged")
		}
		r.Success = p[0] == 1
		p = p[1:]
		r.FullRet = raw()
		r.Time = tm()
		rec = r
	case kindLedger:
		var f [9]string
		for i := range f {
			f[i] = str()
		}
		rec = LedgerEntry{EventID: f[0], Tag: f[1], Stage: f[2], Rule: f[3], File: f[4], ReactionID: f[5], JID: f[6], Minion: f[7], Detail: f[8], Time: tm()}
	default:
		return nil, fmt.Errorf("unknown record kind %q", kind)
	}
	if bad != nil {
		return nil, bad
	}
	return rec, nil
}
