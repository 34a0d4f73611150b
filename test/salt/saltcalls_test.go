package salt_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// TestSaltCallsOnRealSalt renders a Jinja reaction file that calls Salt
// while rendering (salt['config.get'], salt['file.file_exists'],
// salt['test.echo'], {% do salt.log.warning %}) with Salt's own reactor
// and with reactord beside it on the same master, through the saltapi
// and the master driver: both publish the same job. A call outside
// --salt-calls (cmd.run) fails that file's render, naming it.
func TestSaltCallsOnRealSalt(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"saltapi", "master"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sls := filepath.Join(dir, "callsalt.sls")
			writeFile(t, sls, `{% set iface = salt['config.get']('interface') %}
{% set exists = salt['file.file_exists']('/etc/hostname') %}
{% set echo = salt['test.echo'](data['id'] ~ '-echo') %}
{% do salt.log.warning('rendering for ' ~ data['id']) %}
callsalt_{{ data['id'] }}:
  local.test.arg:
    - tgt: {{ data['id'] }}
    - arg:
      - {{ iface }}
      - {{ exists }}
      - {{ echo }}
      - {{ tag }}
`)
			forbidden := filepath.Join(dir, "forbidden.sls")
			writeFile(t, forbidden, "{% set me = salt['cmd.run']('id') %}\nnever:\n  local.test.ping:\n    - tgt: {{ me }}\n")
			e := startSalt(t, saltOptions{masterExtra: "reactor:\n  - 'myco/callsalt/*':\n    - " + sls + "\n"})
			r := startReactordRules(t, e, driver, filepath.Join(rootDir(), "examples/reactor/revert-on-inotify/revert.sls"),
				"  - 'myco/callsalt/*':\n    - "+sls+"\n  - 'myco/forbidden':\n    - "+forbidden+"\n")
			e.startMinions()
			waitFor(t, 120*time.Second, "minion keys accepted by the reactor", func() error {
				out, err := e.salt("salt", "--out", "json", "--static", "*", "test.ping")
				if err != nil || strings.Count(out, "true") < 2 {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
			if out, err := e.salt("salt-run", "event.send", "myco/callsalt/web1", `{"id": "web1"}`); err != nil {
				t.Fatalf("event.send: %v %s", err, out)
			}
			if out, err := e.salt("salt-run", "event.send", "myco/forbidden", `{"id": "web1"}`); err != nil {
				t.Fatalf("event.send: %v %s", err, out)
			}
			jobs := func() []event.Event {
				return r.seen(func(ev event.Event) bool { return strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "test.arg" })
			}
			waitFor(t, 60*time.Second, "test.arg from Salt's reactor and from reactord", func() error {
				if n := len(jobs()); n != 2 {
					return fmt.Errorf("%d test.arg jobs", n)
				}
				return nil
			})
			js := jobs()
			a, b := fmt.Sprint(js[0].Data["arg"]), fmt.Sprint(js[1].Data["arg"])
			t.Logf("Salt's reactor and reactord published test.arg %s and %s", a, b)
			if a != b || !strings.Contains(a, "127.0.0.1") || !strings.Contains(a, "web1-echo") {
				t.Errorf("the two jobs differ or miss the calls' answers: %s vs %s", a, b)
			}
			waitFor(t, 30*time.Second, "reactord's log of the salt.log call and the refused call", func() error {
				if !strings.Contains(r.log(), "rendering for web1") || !strings.Contains(r.log(), "salt['cmd.run'](...): not allowed while rendering") {
					return fmt.Errorf("not yet")
				}
				return nil
			})
		})
	}
}

func rootDir() string { root, _ := filepath.Abs("../.."); return root }
