package daemon

import (
	"flag"
	"strconv"
	"time"

	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/actions/natsdriver"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
)

// The daemon's own defaults; the others come from the parts that apply
// them to a zero value (guard.DefaultSettle, reactor.DefaultMaxHops, ...),
// so that each default has one source.
const (
	// DefaultListen is the embedded server's address.
	DefaultListen = "127.0.0.1:4222"
	// DefaultDriver is the driver when none is given: it executes nothing.
	DefaultDriver = "dryrun"
	// DefaultKeepJobs is the archive's retention, Salt's keep_jobs default.
	DefaultKeepJobs = 24 * time.Hour
	// DefaultLogLevel and DefaultLogFormat are the logger's.
	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"
	// DefaultDrainTimeout bounds the drain on stop.
	DefaultDrainTimeout = 10 * time.Second
	// DefaultDeadLetter and DefaultParkedSubject are the subjects of
	// reactions that failed for good and of parked events.
	DefaultDeadLetter    = "reactord.deadletter"
	DefaultParkedSubject = "reactord.parked"
	// DefaultReloadSettle is how long the configuration files must stay
	// unchanged before a change is reloaded.
	DefaultReloadSettle = time.Second
	// DefaultMasterSaltConfigDir is where the master driver reads the
	// master configuration when --salt-config-dir is empty.
	DefaultMasterSaltConfigDir = "/etc/salt"
	// CallLanes are the lanes of the drivers that wait for Salt
	// (CallDrivers) when --workers is auto: a lane waits for its
	// reaction's call, and the drivers batch and merge only what waits,
	// so they get more lanes than request slots.
	CallLanes = 32
)

// CallDrivers are the drivers whose --workers auto is CallLanes; the
// others get reactor.DefaultLanes.
var CallDrivers = []string{"saltapi", "exec"}

// Defaults returns the options with the default of every setting: each
// flag's default is the value the daemon uses when nothing gives one.
// The settings whose default is decided at start, from other settings or
// from the machine, are zero here and show as "auto" (their help says what
// auto is); New settles them.
func Defaults() Options {
	return Options{
		Listen:         DefaultListen,
		SaltCalls:      SaltCallsDefault,
		MaxPayload:     embedded.DefaultMaxPayload,
		Driver:         DefaultDriver,
		Queue:          reactor.DefaultQueueSize,
		InFlight:       0, // auto: by the driver
		HandOverAfter:  reactor.DefaultHandOverAfter,
		DrainTimeout:   DefaultDrainTimeout,
		DeadLetter:     DefaultDeadLetter,
		ParkedSubject:  DefaultParkedSubject,
		AckWait:        natsbus.DefaultAckWait,
		DedupeWindow:   natsbus.DefaultDuplicates,
		ReloadSettle:   DefaultReloadSettle,
		Settle:         guard.DefaultSettle,
		JobTimeout:     guard.DefaultJobTimeout,
		MaxHops:        reactor.DefaultMaxHops,
		StoreSpool:     store.DefaultSpoolLimit,
		KeepJobs:       DefaultKeepJobs,
		MasterID:       store.DefaultMasterID(),
		SharedState:    true,
		LogLevel:       DefaultLogLevel,
		LogFormat:      DefaultLogFormat,
		Drivers:        DefaultDriverOptions(),
		ShadowWindow:   shadow.DefaultWindow,
		ShadowSaltUser: shadow.DefaultMasterUser,
	}
}

// ShadowJetStreamSync is --jetstream-sync's default for reactord shadow:
// NATS's own. Shadow mode dispatches nothing, so an event lost with the
// machine costs a verdict, not a reaction, and flushing each write of the
// embedded server was most of what shadow mode cost beside Salt.
const ShadowJetStreamSync = 2 * time.Minute

// ShadowTrimEvery is how often reactord shadow trims the event stream at
// most (natsbus.StreamOptions.TrimEvery): a purge per event cost more than
// the rest of an event's path when events come one at a time, and an event
// that comes again after a crash costs a verdict, not a reaction.
const ShadowTrimEvery = time.Second

// ShadowDefaults returns reactord shadow's defaults: the daemon's, with
// ShadowJetStreamSync.
func ShadowDefaults() Options {
	o := Defaults()
	o.JetStreamSync = ShadowJetStreamSync
	return o
}

// DefaultDriverOptions returns the drivers' defaults.
func DefaultDriverOptions() DriverOptions {
	return DriverOptions{
		ExecSubject: natsdriver.DefaultExecPrefix, APIEAuth: "auto",
		APIMaxInFlight: saltapi.DefaultMaxInFlight, APIMaxBatch: saltapi.DefaultMaxBatch, APIMaxMerge: saltapi.DefaultMaxMerge,
		SaltBin: execdriver.DefaultSalt, SaltRunBin: execdriver.DefaultSaltRun, SaltCallBin: execdriver.DefaultSaltCall,
		ExecTimeout: execdriver.DefaultTimeout, KillGrace: execdriver.DefaultKillGrace, ExecCoalesce: execdriver.DefaultMaxCoalesce,
		MasterSockets: masterdriver.DefaultSockets,
	}
}

// Auto is how a setting decided at start shows, and the value that asks
// for it.
const Auto = "auto"

// autoHelp is the help of a setting decided at start: its meaning, then
// what auto is. Every such flag's help ends this way, which the
// configuration reference test checks.
func autoHelp(usage, auto string) string { return usage + " (" + Auto + ": " + auto + ")" }

// autoInt is an int flag whose zero is decided at start: it shows as auto
// and accepts auto.
type autoInt struct{ p *int }

func (a autoInt) String() string {
	switch {
	case a.p == nil:
		return "" // the zero Value: flag.PrintDefaults then shows the default
	case *a.p == 0:
		return Auto
	}
	return strconv.Itoa(*a.p)
}

func (a autoInt) Set(s string) error {
	if s == Auto {
		*a.p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*a.p = n
	return nil
}

// Get implements flag.Getter.
func (a autoInt) Get() any { return *a.p }

// autoString is a string flag whose empty value is decided at start: it
// shows as auto and accepts auto.
type autoString struct{ p *string }

func (a autoString) String() string {
	switch {
	case a.p == nil:
		return ""
	case *a.p == "":
		return Auto
	}
	return *a.p
}

func (a autoString) Set(s string) error {
	if s == Auto {
		s = ""
	}
	*a.p = s
	return nil
}

// Get implements flag.Getter.
func (a autoString) Get() any { return *a.p }

// autoBool registers an AutoBool so that the help shows its default.
type autoBool struct{ b *AutoBool }

func (a autoBool) String() string {
	if a.b == nil {
		return ""
	}
	return a.b.String()
}

func (a autoBool) Set(s string) error { return a.b.Set(s) }
func (a autoBool) IsBoolFlag() bool   { return true }
func (a autoBool) Get() any           { return a.b.Value }

// intAuto registers an int flag decided at start when zero.
func intAuto(fs *flag.FlagSet, p *int, name, usage, auto string) {
	fs.Var(autoInt{p}, name, autoHelp(usage, auto))
}

// stringAuto registers a string flag decided at start when empty.
func stringAuto(fs *flag.FlagSet, p *string, name, usage, auto string) {
	fs.Var(autoString{p}, name, autoHelp(usage, auto))
}
