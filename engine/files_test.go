package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reactord/reactord/config"
)

// loadFiles writes files (a reactor.conf among them) into a temporary
// directory and loads its reactor.conf.
func loadFiles(t *testing.T, files map[string]string) (dir string, cfg *config.Config) {
	t.Helper()
	dir = t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}
