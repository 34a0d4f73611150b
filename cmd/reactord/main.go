// Command reactord is an event reactor for SaltStack: it reads Salt's
// reactor configuration and turns master events into the low chunks Salt's
// reactor would run.
//
// Usage:
//
//	reactord render -c CONF (--tag TAG [--data JSON|@FILE] | --event FILE)
//	reactord check  -c CONF [--event FILE] [--events FILE]
//	reactord replay -c CONF [--quiet] --events FILE|-
//
// Exit codes: 0 success; 1 the command ran but found errors (a reaction file
// failed, the configuration has problems, events were malformed); 2 the
// command could not run (bad usage, unreadable configuration or input).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitFound = 1
	exitUsage = 2
)

func main() {
	// Warnings from before a command has its own logger (a secret file
	// others can read) go to stderr in the commands' text format.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `reactord - a SaltStack reactor

Usage:
  reactord <command> [flags]

  reactord -c CONF [flags]     run the reactor daemon (see 'reactord run --help')

Commands:
  run      run the reactor daemon (the same as giving flags only)
  render   compile the reactions of one event into Salt low chunks (JSON)
  check    validate a reactor configuration and its reaction files
  replay   run recorded events through the reactor, printing reactions
  fire     publish one event (or a file of events) to NATS
  events   print events from NATS as salt-run state.event does
  bench    measure the daemon: embedded NATS, null driver, a workload
  bridge   publish a Salt master's events to NATS (its event socket, or salt-api)
  explain  say what reactord does with one event, and why
  jobs     list archived jobs, or look up a job's returns (jobs list | jobs lookup JID)
  trace    print the reaction ledger of a job or an event
  convert  translate Salt Jinja reaction files into reactord Go templates
  version  print the version, commit and Go version (also: reactord --version)

Run 'reactord <command> --help' for a command's flags.

Exit codes: 0 success; 1 errors were found and reported; 2 usage or input error.
`

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "--version" || cmd == "-version" {
		return cmdVersion(rest, stdout, stderr)
	}
	if len(cmd) > 0 && cmd[0] == '-' && cmd != "-h" && cmd != "--help" {
		return cmdDaemon(ctx, args, stdout, stderr)
	}
	switch cmd {
	case "run":
		return cmdDaemon(ctx, rest, stdout, stderr)
	case "render":
		return cmdRender(ctx, rest, stdin, stdout, stderr)
	case "check":
		return cmdCheck(ctx, rest, stdin, stdout, stderr)
	case "replay":
		return cmdReplay(ctx, rest, stdin, stdout, stderr)
	case "fire":
		return cmdFire(ctx, rest, stdin, stdout, stderr)
	case "events":
		return cmdEvents(ctx, rest, stdout, stderr)
	case "bench":
		return cmdBench(ctx, rest, stdout, stderr)
	case "bench-publish":
		return cmdBenchPublish(ctx, rest, stderr)
	case "bench-natsnode":
		return cmdBenchNATSNode(ctx, rest, stderr)
	case "bridge":
		return cmdBridge(ctx, rest, stdout, stderr)
	case "jobs":
		return cmdJobs(ctx, rest, stdout, stderr)
	case "trace":
		return cmdTrace(ctx, rest, stdout, stderr)
	case "explain":
		return cmdExplain(ctx, rest, stdin, stdout, stderr)
	case "version":
		return cmdVersion(rest, stdout, stderr)
	case "convert":
		return cmdConvert(rest, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "reactord: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// newFlags returns a flag set that prints its usage with a description.
func newFlags(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", synopsis, description)
		printFlags(fs)
	}
	return fs
}

// hiddenAlias is the Value of a former spelling of a flag, kept for one
// release: it sets the flag it stands for and is left out of the help.
type hiddenAlias struct{ flag.Value }

// hiddenBoolAlias is a hiddenAlias of a boolean flag (given without a
// value).
type hiddenBoolAlias struct{ hiddenAlias }

func (hiddenBoolAlias) IsBoolFlag() bool { return true }

// aliasFlag makes --old another spelling of the defined flag --name, left
// out of the help.
func aliasFlag(fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	usage := "former spelling of --" + name
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		fs.Var(hiddenBoolAlias{hiddenAlias{f.Value}}, old, usage)
		return
	}
	fs.Var(hiddenAlias{f.Value}, old, usage)
}

// printFlags prints the flags' help as PrintDefaults does, without the
// hidden aliases.
func printFlags(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Value.(type) {
		case hiddenAlias, hiddenBoolAlias:
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.PrintDefaults()
}

// parseFlags parses args and reports whether to go on; code is the exit
// code when not.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (ok bool, code int) {
	// Asked-for help goes to stdout, once (Parse prints it itself).
	for _, a := range args {
		if a == "--" {
			break
		}
		if isHelpArg(a) {
			fs.SetOutput(stdout)
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	if err := checkFlagValues(fs); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), line)
		}
		fmt.Fprintf(fs.Output(), "Run 'reactord %s --help' for the flags.\n", helpName(fs.Name()))
		return false, exitUsage
	}
	return true, exitOK
}

// positiveFlags are the numeric flags whose 0 is refused too (every other
// numeric flag takes 0 as "the default" or "none").
var positiveFlags = map[string]bool{"drain-timeout": true, "max-payload": true}

// checkFlagValues refuses the numeric flags given a negative value, and
// those of positiveFlags given 0, naming each.
func checkFlagValues(fs *flag.FlagSet) error {
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var sign int
		switch v := g.Get().(type) {
		case int:
			sign = cmp.Compare(v, 0)
		case int64:
			sign = cmp.Compare(v, 0)
		case time.Duration:
			sign = cmp.Compare(v, 0)
		default:
			return
		}
		switch {
		case sign < 0:
			errs = append(errs, fmt.Errorf("invalid value %q for flag --%s: must not be negative", f.Value, f.Name))
		case sign == 0 && positiveFlags[f.Name]:
			errs = append(errs, fmt.Errorf("invalid value %q for flag --%s: must be more than 0", f.Value, f.Name))
		}
	})
	return errors.Join(errs...)
}

// helpName is the command to ask for help: the daemon's flag set is named
// reactord.
func helpName(name string) string {
	if name == "reactord" {
		return "run"
	}
	return name
}

// isHelpArg reports whether a is a request for help.
func isHelpArg(a string) bool {
	return a == "-h" || a == "--h" || a == "-help" || a == "--help"
}

// logger returns the logger for a command: warnings and errors as text on
// stderr, unless verbose asks for debug.
func logger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelError + 4 // silent: commands print their own errors
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}
