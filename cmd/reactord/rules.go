package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/cli"
)

// rulesCmd is 'reactord rules': the running daemon's rules, asked of its
// --http endpoint (daemon.FetchRules).
type rulesCmd struct {
	fs        *flag.FlagSet
	addr, out string
}

func rulesFlags(fs *flag.FlagSet) cli.Func {
	c := &rulesCmd{fs: fs}
	fs.StringVar(&c.addr, "http", "", "the running daemon's --http address (required)")
	fs.StringVar(&c.out, "out", "text", "text (a line per rule) or json (what /rules serves)")
	return c.run
}

// run asks the daemon for its rules and prints them.
func (c *rulesCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	if c.addr == "" || len(args) > 0 || c.out != "text" && c.out != "json" {
		return cli.UsageError(c.fs, "need --http ADDR (the daemon's), and --out text or json")
	}
	rep, err := daemon.FetchRules(c.addr)
	if err == nil && c.out == "json" {
		err = json.NewEncoder(s.Stdout).Encode(rep)
	} else if err == nil {
		err = rep.WriteText(s.Stdout)
	}
	if err != nil {
		fmt.Fprintf(s.Stderr, "rules: %v\n", err)
		return exitUsage
	}
	return exitOK
}
