package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/reactord/reactord/engine"
)

func cmdReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("replay", "reactord replay -c CONF [--quiet] --events FILE|-",
		`Reads events, one per line, as JSON {"tag": ..., "data": {...}} or as
salt-run state.event lines (TAG<tab>{json}), or in the multi-line format of
state.event pretty=True that 'reactord events' prints (errors name an
event's first line), runs each through the reactor
without executing anything, and prints one JSON line per reaction,
{"tag": TAG, "chunk": {...}}, in input order. Errors go to stderr. It always
ends with one JSON summary line on stderr:
{"events","matched","reactions","errors","seconds","events_per_sec"}.
Exit 0 when no errors were found, 1 when some were, 2 on bad usage or input.`, stderr)
	conf := fs.String("c", "", "reactor configuration: a file or a master.d directory (required)")
	events := fs.String("events", "", "the file of events to replay, or - for stdin (the file as the last argument works too, the former spelling)")
	quiet := fs.Bool("quiet", false, "print no reactions, only errors and the summary")
	workers := fs.Int("workers", 0, "events rendered in parallel (default 0: one per CPU; replay dispatches nothing, so it needs no more, unlike the daemon's lanes)")
	verbose := fs.Bool("v", false, "log each pipeline decision to stderr")
	renderer := rendererFlag(fs)
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	name := *events
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if *conf == "" || name == "" || fs.NArg() > 1 || (*events != "" && fs.NArg() > 0) {
		fmt.Fprintln(stderr, "replay: need -c CONF and --events FILE (or - for stdin)")
		fs.Usage()
		return exitUsage
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
	eng, code := loadEngine(*conf, stderr, *verbose, engine.Options{Renderer: renderer()})
	if eng == nil {
		return code
	}
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
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
	sum, err := eng.Replay(ctx, in, out, engine.ReplayOptions{Quiet: *quiet, Workers: *workers, Errors: errw})
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
