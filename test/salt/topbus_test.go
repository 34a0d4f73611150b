package salt_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// busLine is one event `salt-run state.event` printed: its tag and data.
type busLine struct {
	tag  string
	data map[string]any
}

// watchBus follows e's event bus as an operator would, with `salt-run
// state.event`, and returns what it printed so far, as events.
func watchBus(e *saltEnv) func() []busLine {
	path := filepath.Join(e.dir, "log", fmt.Sprintf("salt-run-%d.out", len(e.procs)))
	e.start("salt-run", "-c", e.etc, "state.event", "pretty=False")
	return func() []busLine {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		var out []busLine
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			tag, raw, ok := strings.Cut(sc.Text(), "\t")
			if !ok {
				continue
			}
			var data map[string]any
			if json.Unmarshal([]byte(raw), &data) != nil {
				continue
			}
			out = append(out, busLine{tag, data})
		}
		return out
	}
}

// topBusCounts is what a master of masters' bus carried of its syndics'
// traffic: minion starts, the minions' key events, the syndics' wheel
// jobs (reactord's key.accept there) and how many copies of one job's
// `new` event it saw at most.
type topBusCounts struct {
	starts, minionKeys, syndicWheelNews, maxJobNewCopies int
}

// countTopBus sorts the top's events, the syndic/<id>/ copies folded into
// their plain tags; wheels lists the jids of the wheel jobs the syndics
// ran (none of them the top's own).
func countTopBus(lines []busLine, wheels map[string]bool) topBusCounts {
	var c topBusCounts
	news := map[string]int{}
	for _, l := range lines {
		tag := l.tag
		if rest, ok := strings.CutPrefix(tag, "syndic/"); ok {
			if _, plain, ok := strings.Cut(rest, "/"); ok {
				tag = plain
			}
		}
		parts := strings.Split(tag, "/")
		switch {
		case len(parts) == 4 && parts[0] == "salt" && parts[1] == "minion" && parts[3] == "start":
			c.starts++
		case tag == "salt/key":
			if id, _ := l.data["id"].(string); strings.HasPrefix(id, "web") {
				c.minionKeys++
			}
		case len(parts) == 4 && parts[0] == "salt" && parts[1] == "wheel" && parts[3] == "new" && wheels[parts[2]]:
			c.syndicWheelNews++
		case len(parts) == 4 && parts[0] == "salt" && parts[1] == "job" && parts[3] == "new":
			news[parts[2]]++
			c.maxJobNewCopies = max(c.maxJobNewCopies, news[parts[2]])
		}
	}
	return c
}

// blocklisted tells whether a Salt release drops the blocklisted tags of
// the event batches minions and syndics send (MINION_EVENT_BLACKLIST in
// salt/daemons/masterapi.py); ok is false for a release the suite has not
// been run on.
func blocklisted(version string) (drops, ok bool) {
	switch version {
	case "3006.16", "3007.8":
		return true, true
	case "3006.8", "3007.1":
		return false, true
	}
	return false, false
}

// checkTopBus logs what the top's bus carried and checks what the release
// promises of it: in sync mode the minions' starts come up (twice, plain
// and prefixed), and on the releases with the blocklist their key events
// and the syndics' wheel jobs do not; in cluster mode no minion event does.
func checkTopBus(t *testing.T, top *saltEnv, mode string, lines []busLine, wheels map[string]bool) {
	t.Helper()
	out, err := top.salt("salt-run", "--version")
	f := strings.Fields(out)
	if err != nil || len(f) < 2 {
		t.Errorf("salt-run --version on the top: %v: %q", err, out)
		return
	}
	version := f[1]
	c := countTopBus(lines, wheels)
	t.Logf("%s: the top's bus (Salt %s, salt-run state.event): %d events; %d minion starts, %d minion key events, %d of the syndics' %d wheel jobs' new events, at most %d copies of one job's new",
		mode, version, len(lines), c.starts, c.minionKeys, c.syndicWheelNews, len(wheels), c.maxJobNewCopies)
	if mode == "cluster" {
		if c.starts != 0 {
			t.Errorf("cluster mode: %d minion start events on the top, want none", c.starts)
		}
		return
	}
	if c.starts == 0 {
		t.Errorf("sync mode: no minion start event on the top's bus")
	}
	drops, known := blocklisted(version)
	if !known || !drops {
		return
	}
	if c.minionKeys != 0 || c.syndicWheelNews != 0 {
		t.Errorf("Salt %s drops salt/key and salt/wheel/*/new from its syndics: the top saw %d minion key events and %d syndic wheel jobs", version, c.minionKeys, c.syndicWheelNews)
	}
}
