// Command reactord-bench measures reactord's daemon as users run it: it
// builds the daemon with daemon.New (the same assembly as `reactord run`)
// on an embedded NATS server with the null driver, publishes a workload and
// prints one JSON line of figures. It lives outside the product binary:
//
//	go run ./cmd/reactord-bench [flags]
//
// Its subcommand soak runs the daemons and a NATS cluster under a
// nemesis (see `reactord-bench soak -h`). Its subcommands publish, natsnode, replica, floor and bridge are the processes it
// starts itself (the publisher, the NATS nodes of --cluster, the daemons of
// --replicas, the plain JetStream consumers of --floor, and soak's bridge).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/cli"
)

// Exit codes and command-line helpers, shared with reactord.
const (
	exitOK    = cli.ExitOK
	exitFound = cli.ExitFound
	exitUsage = cli.ExitUsage
)

var (
	newFlags    = cli.NewFlags
	aliasFlag   = cli.AliasFlag
	parseFlags  = cli.ParseFlags
	printErrors = cli.PrintErrors
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "publish":
			return cmdBenchPublish(ctx, args[1:], stderr)
		case "natsnode":
			return cmdBenchNATSNode(ctx, args[1:], stderr)
		case "replica":
			return cmdReplica(ctx, args[1:], stdout, stderr)
		case "floor":
			return cmdFloorConsumer(ctx, args[1:], stderr)
		case "soak":
			return cmdSoak(ctx, args[1:], stdout, stderr)
		case "bridge":
			return cmdBenchBridge(ctx, args[1:], stderr)
		}
	}
	return cmdBench(ctx, args, stdout, stderr)
}

// cmdReplica is one daemon of --replicas: `reactord run`'s flags, merged
// and assembled by the daemon package as reactord does.
func cmdReplica(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := daemon.Defaults()
	fs := newFlags("replica", "reactord-bench replica -c CONF [reactord run flags]", "One daemon of reactord-bench --replicas.", stderr)
	opts.Flags(fs)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if _, err := daemon.Load(&opts, fs, os.Getenv); err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	opts.Stdout, opts.Stderr = stdout, stderr
	if dir := os.Getenv("REACTORD_BENCH_PROFILE_DIR"); dir != "" {
		// A CPU profile of each replica, for comparing where the time
		// goes with one replica and with several.
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("replica-%d.prof", os.Getpid()))); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	d, err := daemon.New(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "replica: %v\n", err)
		return exitUsage
	}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "replica: %v\n", err)
		if errors.Is(err, daemon.ErrUnfinished) {
			return exitFound
		}
		return exitUsage
	}
	return exitOK
}
