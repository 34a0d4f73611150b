package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/cli"

	"github.com/prometheus/client_golang/prometheus"
)

// bridgeFlags defines bridge's flags and returns the command.
func bridgeFlags(fs *flag.FlagSet) cli.Func {
	o := daemon.DefaultBridgeOptions()
	o.Flags(fs)
	aliasFlag(fs, "salt-api", "saltapi-url") // the former spelling, kept for one release
	return func(ctx context.Context, _ []string, s cli.Streams) int { return runBridge(ctx, o, s.Stderr) }
}

// runBridge runs the bridge of o until ctx ends.
func runBridge(ctx context.Context, o daemon.BridgeOptions, stderr io.Writer) int {
	if o.LogLevel != "" {
		if _, err := config.ParseLogLevel(o.LogLevel); err != nil {
			fmt.Fprintf(stderr, "bridge: --log-level: %v\n", err)
			return exitUsage
		}
	}
	if err := daemon.CheckLogFormat(o.LogFormat); err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	o.Log = daemon.NewLogger(stderr, o.LogLevel, o.LogFormat, false)
	o.Registry = prometheus.NewRegistry()
	registerBuildInfo(o.Registry)
	b, err := daemon.NewBridge(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	err = b.Run(ctx)
	sum, _ := json.Marshal(b.Summary())
	fmt.Fprintf(stderr, "%s\n", sum)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	return exitOK
}
