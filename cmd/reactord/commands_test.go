package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCommandDocs: the package doc (doc.go) and docs/operating.md list
// the commands of the table, with their summaries, as 'reactord help'
// does; a command added, removed or reworded in commands.go and not
// there fails here, printing the list to paste.
func TestCommandDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if want := commands.List("//\t"); !strings.Contains(string(doc), want) {
		t.Errorf("doc.go does not list the commands of commands.go; want, as a block:\n%s", want)
	}
	ops, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	var list strings.Builder
	for _, c := range commands.All() {
		fmt.Fprintf(&list, "- `reactord %s`: %s\n", c.Name, c.Short)
	}
	if !strings.Contains(string(ops), list.String()) {
		t.Errorf("docs/operating.md does not list the commands of commands.go; want, under ### Tools:\n%s", list.String())
	}
}

// TestEveryCommandHelp: 'reactord help COMMAND' and 'reactord COMMAND
// --help' print the same help, to stdout, beginning with the usage the
// table declares (fire and events build their flags themselves: their
// help must not drift from the table).
func TestEveryCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands.Commands {
		if c.Usage == "" {
			continue // a group: its subcommands' help
		}
		args := strings.Fields(c.Name)
		code, viaHelp, errOut := runCmd(t, "", append([]string{"help"}, args...)...)
		if code != exitOK || errOut != "" || !strings.HasPrefix(viaHelp, "Usage: "+c.Usage+"\n") {
			t.Errorf("help %s: exit %d, stderr %q, stdout:\n%s", c.Name, code, errOut, viaHelp)
		}
		if _, viaFlag, _ := runCmd(t, "", append(args, "--help")...); viaFlag != viaHelp {
			t.Errorf("%s --help differs from help %s:\n%s", c.Name, c.Name, viaFlag)
		}
	}
	code, out, _ := runCmd(t, "", "help")
	if code != exitOK || !strings.Contains(out, commands.List("  ")) {
		t.Errorf("help: exit %d:\n%s", code, out)
	}
}

// TestFirstHourMistakes: the mistakes of a first hour get one short
// message saying what to do, and nothing starts.
func TestFirstHourMistakes(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-c", exampleConf, "--dryrun"}, []string{"flag provided but not defined: -dryrun (did you mean --dry-run?)", "Run 'reactord help run' for the flags."}},
		{[]string{"render", "-c", exampleConf, "--tga", "a/b"}, []string{"-tga (did you mean --tag?)"}},
		{[]string{"--dry-run"}, []string{"run: need -c CONF", "Run 'reactord help run' for the flags."}},
		{[]string{"render", "--tag", "a/b"}, []string{"render: need -c CONF", "Run 'reactord help render' for the flags."}},
		{[]string{"-c", exampleConf, "--data-dir", dataDir, "--driver", "salt-api"}, []string{`--driver "salt-api" is not a driver`, "(did you mean saltapi?)"}},
		{[]string{"rendr"}, []string{`unknown command "rendr" (did you mean render?)`, "Run 'reactord help' for the commands."}},
		{[]string{"help", "nosuch"}, []string{`unknown command "nosuch"`}},
		{[]string{"jobs"}, []string{"usage: reactord jobs list", "Run 'reactord help jobs' for their flags."}},
	} {
		code, out, errOut := runCmd(t, "", tc.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit 2 and nothing", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
		if n := strings.Count(errOut, "\n"); n > 3 {
			t.Errorf("%q: %d lines on stderr, want a short message:\n%s", tc.args, n, errOut)
		}
	}
	// The unknown driver was refused before the embedded server started
	// and wrote its token and address into the data directory.
	if left, err := os.ReadDir(dataDir); err != nil || len(left) > 0 {
		t.Errorf("data directory after an unknown driver: %v, %v", left, err)
	}
}
