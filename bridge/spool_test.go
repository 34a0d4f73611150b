package bridge

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSpoolOrderAcrossMemoryDiskAndRestart(t *testing.T) {
	dir := t.TempDir()
	it := func(i int) item {
		return item{tag: fmt.Sprintf("t/%d", i), body: []byte(strings.Repeat("b", 100)), msgID: fmt.Sprint(i)}
	}
	sz := it(0).size()
	rs := it(0).recordSize()
	s, err := newSpool(dir, 3*sz, 5*rs)
	if err != nil {
		t.Fatal(err)
	}
	var where []string
	for i := range 10 {
		w, err := s.push(it(i))
		if err != nil {
			t.Fatal(err)
		}
		where = append(where, w)
	}
	// 3 in memory, 5 on disk, 2 dropped.
	if got := strings.Join(where, ","); got != "memory,memory,memory,disk,disk,disk,disk,disk,," {
		t.Fatalf("placement %q", got)
	}
	ctx := context.Background()
	// Pop two from memory; a push now must go behind the disk items.
	for i := range 2 {
		got, _ := s.pop(ctx)
		if got.tag != it(i).tag {
			t.Fatalf("pop %d: %s", i, got.tag)
		}
	}
	if w, _ := s.push(it(100)); w != "" {
		// the disk is full (5 items): dropped
		t.Fatalf("push onto a full disk spool went to %q", w)
	}
	// Pop one more from memory (2), then one from disk (3); then a push
	// fits on the disk, behind 4..7.
	for _, want := range []string{"t/2", "t/3"} {
		if got, _ := s.pop(ctx); got.tag != want {
			t.Fatalf("pop %s, want %s", got.tag, want)
		}
	}
	if w, _ := s.push(it(8)); w != "disk" {
		t.Fatalf("push went to %q, want disk (order)", w)
	}
	// Take 4 from the file and hand it back (as Run does at shutdown), then
	// close: the memory item 4 is written in front of the file's 5..8.
	got, _ := s.pop(ctx)
	s.unpop(got)
	if lost, err := s.close(); lost != 0 || err != nil {
		t.Fatalf("close: lost %d, %v", lost, err)
	}
	s2, err := newSpool(dir, 3*sz, 5*rs)
	if err != nil {
		t.Fatal(err)
	}
	if s2.restored != 5 {
		t.Fatalf("restored %d items, want 5", s2.restored)
	}
	var tags []string
	for range 5 {
		x, _ := s2.pop(ctx)
		tags = append(tags, x.tag)
	}
	if got := strings.Join(tags, ","); got != "t/4,t/5,t/6,t/7,t/8" {
		t.Fatalf("after restart: %s", got)
	}
	if m, d, _ := s2.len(); m != 0 || d != 0 {
		t.Fatalf("left %d in memory, %d on disk", m, d)
	}
	if lost, _ := s2.close(); lost != 0 {
		t.Fatalf("lost %d", lost)
	}
	// Without a disk spool, close reports what it loses.
	s3, _ := newSpool("", 3*sz, 0)
	s3.push(it(1))
	if w, _ := s3.push(item{tag: "x", body: make([]byte, 4*sz)}); w != "" {
		t.Fatalf("oversized push went to %q", w)
	}
	if lost, _ := s3.close(); lost != 1 {
		t.Fatalf("memory-only close lost %d, want 1", lost)
	}
}

// TestSpoolDrainWhileWriting: records written to the file while it is being
// read back are all read, in order (a reader that saw the end of the file
// must not stop there), and the file stays within its bound by moving the
// unread records to its front.
func TestSpoolDrainWhileWriting(t *testing.T) {
	it := func(i int) item {
		return item{tag: fmt.Sprintf("t/%d", i), body: []byte(strings.Repeat("b", 100)), msgID: fmt.Sprint(i)}
	}
	rs := it(10).recordSize()
	s, err := newSpool(t.TempDir(), 1, 6*rs) // every item goes to the file
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	next, want := 10, 10
	push := func(n int) {
		for range n {
			if w, err := s.push(it(next)); w != "disk" || err != nil {
				t.Fatalf("push %d went to %q (%v)", next, w, err)
			}
			next++
		}
	}
	pop := func(n int) {
		for range n {
			got, ok := s.pop(ctx)
			if !ok || got.tag != it(want).tag {
				t.Fatalf("pop: %s, want %s", got.tag, it(want).tag)
			}
			want++
		}
	}
	push(3)
	pop(1)
	push(2)
	pop(2)
	// Keep one record unread at all times while pushing far more than
	// the bound: the file must be compacted, never grow past it.
	for range 20 {
		push(2)
		pop(2)
		if s.disk.Size() > 6*rs {
			t.Fatalf("file at %d bytes, bound %d", s.disk.Size(), 6*rs)
		}
	}
	pop(next - want)
	if m, d, _ := s.len(); m != 0 || d != 0 {
		t.Fatalf("left %d in memory, %d on disk", m, d)
	}
	if n, err := s.takeLost(); n != 0 || err != nil {
		t.Fatalf("lost %d: %v", n, err)
	}
	// A tag no record can hold is refused alone; the file keeps working.
	if w, err := s.push(item{tag: strings.Repeat("x", 70000)}); w != "" || err == nil {
		t.Fatalf("oversized tag went to %q (%v)", w, err)
	}
	push(1)
	pop(1)
}

// TestSpoolMovesLegacyFile: the spool file an earlier version left
// (bridge-spool.dat) is moved into the disk spool at open, its events in
// order and a record it wrote in part cut, and the old file removed.
func TestSpoolMovesLegacyFile(t *testing.T) {
	dir := t.TempDir()
	var legacy []byte
	for i := range 3 {
		rec := encodeItem(item{tag: fmt.Sprintf("t/%d", i), msgID: fmt.Sprint(i), body: []byte(`{"n":1}`)})
		legacy = binary.BigEndian.AppendUint32(legacy, uint32(len(rec)))
		legacy = append(legacy, rec...)
	}
	legacy = append(legacy, 0, 0, 0, 40, 0) // written in part
	if err := os.WriteFile(filepath.Join(dir, legacySpoolFile), legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := newSpool(dir, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.restored != 3 {
		t.Fatalf("restored %d, want 3", s.restored)
	}
	for i := range 3 {
		got, ok := s.tryPop()
		if want := fmt.Sprintf("t/%d", i); !ok || got.tag != want || got.msgID != fmt.Sprint(i) || string(got.body) != `{"n":1}` {
			t.Fatalf("pop %d: %+v, %v; want %s", i, got, ok, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, legacySpoolFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("legacy file left: %v", err)
	}
}

// TestSpoolDiskFullThenRoom: on a full file system the spool drops the
// event it cannot write, with the error, and writes to the disk again once
// there is room; what it held is kept, in order. Needs root to mount a
// tmpfs; skips otherwise.
func TestSpoolDiskFullThenRoom(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	// Events of 16 KiB: each needs pages of its own.
	it := func(i int) item {
		return item{tag: fmt.Sprintf("t/%d", i), body: []byte(strings.Repeat("b", 16<<10)), msgID: fmt.Sprint(i)}
	}
	s, err := newSpool(filepath.Join(dir, "spool"), 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if w, err := s.push(it(0)); w != "disk" || err != nil {
		t.Fatalf("first push: %q, %v", w, err)
	}
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	f.Close()
	w, err := s.push(it(1))
	if w != "" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("push on a full disk: %q, %v; want a drop with ENOSPC", w, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if w, err := s.push(it(2)); w != "disk" || err != nil {
		t.Fatalf("push once there is room: %q, %v", w, err)
	}
	for _, want := range []string{"t/0", "t/2"} {
		got, ok := s.pop(context.Background())
		if !ok || got.tag != want {
			t.Fatalf("popped %q, want %q", got.tag, want)
		}
	}
}
