package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStoreReadersFindTheStore: jobs, trace and events --since find the
// daemon's store from -c CONF (its reactord: store, store_file or
// data_dir) or --data-dir, as the daemon does; --store wins; events
// --since shows each event's id, in both formats, and what it prints
// replays and fires (issue 10 #10).
func TestStoreReadersFindTheStore(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	url := "sqlite://" + filepath.Join(dataDir, "reactord.db")
	evs := readRecordedEvents(t)
	archive(t, url, evs)
	const jid = "20261123102304655343"

	urlFile := filepath.Join(t.TempDir(), "store.url")
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	confs := writeFiles(t, map[string]string{
		"data_dir.conf":   "reactor: []\nreactord:\n  data_dir: " + dataDir + "\n",
		"store.conf":      "reactor: []\nreactord:\n  store: " + url + "\n",
		"store_file.conf": "reactor: []\nreactord:\n  store_file: " + urlFile + "\n",
	})
	empty := "sqlite://" + filepath.Join(t.TempDir(), "empty.db")
	archive(t, empty, nil) // a store with nothing in it
	for _, where := range [][]string{
		{"--data-dir", dataDir},
		{"-c", filepath.Join(confs, "data_dir.conf")},
		{"-c", filepath.Join(confs, "store.conf")},
		{"-c", filepath.Join(confs, "store_file.conf"), "--data-dir", t.TempDir()},
	} {
		t.Run(strings.Join(where, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, "", append([]string{"jobs", "list"}, where...)...)
			if code != exitOK || !strings.Contains(out, jid+":") {
				t.Errorf("jobs list %v: exit %d\n%s%s", where, code, out, errOut)
			}
			code, out, errOut = runCmd(t, "", append([]string{"jobs", "lookup", jid, "--out", "json"}, where...)...)
			if code != exitOK || !strings.Contains(out, `"web1"`) {
				t.Errorf("jobs lookup %v: exit %d\n%s%s", where, code, out, errOut)
			}
			code, out, errOut = runCmd(t, "", append(append([]string{"events", "--since", "1h"}, where...), "salt/job/*/new")...)
			if code != exitOK || !strings.Contains(out, "\nsalt/job/"+jid+"/new\t{") || !regexp.MustCompile(`(?m)^# event_id=ev-\d+$`).MatchString(out) {
				t.Errorf("events --since %v: exit %d\n%s%s", where, code, out, errOut)
			}
			// trace looks in the same store: nothing was dispatched, so
			// it finds nothing, but it opened the right store without
			// error.
			code, _, errOut = runCmd(t, "", append([]string{"trace", jid}, where...)...)
			if code != exitFound || !strings.Contains(errOut, "nothing recorded for "+jid) {
				t.Errorf("trace %v: exit %d\n%s", where, code, errOut)
			}
			// --store wins.
			code, out, _ = runCmd(t, "", append([]string{"jobs", "list", "--store", empty}, where...)...)
			if code != exitOK || out != "" {
				t.Errorf("jobs list --store EMPTY %v: exit %d\n%s", where, code, out)
			}
		})
	}

	// A data directory without a store is an error naming where it
	// looked, not an empty database created to say "nothing recorded".
	nowhere := filepath.Join(t.TempDir(), "not-the-data-dir")
	for _, cmd := range [][]string{{"jobs", "list"}, {"trace", jid}, {"events", "--since", "1h"}} {
		code, _, errOut := runCmd(t, "", append(cmd, "--data-dir", nowhere)...)
		if code != exitUsage || !strings.Contains(errOut, "no audit store at "+filepath.Join(nowhere, "reactord.db")) {
			t.Errorf("%v on a wrong data dir: exit %d\n%s", cmd, code, errOut)
		}
	}
	if _, err := os.Stat(nowhere); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reading a wrong data dir created it: %v", err)
	}

	// A configuration that does not load is an error naming it.
	bad := writeFiles(t, map[string]string{"bad.conf": "reactord:\n  queue: -1\n"})
	if code, _, errOut := runCmd(t, "", "jobs", "list", "-c", filepath.Join(bad, "bad.conf")); code != exitUsage || !strings.Contains(errOut, "bad.conf:2:10: reactord.queue must not be negative") {
		t.Errorf("jobs list -c BAD: exit %d\n%s", code, errOut)
	}

	// --out json carries "event_id"; replay and fire --file read it.
	code, out, errOut := runCmd(t, "", "events", "--since", "1h", "--data-dir", dataDir, "--out", "json")
	if code != exitOK {
		t.Fatalf("events --out json: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		var ev struct {
			Tag     string         `json:"tag"`
			Data    map[string]any `json:"data"`
			EventID string         `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Tag == "" || !strings.HasPrefix(ev.EventID, "ev-") {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	code, _, errOut = runCmd(t, out, "replay", "-c", exampleConf, "--quiet", "-")
	if strings.Contains(errOut, "malformed") || !strings.Contains(errOut, `{"events":`+itoa(len(lines))+`,`) {
		t.Errorf("replay of events --since --out json: exit %d\n%s", code, errOut)
	}
	srv, _ := natsServer(t)
	code, _, errOut = runCmd(t, out, "fire", "--nats", srv.ClientURL(), "--file", "-")
	if code != exitOK || !strings.Contains(errOut, "published "+itoa(len(lines))+" event(s)") {
		t.Errorf("fire --file of events --since --out json: exit %d\n%s", code, errOut)
	}
	// So does the pretty format, with its event id lines.
	_, pretty, _ := runCmd(t, "", "events", "--since", "1h", "--data-dir", dataDir)
	code, _, errOut = runCmd(t, pretty, "replay", "-c", exampleConf, "--quiet", "-")
	if strings.Contains(errOut, "malformed") || !strings.Contains(errOut, `{"events":`+itoa(len(lines))+`,`) {
		t.Errorf("replay of events --since: exit %d\n%s", code, errOut)
	}
}
