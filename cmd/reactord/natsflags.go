package main

import (
	"flag"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
)

// natsFlags are the connection flags of fire, events and bridge: the
// daemon's NATS settings.
type natsFlags struct{ daemon.NATSOptions }

// natsClientUsage is the --nats help of the commands that connect to a
// server and never start one.
const natsClientUsage = "NATS URL(s) to connect to (required; the daemon's embedded server listens on nats://127.0.0.1:4222 by default)"

// register adds the connection flags; urlUsage is the help of --nats, which
// says what an empty URL does for this command.
func (n *natsFlags) register(fs *flag.FlagSet, urlUsage string) { n.Flags(fs, urlUsage) }

// options returns the connection options (see daemon.NATSOptions.ConnOptions).
func (n *natsFlags) options(name string, dataDirs ...string) (natsbus.ConnOptions, error) {
	return n.ConnOptions(name, dataDirs...)
}
