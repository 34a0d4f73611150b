package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/ruletest"
)

// testCmd is 'reactord test': reaction test files (package ruletest).
type testCmd struct {
	fs      *flag.FlagSet
	junit   string
	verbose bool
}

func testFlags(fs *flag.FlagSet) cli.Func {
	c := &testCmd{fs: fs}
	fs.StringVar(&c.junit, "junit", "", "also write the report as JUnit XML to this file, for CI systems")
	fs.BoolVar(&c.verbose, "v", false, "list the tests that passed too, with the chunks each produced")
	return c.run
}

// run loads the test files named by args and runs them.
func (c *testCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	if len(args) == 0 {
		return cli.UsageError(c.fs, "name at least one test file")
	}
	suites, err := ruletest.LoadAll(args)
	if err != nil {
		printErrors(s.Stderr, err)
		return exitUsage
	}
	rep := ruletest.Run(ctx, suites, ruletest.Options{Verbose: c.verbose})
	if err = rep.WriteText(s.Stdout); err == nil && c.junit != "" {
		err = rep.WriteJUnitFile(c.junit)
	}
	if err != nil {
		fmt.Fprintf(s.Stderr, "test: %v\n", err)
		return exitUsage
	}
	if rep.Failed() > 0 {
		return exitFound
	}
	return exitOK
}
