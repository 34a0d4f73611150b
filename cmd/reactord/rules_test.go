package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/wait"
)

// TestRules: reactord rules lists the running daemon's rules with their
// files and load time, and counts a dispatched reaction against its rule.
func TestRules(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	listen := freeAddr(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--dry-run", "--listen", listen, "--data-dir", "")
	code, out, errOut := runBin(t, nil, "rules", "--http", p.http, "--out", "json")
	if code != exitOK {
		t.Fatalf("rules: exit %d, %s", code, errOut)
	}
	var rep daemon.RulesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rules --out json: %v\n%s", err, out)
	}
	if len(rep.Rules) == 0 || rep.LoadedAt.IsZero() || time.Since(rep.LoadedAt) > time.Minute {
		t.Fatalf("rules: %+v", rep)
	}
	var start *daemon.RuleStatus
	for i, r := range rep.Rules {
		if r.Glob == "salt/minion/*/start" {
			start = &rep.Rules[i]
		}
	}
	if start == nil || len(start.Files) == 0 || start.Dispatched != 0 || !start.Last.IsZero() {
		t.Fatalf("the start rule before any event: %+v", start)
	}
	if code, _, errOut := runBin(t, nil, "fire", "--nats", "nats://"+listen, "salt/minion/web1/start", `{"id": "web1"}`); code != exitOK {
		t.Fatalf("fire: exit %d, %s", code, errOut)
	}
	readReaction(t, p)
	wait.For(t, 10*time.Second, func() error {
		_, out, _ := runBin(t, nil, "rules", "--http", p.http)
		if !strings.Contains(out, "salt/minion/*/start") || !strings.Contains(out, ": 1 dispatched, 0 held, 0 failed, last 2") {
			return errNotYet(out)
		}
		return nil
	})
	if code, _, errOut := runBin(t, nil, "rules"); code != exitUsage || !strings.Contains(errOut, "--http") {
		t.Fatalf("rules without --http: exit %d, %s", code, errOut)
	}
}

// errNotYet is a wait's error carrying what was seen.
type errNotYet string

func (e errNotYet) Error() string { return "not yet:\n" + string(e) }
