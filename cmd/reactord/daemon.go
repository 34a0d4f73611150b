package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/internal/suggest"
)

// daemonFlags defines the daemon's flags (reactord run) and returns the
// command that runs it.
func daemonFlags(fs *flag.FlagSet) cli.Func { return daemonCommand(fs, false) }

// shadowFlags defines the flags of reactord shadow, the daemon's and
// shadow mode's, and returns the command that runs it.
func shadowFlags(fs *flag.FlagSet) cli.Func { return daemonCommand(fs, true) }

// daemonCommand defines the daemon's flags, and shadow mode's with
// shadow, and returns the command that runs it.
func daemonCommand(fs *flag.FlagSet, shadow bool) cli.Func {
	opts := daemon.Defaults()
	if shadow {
		opts = daemon.ShadowDefaults()
	}
	opts.Flags(fs)
	if shadow {
		opts.ShadowFlags(fs)
		opts.Shadow = true
	}
	return func(ctx context.Context, _ []string, s cli.Streams) int {
		return runDaemon(ctx, &opts, fs, s.Stdout, s.Stderr)
	}
}

// mergedOptions parses the daemon's command line and merges it with the
// environment and the configuration's reactord: section (loadOptions). It
// returns the options, the flag set with every value merged and where each
// came from; a code other than exitOK when the command cannot go on.
func mergedOptions(args []string, stdout, stderr io.Writer) (opts daemon.Options, fs *flag.FlagSet, sources map[string]daemon.Source, code int) {
	opts = daemon.Defaults()
	fs = newFlags("run", "", "", stderr)
	opts.Flags(fs)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return opts, fs, nil, code
	}
	sources, code = loadOptions(&opts, fs)
	return opts, fs, sources, code
}

// loadOptions merges the parsed flags fs of opts with the environment and
// the configuration's reactord: section (daemon.Load) and checks the
// result, before anything starts; it returns where each value came from,
// and a code other than exitOK when the command cannot go on.
func loadOptions(opts *daemon.Options, fs *flag.FlagSet) (map[string]daemon.Source, int) {
	sources, err := daemon.Load(opts, fs, os.Getenv)
	if err == nil && fs.NArg() > 0 {
		err = daemon.ErrNoConfig
	}
	if err == nil {
		err = checkValues(fs.VisitAll)
	}
	if err == nil {
		err = checkDriverName(opts.Driver)
	}
	switch {
	case errors.Is(err, daemon.ErrNoConfig):
		return nil, cli.UsageError(fs, needConf)
	case err != nil:
		printDaemonError(fs.Output(), err)
		return nil, exitUsage
	}
	return sources, exitOK
}

// needConf is the error of a daemon started without its configuration.
const needConf = "need -c CONF: the reactor configuration, a file or a master.d directory (or $REACTORD_CONFIG)"

// checkDriverName refuses a --driver (or driver:, or $REACTORD_DRIVER)
// that names no driver, with the one it is near: before the embedded
// server starts and writes its token, not after.
func checkDriverName(name string) error {
	if slices.Contains(config.DriverNames, name) {
		return nil
	}
	hint := ""
	if near := suggest.Closest(name, config.DriverNames); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	return fmt.Errorf("--driver %q is not a driver: want one of %s%s", name, strings.Join(config.DriverNames, ", "), hint)
}

// runDaemon runs the daemon of opts, whose flags fs holds: reactord run,
// or reactord shadow.
func runDaemon(ctx context.Context, opts *daemon.Options, fs *flag.FlagSet, stdout, stderr io.Writer) int {
	// Catch SIGHUP from the start: its default action would end the
	// process if a reload arrived while it starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if _, code := loadOptions(opts, fs); code != exitOK || opts.Loaded == nil {
		return code
	}
	opts.Hup, opts.Stdout, opts.Stderr = hup, stdout, stderr
	opts.Registry = prometheus.NewRegistry()
	registerBuildInfo(opts.Registry)
	d, err := daemon.New(ctx, *opts)
	if errors.Is(err, daemon.ErrStopped) {
		return exitOK // the stop signal while it waited for JetStream: logged
	}
	if err != nil {
		printDaemonError(stderr, err)
		return exitUsage
	}
	switch err := d.Run(ctx); {
	case err == nil:
		return exitOK
	case errors.Is(err, daemon.ErrUnfinished):
		return exitFound
	default:
		printDaemonError(stderr, err)
		return exitUsage
	}
}

// printDaemonError prints a daemon's start error: a configuration's errors
// each on its line, as they name their file; anything else after
// "reactord: ".
func printDaemonError(stderr io.Writer, err error) {
	var le *daemon.LoadError
	if errors.As(err, &le) {
		printErrors(stderr, le.Err)
		return
	}
	fmt.Fprintf(stderr, "reactord: %v\n", err)
}
