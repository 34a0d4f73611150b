package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/reactor"
	"github.com/reactord/reactord/store/sqlstore"
)

// The help texts that name the members of a list are made from the list,
// so that a new member shows in the help (and in docs/configuration.md)
// without anyone remembering to add it there.

// driverHelp says what each of config.DriverNames does.
var driverHelp = map[string]string{
	"dryrun":  "executes nothing, prints each reaction as a JSON line",
	"saltapi": "calls salt-api's REST interface, --saltapi-url",
	"master":  "publishes jobs on the Salt master's request server as the salt command does, --master-*",
	"exec":    "runs the salt, salt-run and salt-call programs, --salt-bin",
	"nats":    "publishes each reaction on NATS under --exec-subject",
	"null":    "dispatches nothing: benchmarks",
}

// DriverUsage is the help of --driver: every driver of config.DriverNames
// and what it does.
func DriverUsage() string {
	parts := make([]string, 0, len(config.DriverNames))
	for _, n := range config.DriverNames {
		parts = append(parts, n+" ("+driverHelp[n]+")")
	}
	return "what executes the reactions: " + orList(parts, "or")
}

// workersAuto says what --workers auto is.
func workersAuto() string {
	return fmt.Sprintf("%d for the %s drivers, %d for the others", CallLanes, orList(CallDrivers, "and"), reactor.DefaultLanes)
}

// saltProgramDrivers are the drivers that run a salt program, by program
// (the master and saltapi drivers run salt-call for caller reactions; the
// master driver runs salt-run for wheel reactions).
var saltProgramDrivers = map[string][]string{
	"salt":      {"exec"},
	"salt-run":  {"exec", "master"},
	"salt-call": {"exec", "master", "saltapi"},
}

// saltProgramsDrivers are the drivers that run any of the salt programs.
func saltProgramsDrivers() []string {
	var out []string
	for _, n := range config.DriverNames {
		for _, ds := range saltProgramDrivers {
			if slices.Contains(ds, n) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// programUsage is the help of --salt-bin and its siblings.
func programUsage(program string) string {
	return fmt.Sprintf("%s: the %s program", driversOf(saltProgramDrivers[program]), program)
}

// saltConfigDirUsage is the help of --salt-config-dir.
func saltConfigDirUsage() string {
	return fmt.Sprintf("%s: Salt's configuration directory: the salt programs get -c DIR, and the master driver reads the master configuration there (empty: the salt programs use their own, the master driver reads %s)",
		driversOf(saltProgramsDrivers()), DefaultMasterSaltConfigDir)
}

// driversOf names drivers as a help text's prefix: "exec driver", "exec
// and master drivers".
func driversOf(names []string) string {
	if len(names) == 1 {
		return names[0] + " driver"
	}
	return orList(names, "and") + " drivers"
}

// StoreUsage lists the audit store's URL forms, from the databases
// sqlstore.Open takes.
func StoreUsage() string { return strings.Join(sqlstore.URLForms(), ", ") }

// LogFormats are the log line formats --log-format takes, with what each
// writes.
var LogFormats = []struct{ Name, Help string }{
	{"text", "logfmt, key=value"},
	{"json", "one JSON object a line, for log shippers"},
}

// LogFormatUsage is the help of --log-format.
func LogFormatUsage() string {
	parts := make([]string, 0, len(LogFormats))
	for _, f := range LogFormats {
		parts = append(parts, f.Name+" ("+f.Help+")")
	}
	return "log line format: " + orList(parts, "or")
}

// LogLevelUsage is the help of --log-level.
func LogLevelUsage() string {
	return "least severe level logged: " + orList(config.LogLevelNames, "or") + " (Salt's names; warn is warning)"
}

// rendererHelp says what each of config.Renderers does.
var rendererHelp = map[string]string{
	config.RendererAuto:   "as Salt does: Jinja, unless the file is unmistakably a Go template",
	config.RendererJinja:  "every one Jinja",
	config.RendererGotmpl: "every one a Go template",
}

// RendererUsage is the help of --renderer.
func RendererUsage() string {
	parts := make([]string, 0, len(config.Renderers))
	for _, r := range config.Renderers {
		if r != config.RendererAuto {
			parts = append(parts, r+" ("+rendererHelp[r]+")")
		}
	}
	return autoHelp("how reaction files without a shebang (or with Salt's #!jinja|yaml) are read: "+orList(parts, "or")+
		"; #!gotmpl|yaml and #!yaml always win", "the reactord: section's renderer; without one, "+rendererHelp[config.RendererAuto])
}

// orList joins words as "a, b or c".
func orList(words []string, conj string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}
