package main

import (
	"context"
	"fmt"
	"io"
)

// cmdShadowReport is a placeholder until the report lands.
func cmdShadowReport(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "reactord shadow report: not yet")
	return exitUsage
}
