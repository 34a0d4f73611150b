package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/internal/cli"
)

// replayCmd is reactord replay: its flags' values.
type replayCmd struct {
	fs                       *flag.FlagSet
	conf, events, cpuprofile string
	quiet, verbose           bool
	workers                  int
	renderer                 func() string
}

// replayFlags defines replay's flags and returns the command.
func replayFlags(fs *flag.FlagSet) cli.Func {
	c := &replayCmd{fs: fs}
	fs.StringVar(&c.conf, "c", "", "reactor configuration: a file or a master.d directory (required)")
	fs.StringVar(&c.events, "events", "", "the file of events to replay, or - for stdin (the file as the last argument works too, the former spelling)")
	fs.BoolVar(&c.quiet, "quiet", false, "print no reactions, only errors and the summary")
	fs.IntVar(&c.workers, "workers", 0, "events rendered in parallel (default 0: one per CPU; replay dispatches nothing, so it needs no more, unlike the daemon's lanes)")
	fs.BoolVar(&c.verbose, "v", false, "log each pipeline decision to stderr")
	c.renderer = rendererFlag(fs)
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile to this file")
	return c.run
}

// run replays the events and prints their reactions.
func (c *replayCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	stdin, stdout, stderr := s.Stdin, s.Stdout, s.Stderr
	name := c.events
	if name == "" && len(args) == 1 {
		name = args[0]
	}
	if c.conf == "" || name == "" || len(args) > 1 || (c.events != "" && len(args) > 0) {
		return cli.UsageError(c.fs, "need -c CONF and --events FILE (or - for stdin)")
	}
	var in io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		in = f
	}
	eng, code := loadEngine(c.conf, stderr, c.verbose, engine.Options{Renderer: c.renderer()}, "")
	if eng == nil {
		return code
	}
	if c.cpuprofile != "" {
		pf, err := os.Create(c.cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return exitUsage
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return exitUsage
		}
		defer pprof.StopCPUProfile()
	}
	// Replay is a batch job over a bounded input: trade memory for fewer
	// garbage collections, unless the operator set GOGC.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	out := bufio.NewWriterSize(stdout, 1<<16)
	errw := bufio.NewWriter(stderr)
	sum, err := eng.Replay(ctx, in, out, engine.ReplayOptions{Quiet: c.quiet, Workers: c.workers, Errors: errw})
	_ = out.Flush()
	line, _ := json.Marshal(sum)
	fmt.Fprintf(errw, "%s\n", line)
	_ = errw.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	if sum.Errors > 0 {
		return exitFound
	}
	return exitOK
}
