package cli

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
)

// testTable is a table of a command with flags, a group of two
// subcommands, a command with a subcommand of its own and a command that
// reads its own arguments; each records what it ran with in *ran.
func testTable(ran *[]string) *Table {
	record := func(name string) Func {
		return func(_ context.Context, args []string, _ Streams) int {
			*ran = append(*ran, name+" "+strings.Join(args, ","))
			return ExitOK
		}
	}
	return &Table{Program: "reactord", Header: "HEAD\n", Footer: "FOOT\n", Commands: []Command{
		{Name: "render", Short: "render one event", Usage: "reactord render -c CONF", Long: "Renders.",
			Flags: func(fs *flag.FlagSet) Func {
				conf := fs.String("c", "", "configuration")
				return func(ctx context.Context, args []string, s Streams) int {
					return record("render -c "+*conf)(ctx, args, s)
				}
			}},
		{Name: "jobs", Short: "the job cache", Long: "the job cache"},
		{Name: "jobs list", Short: "list jobs", Usage: "reactord jobs list", Long: "Lists.",
			Flags: func(*flag.FlagSet) Func { return record("jobs list") }},
		{Name: "jobs lookup", Short: "look a job up", Usage: "reactord jobs lookup JID", Long: "Looks up.",
			Flags: func(*flag.FlagSet) Func { return record("jobs lookup") }},
		{Name: "shadow", Short: "run in shadow mode", Usage: "reactord shadow", Long: "Shadows.",
			Flags: func(*flag.FlagSet) Func { return record("shadow") }},
		{Name: "shadow report", Short: "sum up", Usage: "reactord shadow report", Long: "Reports.",
			Flags: func(*flag.FlagSet) Func { return record("shadow report") }},
		{Name: "fire", Short: "publish", Usage: "reactord fire TAG", Main: record("fire")},
	}}
}

// TestTableRun: a command line runs the command it names, a subcommand's
// two words before its parent's one, with the flags parsed and the
// arguments left; a command with Main gets its whole command line.
func TestTableRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"render", "x", "-c", "conf"}, "render -c conf x"},
		{[]string{"jobs", "lookup", "J1"}, "jobs lookup J1"},
		{[]string{"shadow", "report"}, "shadow report "},
		{[]string{"shadow", "extra"}, "shadow extra"},
		{[]string{"fire", "--nats", "u", "a/b"}, "fire --nats,u,a/b"},
	} {
		var ran []string
		var stdout, stderr bytes.Buffer
		code := testTable(&ran).Run(context.Background(), tc.args, Streams{Stdout: &stdout, Stderr: &stderr})
		if code != ExitOK || !slices.Equal(ran, []string{tc.want}) {
			t.Errorf("%q: exit %d, ran %q, stderr %q; want %q", tc.args, code, ran, stderr.String(), tc.want)
		}
	}
}

// TestTableHelpAndMistakes: help lists every command and then help; help
// COMMAND prints its usage, help and flags; a group's help is its
// subcommands'; an unknown command names the near one; a group without
// its subcommand, and a missing flag value, are usage errors that run
// nothing.
func TestTableHelpAndMistakes(t *testing.T) {
	var ran []string
	tab := testTable(&ran)
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr []string
	}{
		{[]string{"help"}, ExitOK, []string{"HEAD\nCommands:\n  render         render one event\n", "  jobs lookup    look a job up\n", "  help           print the commands", "FOOT\n"}, nil},
		{[]string{"help", "render"}, ExitOK, []string{"Usage: reactord render -c CONF\n\nRenders.\n\nFlags:\n  -c string"}, nil},
		{[]string{"render", "--help"}, ExitOK, []string{"Usage: reactord render -c CONF\n"}, nil},
		{[]string{"help", "jobs"}, ExitOK, []string{"reactord jobs: the job cache\n", "Usage: reactord jobs list\n", "Usage: reactord jobs lookup JID\n"}, nil},
		{[]string{"jobs", "--help"}, ExitOK, []string{"Usage: reactord jobs list\n", "Usage: reactord jobs lookup JID\n"}, nil},
		{[]string{"jobs"}, ExitUsage, nil, []string{"usage: reactord jobs list | reactord jobs lookup JID\nRun 'reactord help jobs' for their flags.\n"}},
		{[]string{"rendr", "-c", "x"}, ExitUsage, nil, []string{"reactord: unknown command \"rendr\" (did you mean render?)\nRun 'reactord help' for the commands.\n"}},
		{[]string{"help", "nosuch"}, ExitUsage, nil, []string{"unknown command \"nosuch\""}},
		{[]string{"render", "-c"}, ExitUsage, nil, []string{"flag needs an argument: -c\nRun 'reactord help render' for the flags.\n"}},
	} {
		var stdout, stderr bytes.Buffer
		code := tab.Run(context.Background(), tc.args, Streams{Stdout: &stdout, Stderr: &stderr})
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr.String())
		}
		for _, w := range tc.stdout {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%q: stdout lacks %q:\n%s", tc.args, w, stdout.String())
			}
		}
		for _, w := range tc.stderr {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, stderr.String())
			}
		}
	}
	if len(ran) > 0 {
		t.Errorf("help and mistakes ran %q", ran)
	}
}

// TestNearFlag: an unknown flag is told the shown flag it is near, not a
// former spelling, and nothing when none is near or it is too short to
// guess.
func TestNearFlag(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--dryrun", "flag provided but not defined: -dryrun (did you mean --dry-run?)\n"},
		{"--dry_run", "(did you mean --dry-run?)"},
		{"--saltapi-ur", "(did you mean --saltapi-url?)"},
		{"--kafka", "flag provided but not defined: -kafka\n"},
		{"-x", "flag provided but not defined: -x\n"},
	} {
		var stderr bytes.Buffer
		fs := NewFlags("run", "reactord -c CONF", "Runs.", &stderr)
		fs.Bool("dry-run", false, "dispatch nothing")
		fs.String("saltapi-url", "", "salt-api")
		AliasFlag(fs, "saltapi-ur1", "saltapi-url")
		if ok, code := ParseFlags(fs, []string{tc.arg}, &stderr); ok || code != ExitUsage {
			t.Fatalf("%s: ok %v, exit %d", tc.arg, ok, code)
		}
		if !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "ur1") {
			t.Errorf("%s: stderr %q, want %q", tc.arg, stderr.String(), tc.want)
		}
	}
}
