package lazyfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// mountT mounts a lazyfs for t (skipping where FUSE mounts cannot be made)
// and unmounts it at the end, lazily if need be.
func mountT(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no lazyfs here: %v", err)
	}
	return MountTemp(t)
}

func write(t *testing.T, name string, data string, flag int, sync bool) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func fsync(t *testing.T, name string) {
	t.Helper()
	f, err := os.Open(name) // read-only: fsync still syncs the file
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

// content reads name: "<absent>" when it does not exist.
func content(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(len(b)) {
		t.Errorf("%s: stat size %d, %d bytes read", name, st.Size(), len(b))
	}
	return string(b)
}

// TestPowerLoss: what a file holds before a power loss (what programs
// see) and after it (what was synced), per operation.
func TestPowerLoss(t *testing.T) {
	lfs := mountT(t)
	big := string(bytes.Repeat([]byte("0123456789abcdef"), 1000)) // 16000 bytes: several pages
	for _, tc := range []struct {
		name          string
		do            func(t *testing.T, a, b string)
		before, after map[string]string // by file: a, b
	}{
		{"write without sync is lost", func(t *testing.T, a, _ string) {
			write(t, a, "hello", 0, false)
		}, map[string]string{"a": "hello"}, map[string]string{"a": ""}}, // the name is metadata: it stays
		{"write with fsync is kept", func(t *testing.T, a, _ string) {
			write(t, a, "hello", 0, true)
		}, map[string]string{"a": "hello"}, map[string]string{"a": "hello"}},
		{"fdatasync on another handle syncs", func(t *testing.T, a, _ string) {
			write(t, a, "hello", 0, false)
			fsync(t, a)
		}, map[string]string{"a": "hello"}, map[string]string{"a": "hello"}},
		{"close does not sync", func(t *testing.T, a, _ string) {
			write(t, a, "hello", 0, true)
			write(t, a, "HE", 0, false)
		}, map[string]string{"a": "HEllo"}, map[string]string{"a": "hello"}},
		{"appends after a sync are lost", func(t *testing.T, a, _ string) {
			write(t, a, big, 0, true)
			write(t, a, "tail", os.O_APPEND, false)
		}, map[string]string{"a": big + "tail"}, map[string]string{"a": big}},
		{"multi-page write then sync", func(t *testing.T, a, _ string) {
			write(t, a, big, 0, false)
			write(t, a, "X", 0, true)
		}, map[string]string{"a": "X" + big[1:]}, map[string]string{"a": "X" + big[1:]}},
		{"truncate without sync is lost", func(t *testing.T, a, _ string) {
			write(t, a, big, 0, true)
			if err := os.Truncate(a, 5); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": big[:5]}, map[string]string{"a": big}},
		{"truncate then sync", func(t *testing.T, a, _ string) {
			write(t, a, big, 0, true)
			if err := os.Truncate(a, 5); err != nil {
				t.Fatal(err)
			}
			fsync(t, a)
		}, map[string]string{"a": big[:5]}, map[string]string{"a": big[:5]}},
		{"shrink and grow reads zeros", func(t *testing.T, a, _ string) {
			write(t, a, "hello world", 0, true)
			if err := os.Truncate(a, 2); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(a, 6); err != nil {
				t.Fatal(err)
			}
			fsync(t, a)
		}, map[string]string{"a": "he\x00\x00\x00\x00"}, map[string]string{"a": "he\x00\x00\x00\x00"}},
		{"O_TRUNC without sync is lost", func(t *testing.T, a, _ string) {
			write(t, a, "old content", 0, true)
			write(t, a, "new", os.O_TRUNC, false)
		}, map[string]string{"a": "new"}, map[string]string{"a": "old content"}},
		{"rename over, data unsynced: the new name holds the unsynced file", func(t *testing.T, a, b string) {
			write(t, b, "old", 0, true)
			write(t, a, "new", 0, false)
			if err := os.Rename(a, b); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": "<absent>", "b": "new"}, map[string]string{"a": "<absent>", "b": ""}},
		{"rename over after sync", func(t *testing.T, a, b string) {
			write(t, b, "old", 0, true)
			write(t, a, "new", 0, true)
			if err := os.Rename(a, b); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": "<absent>", "b": "new"}, map[string]string{"a": "<absent>", "b": "new"}},
		{"unlink is durable at once", func(t *testing.T, a, _ string) {
			write(t, a, "hello", 0, true)
			if err := os.Remove(a); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": "<absent>"}, map[string]string{"a": "<absent>"}},
		{"a sparse write unsynced", func(t *testing.T, a, _ string) {
			write(t, a, "x", 0, true)
			f, err := os.OpenFile(a, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("y"), 9000); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": "x" + string(make([]byte, 8999)) + "y"}, map[string]string{"a": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(lfs.Dir, "case")
			if err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"a": filepath.Join(dir, "a"), "b": filepath.Join(dir, "b")}
			tc.do(t, files["a"], files["b"])
			for k, want := range tc.before {
				if got := content(t, files[k]); got != want {
					t.Errorf("before the power loss %s = %.40q (%d bytes), want %.40q (%d bytes)", k, got, len(got), want, len(want))
				}
			}
			if err := lfs.PowerLoss(); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.after {
				if got := content(t, files[k]); got != want {
					t.Errorf("after the power loss %s = %.40q (%d bytes), want %.40q (%d bytes)", k, got, len(got), want, len(want))
				}
			}
		})
	}
	if lfs.LostBytes() == 0 {
		t.Error("no byte counted as lost")
	}
}

// TestUnmountKeepsData: a clean unmount (a shutdown, not a power loss)
// writes what is cached.
func TestUnmountKeepsData(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no lazyfs here: %v", err)
	}
	backing := t.TempDir()
	f, err := Mount(backing, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.Dir, "a"), "kept", 0, false)
	if n := f.Unsynced(); n == 0 {
		t.Error("nothing unsynced after a write")
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(backing, "a")); got != "kept" {
		t.Errorf("after a clean unmount the disk holds %q", got)
	}
}
