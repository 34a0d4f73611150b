// Package testfiles writes the files tests need: a tree of configuration
// and reaction files, or a secret with a given mode.
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Tree writes files (name relative to the directory, and content) into a
// new temporary directory, making the directories names hold, and
// returns it.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Secret writes a secret file with mode (whatever the umask) into a new
// temporary directory and returns its path.
func Secret(t testing.TB, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}
