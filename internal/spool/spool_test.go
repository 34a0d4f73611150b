package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func recs(from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, fmt.Appendf(nil, "record %02d", i))
	}
	return out
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i, r := range b {
		out[i] = string(r)
	}
	return out
}

// readAll takes every record out of s.
func readAll(t *testing.T, s *File) []string {
	t.Helper()
	got, off, err := s.Peek(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(len(got), off); err != nil {
		t.Fatal(err)
	}
	return strs(got)
}

// TestReopenKeepsOrder: records an earlier run left come back in order
// from the head, after a part was taken; a torn last frame is cut; a
// second process cannot open a spool in use.
func TestReopenKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	s, restored, _, err := Open(dir, "q", Options{Sync: true})
	if err != nil || restored != 0 {
		t.Fatalf("open: %d, %v", restored, err)
	}
	if err := s.Append(recs(0, 10)...); err != nil {
		t.Fatal(err)
	}
	got, off, err := s.Peek(4)
	if err != nil || len(got) != 4 {
		t.Fatalf("peek: %d, %v", len(got), err)
	}
	if err := s.Advance(4, off); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Open(dir, "q", Options{}); err == nil {
		t.Fatal("a second Open of a spool in use succeeded")
	}
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "q.dat"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{50, 0, 0, 0, 9, 9, 9, 9, 'x'})
	f.Close()
	s, restored, torn, err := Open(dir, "q", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if restored != 6 || torn != 9 {
		t.Fatalf("reopen: %d restored, %d bytes torn; want 6, 9", restored, torn)
	}
	if got := readAll(t, s); !slices.Equal(got, strs(recs(4, 10))) {
		t.Fatalf("after reopen: %v", got)
	}
	if s.Len() != 0 || s.Bytes() != 0 {
		t.Fatalf("emptied spool holds %d records, %d bytes", s.Len(), s.Bytes())
	}
}

// TestLimitCompacts: at its bound the spool first drops the records read
// (moving the rest to the front), and refuses only what still does not
// fit, keeping the order.
func TestLimitCompacts(t *testing.T) {
	frame := int64(8 + len("record 00"))
	s, _, _, err := Open(t.TempDir(), "q", Options{Limit: 10 * frame})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(recs(0, 10)...); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(recs(10, 11)...); !errors.Is(err, ErrFull) {
		t.Fatalf("append past the limit: %v, want ErrFull", err)
	}
	got, off, _ := s.Peek(3)
	if err := s.Advance(len(got), off); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(recs(10, 13)...); err != nil {
		t.Fatalf("append after 3 were read: %v", err)
	}
	if err := s.Append(recs(13, 14)...); !errors.Is(err, ErrFull) {
		t.Fatalf("append past the limit again: %v", err)
	}
	if got := readAll(t, s); !slices.Equal(got, strs(recs(3, 13))) {
		t.Fatalf("records %v", got)
	}
}

// TestPrepend: records put in front come before the unread ones, in this
// run and the next.
func TestPrepend(t *testing.T) {
	dir := t.TempDir()
	s, _, _, err := Open(dir, "q", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(recs(0, 5)...); err != nil {
		t.Fatal(err)
	}
	got, off, _ := s.Peek(2)
	if err := s.Advance(len(got), off); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepend([]byte("first"), []byte("second")); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 5 {
		t.Fatalf("Len %d after Prepend, want 5", s.Len())
	}
	s.Close()
	s, restored, _, err := Open(dir, "q", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := append([]string{"first", "second"}, strs(recs(2, 5))...)
	if got := readAll(t, s); restored != 5 || !slices.Equal(got, want) {
		t.Fatalf("after reopen: %d restored, %v; want %v", restored, got, want)
	}
}
