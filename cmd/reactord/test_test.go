package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/testfiles"
)

// TestCmdTest: reactord test passes the shipped recipes' test files (exit
// 0) and writes their JUnit report, fails a test whose chunk differs (exit
// 1), and refuses a test file that does not load (exit 2).
func TestCmdTest(t *testing.T) {
	files, _ := filepath.Glob("../../examples/reactor/*/reactions_test.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d recipe test files", len(files))
	}
	junit := filepath.Join(t.TempDir(), "junit.xml")
	if code := cmdTest(append([]string{"--junit", junit}, files...)); code != exitOK {
		t.Fatalf("exit %d on the shipped test files", code)
	}
	if raw, err := os.ReadFile(junit); err != nil || !strings.Contains(string(raw), "<testsuites") || strings.Contains(string(raw), "<failure") {
		t.Fatalf("JUnit report: %v\n%s", err, raw)
	}
	dir := testfiles.Tree(t, map[string]string{
		"reactor.conf":  "reactor:\n  - 'x/*':\n    - f.sls\n",
		"f.sls":         "a:\n  local.test.ping:\n    - tgt: web1\n",
		"t_test.yaml":   "reactor: reactor.conf\ntests:\n  - {name: a, event: {tag: x/y}, expect: [{tgt: web2}]}\n",
		"bad_test.yaml": "reactor: reactor.conf\ntests:\n  - {name: a, event: {tag: x/y}}\n",
	})
	if code := cmdTest([]string{"-v", filepath.Join(dir, "t_test.yaml")}); code != exitFound {
		t.Errorf("exit %d for a failing test, want %d", code, exitFound)
	}
	if code := cmdTest([]string{filepath.Join(dir, "t_test.yaml"), filepath.Join(dir, "bad_test.yaml")}); code != exitUsage {
		t.Errorf("exit %d for a test file that does not load, want %d", code, exitUsage)
	}
	if code := cmdTest(nil); code != exitUsage {
		t.Errorf("exit %d without a file, want %d", code, exitUsage)
	}
}
