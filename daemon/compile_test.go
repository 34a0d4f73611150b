package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/reactord/reactord/internal/syncbuf"
)

// TestEachFileCompiledOncePerLoad: the start and each reload compile every
// reaction file once: the check of the configuration and the engine that
// then reacts share the compiled files.
func TestEachFileCompiledOncePerLoad(t *testing.T) {
	dir := t.TempDir()
	const files = 3
	var conf strings.Builder
	conf.WriteString("reactor:\n")
	for i := range files {
		sls := filepath.Join(dir, fmt.Sprintf("r%d.sls", i))
		src := fmt.Sprintf("r%d:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n", i)
		if err := os.WriteFile(sls, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "  - 'salt/minion/*/start':\n    - %s\n", sls)
	}
	path := filepath.Join(dir, "master")
	if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Config = path
	hup := make(chan os.Signal, 1)
	stderr := &syncbuf.Buffer{}
	o.Hup, o.Stderr = hup, stderr

	d, _ := runDaemon(t, o)
	before := 0.0
	if err := d.Health(); err != nil { // looks at every file of the running engine
		t.Fatal(err)
	}
	if n := compiled(t, d) - before; n != files {
		t.Errorf("the start compiled %v reaction files, want %d (each once)", n, files)
	}

	before = compiled(t, d)
	hup <- syscall.SIGHUP
	waitFor(t, stderr, "configuration reloaded")
	if err := d.Health(); err != nil {
		t.Fatal(err)
	}
	if n := compiled(t, d) - before; n != files {
		t.Errorf("the reload compiled %v reaction files, want %d (each once)", n, files)
	}
}

// compiled reads reactord_reaction_files_compiled_total.
func compiled(t *testing.T, d *Daemon) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "reactord_reaction_files_compiled_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no reactord_reaction_files_compiled_total")
	return 0
}
