package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// storeURLForTest picks the audit store: MariaDB or PostgreSQL when their
// test addresses are set, else SQLite in a temporary directory.
func storeURLsForTest(t *testing.T) map[string]string {
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "audit.db")}
	if u := os.Getenv("REACTORD_TEST_MYSQL_URL"); u != "" {
		urls["mysql"] = u
	}
	if u := os.Getenv("REACTORD_TEST_POSTGRES_URL"); u != "" {
		urls["postgres"] = u
	}
	return urls
}

// TestDaemonArchivesAndCLIReads runs the daemon with an audit store, fires
// a job publish, a job return and an event that reacts, then reads them
// back with jobs list, jobs lookup, trace and events --since.
func TestDaemonArchivesAndCLIReads(t *testing.T) {
	t.Parallel()
	for name, url := range storeURLsForTest(t) {
		t.Run(name, func(t *testing.T) {
			srv, c := natsServer(t)
			conf := copyExampleConfig(t)
			p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--dry-run", "--store", url)
			jid := time.Now().UTC().Format("20060102150405") + "123456"
			pub := func(tag, data string) {
				if err := c.Publish(context.Background(), natsbus.Msg{Tag: tag, Body: []byte(`{"tag": "` + tag + `", "data": ` + data + `}`)}, natsbus.Core); err != nil {
					t.Fatal(err)
				}
			}
			pub("salt/job/"+jid+"/new", `{"jid": "`+jid+`", "fun": "test.ping", "tgt": "web1", "tgt_type": "glob", "user": "root", "arg": [], "minions": ["web1"]}`)
			pub("salt/job/"+jid+"/ret/web1", `{"jid": "`+jid+`", "id": "web1", "fun": "test.ping", "return": true, "success": true, "retcode": 0, "fun_args": []}`)
			pub("salt/job/"+jid+"/ret/web2", `{"jid": "`+jid+`", "id": "web2", "fun": "test.ping", "return": {"a": 1}, "success": true, "retcode": 0, "fun_args": []}`)
			pub("salt/minion/web7/start", `{"id": "web7", "cmd": "_minion_event"}`)
			checkFor(t, 10*time.Second, func() error {
				if metricValue(t, scrape(t, p), `reactord_actions_total{driver="dryrun",state="dispatched"}`) == "0" {
					return errFmt("no dispatch yet")
				}
				return nil
			})
			p.terminate()
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				t.Fatal("daemon did not stop")
			}
			run := func(args ...string) string {
				t.Helper()
				code, out, errOut := runCmd(t, "", args...)
				if code != exitOK {
					t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
				}
				return out + errOut
			}
			if out := run("jobs", "list", "--store", url); !strings.Contains(out, jid+":") || !strings.Contains(out, "Function: test.ping") {
				t.Errorf("jobs list:\n%s", out)
			}
			var rets map[string]any
			out := run("jobs", "lookup", jid, "--out", "json", "--store", url)
			if err := json.Unmarshal([]byte(out), &rets); err != nil || rets["web1"] != true || rets["web2"] == nil {
				t.Errorf("jobs lookup --out json: %q (%v)", out, err)
			}
			// events --since names the event's id (an event the ledger
			// has something about), and trace takes it.
			m := regexp.MustCompile(`# event_id=(\S+)\nsalt/minion/web7/start\t`).FindStringSubmatch(run("events", "--since", "1h", "--store", url, "salt/minion/web7/*"))
			if m == nil {
				t.Fatal("events --since: no event_id for salt/minion/web7/start")
			}
			tr := run("trace", m[1], "--store", url)
			for _, want := range []string{"dispatched", "salt/minion/web7/start", "salt/minion/*/start", "highstate_on_start"} {
				if !strings.Contains(tr, want) {
					t.Errorf("trace lacks %q:\n%s", want, tr)
				}
			}
			ev := run("events", "--since", "1h", "--store", url, "salt/minion/*")
			if !strings.Contains(ev, "salt/minion/web7/start\t{") {
				t.Errorf("events --since:\n%s", ev)
			}
			// --out json prints what replay reads (issue 10 #9).
			rec := run("events", "--since", "1h", "--store", url, "--out", "json", "salt/minion/*")
			// The MariaDB and PostgreSQL test databases are shared with
			// other tests: look for this test's line among theirs.
			if !strings.HasPrefix(rec, `{"tag":"salt/minion/web7/start","data":{`) && !strings.Contains(rec, "\n"+`{"tag":"salt/minion/web7/start","data":{`) {
				t.Errorf("events --since --out json:\n%s", rec)
			}
			if code, out, errOut := runCmd(t, rec, "replay", "-c", conf, "-"); code != exitOK || !strings.Contains(out+errOut, "web7") {
				t.Errorf("replay of events --since --out json: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

type errFmt string

func (e errFmt) Error() string { return string(e) }
