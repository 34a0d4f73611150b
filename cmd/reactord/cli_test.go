package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestVersion: `reactord version` and `--version` print the version, the
// commit and the Go version on stdout (issue 10 #12).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := runCmd(t, "", args...)
		if code != exitOK || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "reactord ") || !strings.Contains(out, "commit ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: %q", args, out)
		}
	}
	if code, _, _ := runCmd(t, "", "version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d", code)
	}
}

// TestBuildInfoMetric: reactord_build_info is 1 with version, commit and
// goversion labels.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerBuildInfo(reg)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "reactord_build_info" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("value %v", m.GetGauge().GetValue())
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	b := readBuildInfo()
	if labels["version"] != b.Version || labels["commit"] != b.Commit || labels["goversion"] != runtime.Version() {
		t.Errorf("labels %v", labels)
	}
}

// TestHelpOnceOnStdout: every command's --help prints its help once, to
// stdout, and exits 0; jobs --help describes both subcommands' flags.
func TestHelpOnceOnStdout(t *testing.T) {
	cmds := [][]string{{"run"}, {"render"}, {"check"}, {"replay"}, {"fire"}, {"events"}, {"bench"}, {"bridge"},
		{"explain"}, {"jobs"}, {"jobs", "list"}, {"jobs", "lookup"}, {"trace"}, {"version"}}
	for _, c := range cmds {
		code, out, errOut := runCmd(t, "", append(c, "--help")...)
		if code != exitOK || errOut != "" {
			t.Errorf("%v --help: exit %d, stderr %q", c, code, errOut)
		}
		if n := strings.Count(out, "Usage: "); n < 1 || (c[0] != "jobs" || len(c) > 1) && n != 1 {
			t.Errorf("%v --help: %d usage sections:\n%s", c, n, out)
		}
	}
	_, out, _ := runCmd(t, "", "jobs", "--help")
	for _, want := range []string{"reactord jobs list", "reactord jobs lookup JID", "-limit", "-since", "-out", "-store"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs --help lacks %q:\n%s", want, out)
		}
	}
}
