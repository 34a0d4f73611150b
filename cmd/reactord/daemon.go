package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/daemon"
)

const daemonSynopsis = "reactord -c CONF [--dry-run | --driver NAME] [--nats URL | --listen ADDR] [--jetstream] [--http ADDR]"

const daemonHelp = `Runs the reactor: events arrive on NATS (subjects salt.evt.<tag>), match the
configuration's rules, and their reactions are executed by the driver. With no
--nats URL an embedded NATS server is started on --listen (JetStream data
under --data-dir). SIGHUP (or a change to a configuration file) reloads the
configuration, keeping the old one when the new one fails; SIGTERM drains
in-flight events within --drain-timeout.

Each setting comes from its flag, else its environment variable
(REACTORD_<FLAG>, e.g. REACTORD_DATA_DIR; NATS_URL for --nats too), else
the configuration's reactord: section (the flag's name with underscores),
else its default; 'reactord check -c CONF --settings' prints the result.`

// daemonFlags returns the daemon's flag set bound to opts; with shadow,
// the flag set of reactord shadow.
func daemonFlags(opts *daemon.Options, shadow bool, stderr io.Writer) *flag.FlagSet {
	if shadow {
		fs := newFlags("reactord shadow", shadowSynopsis, shadowHelp, stderr)
		opts.Flags(fs)
		opts.ShadowFlags(fs)
		opts.Shadow = true
		return fs
	}
	fs := newFlags("reactord", daemonSynopsis, daemonHelp, stderr)
	opts.Flags(fs)
	return fs
}

// mergedOptions parses the daemon's command line and merges it with the
// environment and the configuration's reactord: section (daemon.Load). It
// returns the options, the flag set with every value merged and where each
// came from; a code other than exitOK when the command cannot go on.
func mergedOptions(args []string, stdout, stderr io.Writer) (opts daemon.Options, fs *flag.FlagSet, sources map[string]daemon.Source, code int) {
	return merged(args, false, stdout, stderr)
}

// merged is mergedOptions, for reactord shadow when shadow is set.
func merged(args []string, shadow bool, stdout, stderr io.Writer) (opts daemon.Options, fs *flag.FlagSet, sources map[string]daemon.Source, code int) {
	opts = daemon.Defaults()
	fs = daemonFlags(&opts, shadow, stderr)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return opts, fs, nil, code
	}
	sources, err := daemon.Load(&opts, fs, os.Getenv)
	if err == nil && fs.NArg() > 0 {
		err = daemon.ErrNoConfig
	}
	if err == nil {
		err = checkValues(fs.VisitAll)
	}
	switch {
	case errors.Is(err, daemon.ErrNoConfig):
		fmt.Fprintln(stderr, "reactord: need -c CONF")
		fs.Usage()
		return opts, fs, nil, exitUsage
	case err != nil:
		printDaemonError(stderr, err)
		return opts, fs, nil, exitUsage
	}
	return opts, fs, sources, exitOK
}

func cmdDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runDaemon(ctx, args, false, stdout, stderr)
}

// runDaemon runs the daemon: reactord run, or reactord shadow when
// shadow is set.
func runDaemon(ctx context.Context, args []string, shadow bool, stdout, stderr io.Writer) int {
	// Catch SIGHUP from the start: its default action would end the
	// process if a reload arrived while it starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	opts, _, _, code := merged(args, shadow, stdout, stderr)
	if code != exitOK || opts.Loaded == nil {
		return code
	}
	opts.Hup, opts.Stdout, opts.Stderr = hup, stdout, stderr
	opts.Registry = prometheus.NewRegistry()
	registerBuildInfo(opts.Registry)
	d, err := daemon.New(ctx, opts)
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
