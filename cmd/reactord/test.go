package main

import (
	"context"
	"fmt"
	"os"

	"github.com/reactord/reactord/ruletest"
)

// cmdTest runs reaction test files (package ruletest).
func cmdTest(args []string) int {
	fs := newFlags("test", "reactord test [--junit FILE] [-v] FILE...", `Runs each test file's reaction tests (docs/reaction-files.md, "Testing
reaction files") and prints each failure with its differences. Exit 0 when
all pass, 1 when one fails, 2 when a file or its configuration does not load.`, os.Stderr)
	junit := fs.String("junit", "", "also write the report as JUnit XML to this file, for CI systems")
	verbose := fs.Bool("v", false, "list the tests that passed too, with the chunks each produced")
	if ok, code := parseFlags(fs, args, os.Stdout); !ok {
		return code
	} else if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "test: name at least one test file (reactord test FILE...)")
		return exitUsage
	}
	suites, err := ruletest.LoadAll(fs.Args())
	if err != nil {
		printErrors(os.Stderr, err)
		return exitUsage
	}
	rep := ruletest.Run(context.Background(), suites, ruletest.Options{Verbose: *verbose})
	if err = rep.WriteText(os.Stdout); err == nil && *junit != "" {
		err = rep.WriteJUnitFile(*junit)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "test: %v\n", err)
		return exitUsage
	}
	if rep.Failed() > 0 {
		return exitFound
	}
	return exitOK
}
