package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	diskspool "github.com/reactord/reactord/internal/spool"
)

// spoolName names the Writer's spool under WriterOptions.SpoolDir
// (store-spool.dat and its head file).
const spoolName = "store-spool"

// spoolFile is the spool's data file, for messages and tests.
const spoolFile = spoolName + ".dat"

// spool is the Writer's disk FIFO: records that could not be written to the
// database yet, kept durably (appended and fsynced, see internal/spool) so
// that an event whose records are in it can be acknowledged, and so that a
// stop or a crash while the database is down loses nothing. The next
// Writer on the same directory writes them first. After a crash the batch
// in flight is written again (delivery into the store is at least once,
// as for the Writer).
type spool struct{ *diskspool.File }

// openSpool opens (or creates) the spool in dir. It returns how many
// records an earlier run left and how many bytes of a frame written in part
// (a crash during an append) it cut off.
func openSpool(dir string, limit int64) (*spool, int, int64, error) {
	f, restored, torn, err := diskspool.Open(dir, spoolName, diskspool.Options{Limit: limit, Sync: true})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("store %w", err)
	}
	return &spool{f}, restored, torn, nil
}

// append writes recs at the end of the file and syncs it: all or none;
// diskspool.ErrFull past its bound.
func (s *spool) append(recs []any) error {
	payloads := make([][]byte, len(recs))
	for i, r := range recs {
		payloads[i] = encodeRecord(nil, r)
	}
	return s.Append(payloads...)
}

// peek reads up to k records from the head, and the offset just past them.
func (s *spool) peek(k int) ([]any, int64, error) {
	raw, off, err := s.Peek(k)
	if err != nil {
		return nil, 0, err
	}
	recs := make([]any, len(raw))
	for i, p := range raw {
		if recs[i], err = decodeRecord(p); err != nil {
			return nil, 0, fmt.Errorf("store spool %s: %w", s.Path(), err)
		}
	}
	return recs, off, nil
}

// advance drops the k records up to off (the database took them).
func (s *spool) advance(k int, off int64) error { return s.Advance(k, off) }

// reset empties the spool.
func (s *spool) reset() error { return s.Reset() }

// bytes returns the size of the records not yet read.
func (s *spool) bytes() int64 { return s.Bytes() }

func (s *spool) close() error { return s.Close() }

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
