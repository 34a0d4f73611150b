package salt_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runMatrix runs the whole suite once per Salt installation in dirs
// (SALT_BIN_DIRS, a PATH-style list of bin directories), one after
// another: this test binary again, with the same flags and SALT_BIN_DIR
// set to each. It prints one line per installation (its version, the
// result, the time) and returns 0 only when every run passed.
func runMatrix(dirs []string) int {
	type result struct {
		dir, version, outcome string
		took                  time.Duration
	}
	var results []result
	code := 0
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		version := saltVersionIn(dir)
		fmt.Printf("=== real-Salt suite on Salt %s (%s)\n", version, dir)
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), "SALT_BIN_DIR="+dir, "SALT_BIN_DIRS=")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		start := time.Now()
		outcome := "PASS"
		if err := cmd.Run(); err != nil {
			outcome = "FAIL (" + err.Error() + ")"
			code = 1
		}
		results = append(results, result{dir, version, outcome, time.Since(start).Round(time.Second)})
	}
	fmt.Println("=== real-Salt suite, per version:")
	for _, r := range results {
		fmt.Printf("Salt %-8s %s in %s (%s)\n", r.version, r.outcome, r.took, r.dir)
	}
	return code
}

// saltVersionIn returns the version salt-master in dir reports
// ("salt-master 3007.1 (Chlorine)" gives 3007.1), or "unknown".
func saltVersionIn(dir string) string {
	out, err := exec.Command(filepath.Join(dir, "salt-master"), "--version").Output()
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return "unknown"
	}
	return f[1]
}
