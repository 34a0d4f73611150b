package engine

import (
	"path/filepath"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/testfiles"
)

// loadFiles writes files (a reactor.conf among them) into a temporary
// directory and loads its reactor.conf.
func loadFiles(t *testing.T, files map[string]string) (dir string, cfg *config.Config) {
	t.Helper()
	dir = testfiles.Tree(t, files)
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}
