package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/matchers"
	"github.com/reactord/reactord/natsbus"
)

// eventsCmd is 'reactord events': events live from NATS, or archived ones.
type eventsCmd struct {
	fs           *flag.FlagSet
	nf           natsFlags
	count        int
	since, out   string
	store        *storeSource
	stdout, errs io.Writer
}

func eventsFlags(fs *flag.FlagSet) cli.Func {
	c := &eventsCmd{fs: fs}
	c.nf.register(fs, natsClientUsage)
	fs.IntVar(&c.count, "count", 0, "exit after this many events (0: run until interrupted)")
	fs.StringVar(&c.since, "since", "", "print archived events since this long ago (1h) or this RFC 3339 time, from the store")
	fs.StringVar(&c.out, "out", "pretty", `pretty (salt-run state.event pretty=True; also text, as jobs calls it) or json (one {"tag","data"} line per event); replay and fire --events read both`)
	c.store = storeFlag(fs)
	return c.run
}

// run prints archived events (--since) or the live ones.
func (c *eventsCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	c.stdout, c.errs = s.Stdout, s.Stderr
	format, err := event.Format(c.out)
	if err != nil {
		return cli.UsageError(c.fs, err.Error())
	}
	glob := ""
	if len(args) > 0 {
		glob = args[0]
	}
	if c.since != "" {
		return cmdStoredEvents(ctx, c.store, c.since, glob, c.count, format, s.Stdout, s.Stderr)
	}
	if len(args) > 1 {
		return cli.UsageError(c.fs, "need at most one GLOB")
	}
	if _, ok := c.nf.Find(c.store.dataDir); !ok {
		fmt.Fprintln(s.Stderr, "events: "+noServer)
		return exitUsage
	}
	var tokenDirs []string
	if c.store.dataDir != "" {
		tokenDirs = append(tokenDirs, c.store.dataDir)
	}
	opts, err := c.nf.ConnOptions("reactord-events", tokenDirs...)
	if err == nil {
		var conn *natsbus.Conn
		if conn, err = natsbus.Connect(opts); err == nil {
			defer conn.Close()
			return c.live(ctx, conn, glob, format)
		}
	}
	fmt.Fprintf(s.Stderr, "events: %v\n", err)
	return exitUsage
}

// live prints the events arriving on conn whose tag matches glob ("" for
// all), until ctx ends or --count are printed.
func (c *eventsCmd) live(ctx context.Context, conn *natsbus.Conn, glob string, format event.Formatter) int {
	var g *matchers.Glob
	if glob != "" {
		g = matchers.Compile(glob)
	}
	lines := make(chan []byte, 1024)
	sub, err := conn.Subscribe("", func(m *natsbus.Message) {
		ev, err := event.Decode(m.Body)
		if err == nil && g != nil && !g.Match(ev.Tag) {
			return
		}
		var line []byte
		if err == nil {
			line, err = format(ev, "")
		}
		if err != nil {
			fmt.Fprintf(c.errs, "events: %s: %v\n", m.Subject, err)
			return
		}
		lines <- line
	})
	if err != nil {
		fmt.Fprintf(c.errs, "events: %v\n", err)
		return exitUsage
	}
	defer sub.Stop()
	_ = conn.Flush(ctx)
	for seen := 0; ; {
		select {
		case <-ctx.Done():
			return exitOK
		case l := <-lines:
			if _, err := c.stdout.Write(l); err != nil {
				return exitUsage
			}
			if seen++; c.count > 0 && seen >= c.count {
				return exitOK
			}
		}
	}
}
