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
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/reactord/reactord/internal/cli"
)

// Exit codes.
const (
	exitOK    = cli.ExitOK
	exitFound = cli.ExitFound
	exitUsage = cli.ExitUsage
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
  shadow   run beside Salt's own reactor, dispatching nothing, and compare
           each decision with what Salt's reactor did (shadow report: the verdicts)
  render   compile the reactions of one event into Salt low chunks (JSON)
  check    validate a reactor configuration and its reaction files
  replay   run recorded events through the reactor, printing reactions
  fire     publish one event (or a file of events) to NATS
  events   print events from NATS as salt-run state.event does
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
	case "shadow":
		return cmdShadow(ctx, rest, stdout, stderr)
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

// The command-line helpers every command uses (internal/cli).
var (
	newFlags    = cli.NewFlags
	aliasFlag   = cli.AliasFlag
	parseFlags  = cli.ParseFlags
	checkValues = cli.CheckValues
	printErrors = cli.PrintErrors
)

// logger returns the logger for a command: warnings and errors as text on
// stderr, unless verbose asks for debug.
func logger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelError + 4 // silent: commands print their own errors
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}
