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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	cmds := [][]string{{"run"}, {"render"}, {"check"}, {"replay"}, {"fire"}, {"events"}, {"bridge"},
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

// TestInvalidFlagValues: a negative number, or 0 where it means nothing,
// is a usage error naming the flag, before anything starts (issue 10 #14).
func TestInvalidFlagValues(t *testing.T) {
	t.Parallel()
	conf := exampleConf
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-c", conf, "--workers", "-1"}, "--workers: must not be negative"},
		{[]string{"-c", conf, "--settle", "-5s"}, "--settle: must not be negative"},
		{[]string{"-c", conf, "--queue", "-1"}, "--queue: must not be negative"},
		{[]string{"-c", conf, "--in-flight", "-1"}, "--in-flight: must not be negative"},
		{[]string{"-c", conf, "--drain-timeout", "-1s"}, "--drain-timeout: must not be negative"},
		{[]string{"-c", conf, "--drain-timeout", "0s"}, "--drain-timeout: must be more than 0"},
		{[]string{"-c", conf, "--ack-wait", "-30s"}, "--ack-wait: must not be negative"},
		{[]string{"-c", conf, "--hand-over-after", "-5ms"}, "--hand-over-after: must not be negative"},
		{[]string{"-c", conf, "--keep-jobs", "-24h"}, "--keep-jobs: must not be negative"},
		{[]string{"-c", conf, "--job-timeout", "-1m"}, "--job-timeout: must not be negative"},
		{[]string{"-c", conf, "--max-hops", "-3"}, "--max-hops: must not be negative"},
		{[]string{"-c", conf, "--log-format", "xml"}, `--log-format "xml": want text or json`},
		{[]string{"bridge", "--log-format", "xml"}, `--log-format "xml": want text or json`},
		{[]string{"-c", conf, "--max-payload", "0"}, "--max-payload: must be more than 0"},
		{[]string{"-c", conf, "--store-spool", "-1"}, "--store-spool: must not be negative"},
		{[]string{"-c", conf, "--exec-timeout", "-1s"}, "--exec-timeout: must not be negative"},
		{[]string{"replay", "-c", conf, "--workers", "-2", "-"}, "--workers: must not be negative"},
		{[]string{"fire", "--nats", "nats://127.0.0.1:1", "--hop", "-1", "a/b"}, "--hop: must not be negative"},
		{[]string{"events", "--nats", "nats://127.0.0.1:1", "--count", "-1"}, "--count: must not be negative"},
		{[]string{"jobs", "list", "--limit", "-1"}, "--limit: must not be negative"},
		{[]string{"bridge", "--spool-disk", "-1"}, "--spool-disk: must not be negative"},
		{[]string{"-c", conf, "--dry-run", "--driver", "exec"}, "--dry-run executes nothing but --driver exec executes reactions"},
		{[]string{"-c", conf, "--pprof"}, "--pprof (or pprof:) serves Go's profiles on --http: give --http ADDR (or http:) too"},
		{[]string{"bridge", "--pprof"}, "--pprof serves Go's profiles on --http: give --http ADDR too"},
		{[]string{"fire", "--nats", "nats://127.0.0.1:1", ""}, "the event tag is empty"},
		{[]string{"fire", "--nats", "nats://127.0.0.1:1", " ", "{}"}, "the event tag is empty"},
		{[]string{"events", "--nats", "nats://127.0.0.1:1", "--out", "yaml"}, `--out "yaml": want pretty or json`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, "", c.args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, c.want)
			}
		})
	}
}

// TestNATSHelpSaysWhatEmptyDoes: only the daemon starts an embedded server
// when --nats is empty; the other commands' help does not say it does.
func TestNATSHelpSaysWhatEmptyDoes(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "fire", "events", "bridge"} {
		_, out, _ := runCmd(t, "", cmd, "--help")
		if says := strings.Contains(out, "start an embedded server"); says != (cmd == "run") {
			t.Errorf("%s --help: says it starts an embedded server: %v\n%s", cmd, says, out)
		}
	}
}

// TestFireFileRefusesEmptyTag: a line without a tag is reported with its
// line number; the others are published.
func TestFireFileRefusesEmptyTag(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	code, _, errOut := runCmd(t, "{\"tag\": \"\", \"data\": {}}\n{\"tag\": \"a/b\", \"data\": {}}\n", "fire", "--nats", srv.ClientURL(), "--file", "-")
	if code != exitFound || !strings.Contains(errOut, "line 1: ") || !strings.Contains(errOut, " tag") || !strings.Contains(errOut, "published 1 event(s)") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestHiddenAlias: a former flag spelling sets the flag and is left out of
// the help (issue 10 #13).
func TestHiddenAlias(t *testing.T) {
	t.Parallel()
	var help strings.Builder
	fs := newFlags("x", "x", "x", &help)
	s := fs.String("saltapi-url", "", "the URL")
	b := fs.Bool("quiet", false, "be quiet")
	aliasFlag(fs, "salt-api", "saltapi-url")
	aliasFlag(fs, "silent", "quiet")
	if err := fs.Parse([]string{"--salt-api", "https://api", "--silent"}); err != nil {
		t.Fatal(err)
	}
	if *s != "https://api" || !*b {
		t.Fatalf("--salt-api set %q, --silent set %v", *s, *b)
	}
	fs.Usage()
	if h := help.String(); strings.Contains(h, "salt-api") || strings.Contains(h, "silent") || !strings.Contains(h, "-saltapi-url string") || !strings.Contains(h, "-quiet") {
		t.Fatalf("help:\n%s", h)
	}
	_, out, _ := runCmd(t, "", "bridge", "--help")
	if !strings.Contains(out, "-saltapi-url string") || strings.Contains(out, "-salt-api ") {
		t.Fatalf("bridge --help:\n%s", out)
	}
}
