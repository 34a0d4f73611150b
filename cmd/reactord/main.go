package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
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

// usageHeader and usageFooter are the help's text around the list of
// commands (commands.go).
const (
	usageHeader = `reactord - a SaltStack reactor

Usage:
  reactord <command> [flags]
  reactord -c CONF [flags]     run the reactor daemon (reactord help run)

`
	usageFooter = `
Run 'reactord help <command>' (or 'reactord <command> --help') for a command's flags.

Exit codes: 0 success; 1 errors were found and reported; 2 usage or input error.
`
)

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		commands.Usage(stderr)
		return exitUsage
	case args[0] == "--version" || args[0] == "-version":
		args = append([]string{"version"}, args[1:]...)
	case cli.IsHelpArg(args[0]):
		args = []string{"help"}
	case strings.HasPrefix(args[0], "-"):
		args = append([]string{"run"}, args...)
	}
	return commands.Run(ctx, args, cli.Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
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
