package reactor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
)

// dropIn is the master.d drop-in example the README points to.
const dropIn = "../master.d/reactord.conf"

// TestMasterDDropIn loads examples/master.d/reactord.conf both ways its
// header describes: as the only file of a directory reactord reads
// (`reactord -c /etc/reactord`), and as a master.d drop-in beside a master
// file whose own reactor: list it replaces, as in Salt.
func TestMasterDDropIn(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		if rep := engine.Check(filepath.Dir(dropIn), ""); len(rep.Problems) > 0 || rep.Rules != 4 {
			t.Fatalf("reactord check -c examples/master.d: %d rules, problems %v", rep.Rules, rep.Problems)
		}
		cfg, err := config.Load(filepath.Dir(dropIn))
		if err != nil {
			t.Fatal(err)
		}
		checkDropIn(t, cfg)
	})
	t.Run("beside a master", func(t *testing.T) {
		src, err := os.ReadFile(dropIn)
		if err != nil {
			t.Fatal(err)
		}
		recipes, _ := filepath.Abs(".")
		dir := t.TempDir()
		// On a master the paths are absolute; the copy points at the recipes.
		text := strings.ReplaceAll(string(src), "../reactor/", recipes+"/")
		if err := os.MkdirAll(filepath.Join(dir, "master.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "master.d", "reactord.conf"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		master := "reactor:\n  - 'never/*':\n    - " + recipes + "/start-on-minion-start/highstate.sls\n"
		if err := os.WriteFile(filepath.Join(dir, "master"), []byte(master), 0o644); err != nil {
			t.Fatal(err)
		}
		if rep := engine.Check(filepath.Join(dir, "master"), ""); len(rep.Problems) > 0 || rep.Rules != 4 {
			t.Fatalf("reactord check -c master: %d rules, problems %v", rep.Rules, rep.Problems)
		}
		cfg, err := config.Load(filepath.Join(dir, "master"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cfg.Rules {
			if r.Glob == "never/*" {
				t.Errorf("the master file's reactor: list was kept; a master.d reactor: list replaces it")
			}
		}
		checkDropIn(t, cfg)
	})
}

func checkDropIn(t *testing.T, cfg *config.Config) {
	t.Helper()
	s := cfg.Settings
	if s.Driver != "dryrun" || s.Settle != 2*time.Second || s.JobTimeout != 5*time.Minute || s.MaxHops != 3 {
		t.Errorf("reactord: section not read: %+v", s)
	}
	eng := engine.MustNew(cfg, engine.Options{})
	for _, c := range []struct {
		event, fun string
	}{
		{`{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}`, "state.apply"},
		{`{"tag": "salt/auth", "data": {"act": "pend", "id": "web2", "result": true}}`, "key.accept"},
		{`{"tag": "salt/beacon/web1/inotify//etc/important_file", "data": {"id": "web1", "change": "IN_MODIFY", "path": "/etc/important_file"}}`, "state.apply"},
		{`{"tag": "salt/beacon/web1/inotify//etc/important_file", "data": {"id": "web1", "change": "IN_ACCESS", "path": "/etc/important_file"}}`, ""},
	} {
		ev, err := event.Decode([]byte(c.event))
		if err != nil {
			t.Fatal(err)
		}
		res, err := eng.Process(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if errs := res.Errors(); len(errs) > 0 {
			t.Errorf("%s: %v", ev.Tag, errs)
		}
		var funs []string
		for _, ch := range res.Chunks {
			funs = append(funs, ch.Str("fun"))
		}
		if got := strings.Join(funs, ","); got != c.fun {
			t.Errorf("%s %v: reactions %q, want %q", ev.Tag, ev.Data, got, c.fun)
		}
	}
}
