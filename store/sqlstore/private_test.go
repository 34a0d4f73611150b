package sqlstore

import (
	"context"
	"github.com/reactord/reactord/store"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFilesArePrivate: the audit store (every event and job return,
// secrets in them too) is readable by this user alone: a new database and
// its -wal and -shm files are 0600, and a database left 0644 by an earlier
// version is made so.
func TestSQLiteFilesArePrivate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "new.db"), old} {
		s, err := Open(ctx, "sqlite://"+path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, s, store.Batch{Events: []store.Event{ev(1)}})
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", filepath.Base(f), st.Mode().Perm())
			}
		}
		s.Close()
	}
}
