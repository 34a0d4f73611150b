package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"

	"github.com/prometheus/client_golang/prometheus"
)

func cmdBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bridge", "reactord bridge [--sock-dir DIR | --saltapi-url URL ...] [--nats URL] [--data-dir DIR] [--http ADDR]",
		`Publishes every event of a Salt master's event bus to NATS: to JetStream
(with a Nats-Msg-Id naming the master's emission, its tag, data and _stamp, so
a retried publish or a second bridge on the same master is stored once) when a
stream captures salt.evt.>, else with core NATS.

By default it reads the master's event publisher socket directly
(--sock-dir, Salt's sock_dir; master_event_pub.ipc), which needs no salt-api
and no credentials: run it on the master's host as the master's user. With
--saltapi-url it reads salt-api's /events stream instead, for masters on
other hosts.

It never makes the master wait: events NATS cannot take yet (NATS or the
daemon restarting) are held in a bounded spool, in memory, then on disk
under --data-dir, and published in order when NATS is back; past the bounds
they are dropped and counted. Events over the server's max payload are
published with their biggest values (the job return first) cut. Runs until
interrupted.`, stderr)
	o := daemon.DefaultBridgeOptions()
	o.Flags(fs)
	aliasFlag(fs, "salt-api", "saltapi-url") // the former spelling, kept for one release
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
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
