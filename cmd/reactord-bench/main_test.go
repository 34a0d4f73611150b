package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binPath is the reactord-bench binary the process tests run (its
// --replicas start it again as publisher, NATS nodes and daemons).
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reactord-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "reactord-bench")
	build := []string{"build", "-o", binPath}
	if raceEnabled {
		build = append(build, "-race")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building reactord-bench: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runCmd runs the bench in this process (with --separate-publisher=false:
// the test binary is not the bench's publisher).
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestEventsFlags: --events FILE, its former spelling --file, and
// --events N, the former spelling of --count; the help shows the one
// spelling.
func TestEventsFlags(t *testing.T) {
	const evs = `{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}` + "\n"
	file := filepath.Join(t.TempDir(), "day.jsonl")
	if err := os.WriteFile(file, []byte(evs), 0o644); err != nil {
		t.Fatal(err)
	}
	_, help, _ := runCmd(t, "--help")
	for _, w := range []string{"-events", "-count", "--events FILE"} {
		if !strings.Contains(help, w) {
			t.Errorf("--help lacks %q:\n%s", w, help)
		}
	}
	if strings.Contains(help, "  -file") {
		t.Errorf("--help shows the former spelling --file:\n%s", help)
	}
	// bench: --events FILE, its former spelling --file, and --events N,
	// the former spelling of --count (fire's --file is in its tests).
	for _, args := range [][]string{
		{"--count", "20", "--events", file},
		{"--count", "20", "--file", file},
		{"--events", "20"},
	} {
		code, out, errOut := runCmd(t, append([]string{"--separate-publisher=false"}, args...)...)
		if code != exitOK || !strings.Contains(out, `"events":20,`) || strings.Contains(out, `"reactions":0,`) {
			t.Errorf("bench %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	var f string
	n := 5
	v := eventsOrCount{file: &f, count: &n}
	if err := v.Set("1000"); err != nil || n != 1000 || f != "" {
		t.Errorf("--events 1000: count %d file %q (%v)", n, f, err)
	}
	if err := v.Set("day.jsonl"); err != nil || n != 1000 || f != "day.jsonl" {
		t.Errorf("--events day.jsonl: count %d file %q (%v)", n, f, err)
	}
	if err := v.Set("-1"); err == nil {
		t.Error("--events -1 accepted")
	}
}

// TestSeparatePublisher: the default run publishes from a child process
// (reactord-bench publish), authenticated with the embedded server's token.
func TestSeparatePublisher(t *testing.T) {
	out, err := exec.Command(binPath, "--count", "500").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), `"handled":500,`) {
		t.Errorf("not every event handled: %s", out)
	}
}
