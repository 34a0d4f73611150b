package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/natsbus"
)

// TestCheckNATS: reactord check --nats URL (no -c) reports the server's
// version, JetStream, and each feature, as text and as JSON; with -c, a
// feature the configuration turns on that the server refuses is a
// problem (exit 1), a feature it falls back from is not. Each release of
// $REACTORD_TEST_NATS_SERVERS is checked too: they all refuse
// --partitions (2.14.0, consumer reset).
func TestCheckNATS(t *testing.T) {
	t.Parallel()
	for _, s := range serversUnderTest(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			url, c := s.start(t)
			v, err := natsbus.ParseVersion(c.NATS().ConnectedServerVersion())
			if err != nil {
				t.Fatal(err)
			}
			partsOK := !v.Less(natsbus.Version{Major: 2, Minor: 14})
			stateOK := !v.Less(natsbus.Version{Major: 2, Minor: 11})
			batchOK := !v.Less(natsbus.Version{Major: 2, Minor: 12})
			trimOK := !v.Less(natsbus.Version{Major: 2, Minor: 10})

			code, out, errOut := runCmd(t, "", "check", "--nats", url)
			if code != exitOK {
				t.Fatalf("check --nats: exit %d\n%s%s", code, out, errOut)
			}
			want := []string{
				"nats: " + url + " runs nats-server " + v.String() + "\n",
				"nats: JetStream on",
				"feature --jetstream: works\n",
				"feature --dedupe-masters: works\n",
			}
			if partsOK {
				want = append(want, "feature --partitions: works\n")
			} else {
				want = append(want, "feature --partitions: refused: needs nats-server 2.14.0 or later (consumer reset) (server runs "+v.String()+")\n")
			}
			if stateOK {
				want = append(want, "feature --shared-state: works\n")
			} else {
				want = append(want, "feature --shared-state: refused: needs nats-server 2.11.0 or later (per-message TTLs) (server runs "+v.String()+"); the daemon falls back: the state stays in each process's memory\n")
			}
			if batchOK {
				want = append(want, "feature batched publishing: works\n")
			} else {
				want = append(want, "feature batched publishing: refused: needs nats-server 2.12.0 or later (atomic batch publish) (server runs "+v.String()+"); the daemon falls back: each event published and flushed on its own (several in flight)\n")
			}
			if trimOK {
				want = append(want, "feature trimmed event stream: works\n")
			} else {
				want = append(want, "feature trimmed event stream: refused: needs nats-server 2.10.0 or later (stream metadata) (server runs "+v.String()+"); the daemon falls back: a work queue, which removes and flushes each acknowledged event on its own\n")
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}

			code, out, _ = runCmd(t, "", "check", "--nats", url, "--out", "json")
			var doc struct {
				OK   bool `json:"ok"`
				NATS struct {
					Version   string `json:"version"`
					JetStream bool   `json:"jetstream"`
					Features  []struct {
						Feature, Status, Reason string
					} `json:"features"`
				} `json:"nats"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
				t.Fatalf("--out json: exit %d, %v\n%s", code, err, out)
			}
			status := map[string]string{}
			for _, f := range doc.NATS.Features {
				status[f.Feature] = f.Status
			}
			if !doc.OK || doc.NATS.Version != v.String() || !doc.NATS.JetStream || len(status) != 6 ||
				status["trimmed event stream"] != map[bool]string{true: "works", false: "refused"}[trimOK] ||
				status["batched publishing"] != map[bool]string{true: "works", false: "refused"}[batchOK] ||
				status["--partitions"] != map[bool]string{true: "works", false: "refused"}[partsOK] ||
				status["--shared-state"] != map[bool]string{true: "works", false: "refused"}[stateOK] {
				t.Fatalf("--out json: %+v", doc)
			}

			// A configuration with partitions: refused where the server
			// is older than 2.14, a problem.
			dir := writeFiles(t, map[string]string{
				"reactor.conf": "reactor:\n  - 'x/*': x.sls\nreactord:\n  partitions: 3\n  shared_state: true\n",
				"x.sls":        "x:\n  local.test.ping:\n    - tgt: a\n",
			})
			code, out, errOut = runCmd(t, "", "check", "-c", filepath.Join(dir, "reactor.conf"), "--nats", url, "--offline")
			if partsOK {
				if code != exitOK {
					t.Fatalf("-c with partitions on %s: exit %d\n%s%s", v, code, out, errOut)
				}
				return
			}
			if code != exitFound || !strings.Contains(errOut, "nats: the configuration turns on --partitions, which "+url+" refuses: --partitions needs nats-server 2.14.0 or later (consumer reset); "+url+" runs "+v.String()) {
				t.Fatalf("-c with partitions on %s: exit %d, want %d and the refusal\n%s%s", v, code, exitFound, out, errOut)
			}
			if strings.Contains(errOut, "--shared-state") {
				t.Fatalf("the shared state's fallback counted as a problem:\n%s", errOut)
			}
		})
	}
}

// TestCheckNATSUsage: check needs -c or --nats; a server that does not
// answer is a problem, not a crash.
func TestCheckNATSUsage(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCmd(t, "", "check")
	if code != exitUsage || !strings.Contains(errOut, "check: need -c CONF, or --nats URL") {
		t.Fatalf("check alone: exit %d\n%s", code, errOut)
	}
	url := "nats://" + freeAddr(t) // nothing listens there
	code, out, errOut := runCmd(t, "", "check", "--nats", url)
	if code != exitFound || !strings.Contains(errOut, "nats: connecting to NATS at "+url) || !strings.Contains(out, "1 problem(s) found") {
		t.Fatalf("check --nats %s (no server): exit %d\n%s%s", url, code, out, errOut)
	}
}

// TestCheckNATSNeedsConfig: check --nats without -c refuses what needs a
// configuration (--event, --events, --settings, --rules) with a usage
// error naming the flag; with -c whose daemon settings do not merge, the
// features the configuration turns on cannot be checked: a problem
// saying so, not a silent pass.
func TestCheckNATSNeedsConfig(t *testing.T) {
	t.Parallel()
	srv, _ := natstest.Start(t)
	url := srv.ClientURL()
	for _, flags := range [][]string{{"--event", "-"}, {"--events", "-"}, {"--settings"}, {"--rules"}} {
		code, out, errOut := runCmd(t, "", append([]string{"check", "--nats", url}, flags...)...)
		if code != exitUsage || !strings.Contains(errOut, flags[0]+" needs -c CONF") {
			t.Errorf("check --nats %s without -c: exit %d, want %d and a line naming %s:\n%s%s", flags, code, exitUsage, flags[0], out, errOut)
		}
	}
	conf := filepath.Join(t.TempDir(), "reactor.conf")
	if err := os.WriteFile(conf, []byte("reactor: []\nreactord:\n  partitions: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "", "check", "-c", conf, "--nats", url)
	if code != exitFound || !strings.Contains(out+errOut, "cannot merge the daemon's settings from "+conf) {
		t.Errorf("check -c (settings that do not merge) --nats: exit %d, want %d and a problem saying the features were not checked:\n%s%s", code, exitFound, out, errOut)
	}
}
