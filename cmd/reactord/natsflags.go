package main

import (
	"flag"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
)

// natsFlags are the connection flags of fire and events: the daemon's
// NATS settings.
type natsFlags struct{ daemon.NATSOptions }

// natsClientUsage is the --nats help of the commands that connect to a
// server and never start one.
const natsClientUsage = "NATS URL(s) to connect to (default: $NATS_URL, else the embedded server of a local daemon: the address it recorded in ~/.cache/reactord or /var/lib/reactord)"

// register adds the connection flags; urlUsage is the help of --nats, which
// says what an empty URL does for this command.
func (n *natsFlags) register(fs *flag.FlagSet, urlUsage string) { n.Flags(fs, urlUsage) }

// noServer is the error of a command that found no server to connect to.
const noServer = "need --nats URL: no $NATS_URL, and no local daemon recorded its address in its data directory (" + natsbus.AddrFileName + ")"
