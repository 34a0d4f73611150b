package daemon

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/internal/syncbuf"
)

// saltDryRun is the dry run, and answers the reaction files' Salt calls as
// a driver that reaches the master does.
type saltDryRun struct{ *actions.DryRun }

// SaltCall answers pillar.get with "pillar-" and its key.
func (saltDryRun) SaltCall(_ context.Context, fun string, args []any, _ map[string]any) (any, error) {
	return "pillar-" + args[0].(string), nil
}

// TestSaltCallsAtStartAndAfterReload: the engine the daemon reacts with
// serves the reaction files' Salt calls through the driver, from the start
// (built once the driver is open) and after a reload (a new engine).
func TestSaltCallsAtStartAndAfterReload(t *testing.T) {
	dir := t.TempDir()
	sls := filepath.Join(dir, "r.sls")
	if err := os.WriteFile(sls, []byte("r:\n  local.test.arg:\n    - tgt: {{ data['id'] }}\n    - arg:\n      - {{ salt['pillar.get'](data['id']) }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "master")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/*':\n    - "+sls+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	hup := make(chan os.Signal, 1)
	o := testOptions(t)
	o.Config, o.Stderr, o.Hup = conf, stderr, hup
	o.DriverOverride = saltDryRun{actions.NewDryRun(out)}
	d, _ := runDaemon(t, o)

	publish(t, d, "myco/a", `{"id": "web1"}`)
	waitFor(t, out, `"arg":["pillar-web1"]`)

	if err := os.WriteFile(conf, []byte("reactor:\n  - 'myco/*':\n    - "+sls+"\n  - 'other/*':\n    - "+sls+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	waitFor(t, stderr, "rules=2")
	publish(t, d, "other/b", `{"id": "web2"}`)
	waitFor(t, out, `"arg":["pillar-web2"]`)
}
