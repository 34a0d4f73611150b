package natsbus

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// asNobody makes path belong to user 65534 (nobody), as another local
// user's planted file would; only root can, so the test skips otherwise.
func asNobody(t *testing.T, path string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

func TestCheckPrivate(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own")
	if err := os.WriteFile(own, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(own); err != nil {
		t.Fatalf("this user's 0600 file: %v", err)
	}
	groupWritable := filepath.Join(dir, "gw")
	if err := os.WriteFile(groupWritable, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupWritable, 0o620); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(groupWritable); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a group-writable file: %v, want ErrNotPrivate", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(link); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a symbolic link: %v, want ErrNotPrivate", err)
	}
	if err := CheckPrivate(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
	planted := filepath.Join(dir, "planted")
	if err := os.WriteFile(planted, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	asNobody(t, planted)
	if err := CheckPrivate(planted); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("another user's file: %v, want ErrNotPrivate", err)
	}
}

// TestPrivateDataDir: a data directory is made 0700, one others can list
// is reported (not changed: it may be the system's), and one another user
// made first (the shared
// temporary directory's reactord folder) is refused, with the token it
// holds: that user would choose the token.
func TestPrivateDataDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if open, err := EnsurePrivateDir(fresh); err != nil || open {
		t.Fatalf("new data dir: open %v, %v", open, err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o700 {
		t.Errorf("new data dir mode %04o, want 0700", st.Mode().Perm())
	}
	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	if open, err := EnsurePrivateDir(loose); err != nil || !open {
		t.Fatalf("0755 data dir: open %v, %v; want it reported open", open, err)
	}
	if st, _ := os.Stat(loose); st.Mode().Perm() != 0o755 {
		t.Errorf("0755 data dir changed to %04o: an existing directory is not changed", st.Mode().Perm())
	}
	planted := filepath.Join(base, "planted")
	if err := os.Mkdir(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(TokenFile(planted), []byte("chosen-by-another-user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RecordAddr(planted, "127.0.0.1:4222"); err != nil {
		t.Fatal(err)
	}
	asNobody(t, TokenFile(planted))
	asNobody(t, planted)
	if _, err := EnsurePrivateDir(planted); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("another user's data dir: %v, want ErrNotPrivate", err)
	}
	if _, _, _, err := EnsureToken(planted); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("EnsureToken on another user's token: %v, want ErrNotPrivate", err)
	}
	if tok, _ := LocalToken("nats://127.0.0.1:4222", planted); tok != "" {
		t.Errorf("a client took the planted token %q", tok)
	}
}
