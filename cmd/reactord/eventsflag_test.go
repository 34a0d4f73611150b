package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEventFileFlags: one event is --event FILE, a file of events is
// --events FILE in every command; the former spellings (replay's
// positional, fire's and bench's --file, bench's --events N) still work
// and are not in the help (issue 10 #13).
func TestEventFileFlags(t *testing.T) {
	t.Parallel()
	const evs = `{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}` + "\n"
	file := filepath.Join(writeFiles(t, map[string]string{"day.jsonl": evs}), "day.jsonl")

	// replay: --events FILE, the positional FILE, --events - (stdin).
	var outs []string
	for _, args := range [][]string{
		{"replay", "-c", exampleConf, "--events", file},
		{"replay", "-c", exampleConf, file},
		{"replay", "-c", exampleConf, "--events", "-"},
	} {
		code, out, errOut := runCmd(t, evs, args...)
		if code != exitOK || !strings.Contains(out, `"tgt":"web1"`) {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] || outs[1] != outs[2] {
		t.Errorf("--events, the positional and stdin differ:\n%s", strings.Join(outs, "\n"))
	}
	if code, _, errOut := runCmd(t, "", "replay", "-c", exampleConf, "--events", file, file); code != exitUsage || !strings.Contains(errOut, "--events FILE") {
		t.Errorf("--events and a positional: exit %d\n%s", code, errOut)
	}

	// The help shows the one spelling.
	for cmd, want := range map[string][]string{
		"replay": {"-events", "reactord replay -c CONF [--quiet] --events FILE|-"},
		"fire":   {"-events", "--events FILE|-"},
		"check":  {"-event ", "-events"},
		"render": {"-event "},
	} {
		_, help, _ := runCmd(t, "", cmd, "--help")
		for _, w := range want {
			if !strings.Contains(help, w) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, w, help)
			}
		}
		if strings.Contains(help, "  -file") {
			t.Errorf("%s --help shows the former spelling --file:\n%s", cmd, help)
		}
	}
}
