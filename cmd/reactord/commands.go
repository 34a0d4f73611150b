package main

import (
	"context"

	"github.com/reactord/reactord/internal/cli"
)

// commands is reactord's command table: the help ('reactord help'), the
// package doc (doc.go) and docs/operating.md's list of commands are
// written from it, and TestCommandDocs keeps the last two in step.
var commands = &cli.Table{Program: "reactord", Header: usageHeader, Footer: usageFooter, Commands: []cli.Command{
	{
		Name:  "run",
		Short: "run the reactor daemon (the same as giving flags only)",
		Usage: "reactord -c CONF [--dry-run | --driver NAME] [--nats URL | --listen ADDR] [--jetstream] [--http ADDR]",
		Long: `Runs the reactor: events arrive on NATS (subjects salt.evt.<tag>), match the
configuration's rules, and their reactions are executed by the driver. With no
--nats URL an embedded NATS server is started on --listen (JetStream data
under --data-dir). SIGHUP (or a change to a configuration file) reloads the
configuration, keeping the old one when the new one fails; SIGTERM drains
in-flight events within --drain-timeout.

Each setting comes from its flag, else its environment variable
(REACTORD_<FLAG>, e.g. REACTORD_DATA_DIR; NATS_URL for --nats too), else
the configuration's reactord: section (the flag's name with underscores),
else its default; 'reactord check -c CONF --settings' prints the result.`,
		Flags: daemonFlags,
	},
	{
		Name:  "shadow",
		Short: "run beside Salt's reactor, dispatching nothing, and compare decisions",
		Usage: "reactord shadow -c CONF [--driver NAME] [--shadow-window DUR] [--salt-user USER] [daemon flags]",
		Long: `Runs the reactor beside Salt's own reactor, changing nothing: every event
goes through the whole pipeline as if live (rules, rendering, when, throttle,
debounce, concurrency, collect, who sent it, the loop guard) and nothing is
dispatched. Each decision is compared with the jobs Salt's reactor really
started, read from the bus (the bridge publishes them), and gets one verdict:
agree, differ, reactord-only, salt-only, ambiguous, or held-* for what
reactord holds back on purpose (held-loop: the loop guard). Verdicts are
counted in reactord_shadow_total{verdict}, kept in the audit store ('reactord
shadow report' reads them), and each disagreement logged (one line per verdict
and rule a minute). --driver serves only the reaction files' read-only Salt
calls. Run one shadow daemon: a decision and Salt's job pair in one process.

It takes every flag of 'reactord run' but --dry-run and --partitions (and
--jetstream-sync defaults to NATS's own 2m: an event lost with the machine
costs a verdict, not a reaction), and two of its own, --shadow-window and --salt-user (flags, or REACTORD_SHADOW_WINDOW
and REACTORD_SALT_USER; not settings of the reactord: section). docs/migration.md has the procedure:
shadow for a week, read the report, switch, and how to go back.`,
		Flags: shadowFlags,
	},
	{
		Name:  "shadow report",
		Short: "sum up the verdicts shadow mode recorded",
		Usage: "reactord shadow report [--since DUR|TIME] [--until DUR|TIME] [--rule GLOB] [--out table|json] [--limit N] [--store URL | -c CONF | --data-dir DIR]",
		Long: `Sums up what shadow mode (reactord shadow) wrote to the audit store: the
verdict of each of reactord's decisions against the jobs Salt's reactor
started, counted by rule and in words, and the latest verdicts other than
agree with their reasons. Exit 0, or 2 on bad usage or when the store
cannot be read.`,
		Flags: shadowReportFlags,
	},
	{
		Name:  "render",
		Short: "compile the reactions of one event into Salt low chunks (JSON)",
		Usage: "reactord render -c CONF (--tag TAG [--data JSON|@FILE] | --event FILE|-)",
		Long: `Runs the whole pipeline for one event without executing anything and prints
a JSON array of the low chunks in the order Salt would execute them ([] when
the event triggers nothing). Errors go to stderr as file:line:col: message.
Exit 0 when every matched file rendered, 1 when a file or the event's
reactions failed (the array still shows what Salt would run), 2 on bad input.`,
		Flags: renderFlags,
	},
	{
		Name:  "test",
		Short: "run reaction test files: events and the chunks each must make",
		Usage: "reactord test [--junit FILE] [-v] FILE...",
		Long: `Runs each test file's reaction tests (docs/reaction-files.md, "Testing
reaction files"): every test's event goes through the rules and reaction files
of the file's reactor: configuration, with stubs: answering their Salt calls,
and its chunks are compared with what the test expects. Each failure prints
its differences. Exit 0 when all pass, 1 when one fails, 2 when a file or its
configuration does not load.`,
		Flags: testFlags,
	},
	{
		Name:  "rules",
		Short: "list the running daemon's rules, their files, load time and counts",
		Usage: "reactord rules --http ADDR [--out text|json]",
		Long: `Asks the running daemon (its --http address) which rules it reacts with: the
configuration, when it was loaded (its start, or the last reload that took),
and each rule's id, glob, reaction files and position, with the reactions it
dispatched, held back and that failed since the daemon started, and when it
last decided. The same is served as JSON on the daemon's /rules. Exit 0, or
2 when the daemon cannot be asked.`,
		Flags: rulesFlags,
	},
	{
		Name:  "check",
		Short: "validate a reactor configuration and its reaction files",
		Usage: "reactord check -c CONF [--event FILE|-] [--events FILE|-] [--nats URL]\n  or: reactord check --nats URL",
		Long: `Validates everything that can be checked without an event: the
configuration (against schemas/reactor-config.json and Salt's rules), every
SLS reference (it must name at least one file), every reaction file (it must
parse as a template), every file without template actions (compiled in
full), and every file rendered with each sample event of reactord's
catalogue of Salt's event shapes that its rule matches (what the file's
shape makes fail is reported, not what depends on the event's data). It
prints how each file is read (jinja, gotmpl, yaml, and why). With --event,
the event is also rendered; with --events FILE, every
event of a recording (JSON {"tag","data"} or state.event lines, what replay
reads — e.g. from reactord events --out json) is rendered and every reaction
it gives is validated against the low chunk schema, so what only an event
shows (a templated file that breaks once filled in, an unknown reaction
type) is found before the daemon meets it; a problem many events repeat is
printed once. Every problem is printed to
stderr as file:line:col: message; entries Salt would skip silently count as
problems. With --nats URL (and the daemon's NATS connection flags), it
connects to that server and prints its version (in a cluster, the lowest of
the nodes it can read), whether it has JetStream, and for each feature built
on JetStream whether it works there or is refused, with the version it
needs; a feature the configuration turns on that the server refuses (the
daemon would not start) is a problem. Exit 0 when clean, 1 when problems
were found, 2 on bad usage.`,
		Flags: checkFlags,
	},
	{
		Name:  "replay",
		Short: "run recorded events through the reactor, printing reactions",
		Usage: "reactord replay -c CONF [--quiet] --events FILE|-",
		Long: `Reads events, one per line, as JSON {"tag": ..., "data": {...}} or as
salt-run state.event lines (TAG<tab>{json}), or in the multi-line format of
state.event pretty=True that 'reactord events' prints (errors name an
event's first line), runs each through the reactor
without executing anything, and prints one JSON line per reaction,
{"tag": TAG, "chunk": {...}}, in input order. Errors go to stderr. It always
ends with one JSON summary line on stderr:
{"events","matched","reactions","errors","seconds","events_per_sec"}.
Exit 0 when no errors were found, 1 when some were, 2 on bad usage or input.`,
		Flags: replayFlags,
	},
	{
		Name:  "explain",
		Short: "say what reactord does with one event, and why",
		Usage: "reactord explain -c CONF (--tag TAG [--data JSON|@FILE] | --event FILE|-) [--saltapi-url URL]",
		Long: `Explains what reactord does with one event: the pre-filters, each rule
matched or not and why (glob, when condition), each file rendered or its
error with position, reaction IDs a later file overwrote, Salt's verify_high,
the loop guard, throttle and debounce that would apply, and the exact call
each driver would make for each reaction. Exit 0, or 1 when the event's
reactions have errors, 2 on bad input.`,
		Flags: explainFlags,
	},
	{
		Name:  "fire",
		Short: "publish one event (or a file of events) to NATS",
		Usage: "reactord fire --nats URL TAG [JSON] | reactord fire --nats URL --events FILE|-",
		Main: func(ctx context.Context, args []string, s cli.Streams) int {
			return cmdFire(ctx, args, s.Stdin, s.Stdout, s.Stderr)
		},
	},
	{
		Name:  "events",
		Short: "print events from NATS as salt-run state.event does",
		Usage: "reactord events --nats URL [--out json] [GLOB] | reactord events --since DUR|TIME [--store URL | -c CONF | --data-dir DIR] [--out json] [GLOB]",
		Long: `Prints events as they arrive on NATS, in the format of salt-run state.event
pretty=True: the tag, a tab, and the data as JSON indented by 4 with sorted
keys. With --out json it prints one {"tag": ..., "data": {...}} line per
event instead, what replay and fire --events read: record with
'reactord events --out json > day.jsonl', replay with
'reactord replay -c CONF --events day.jsonl'. GLOB filters tags with Salt's fnmatch
rules. Runs until interrupted. With --since it prints the events archived in
the audit store instead, found as the daemon finds it (--store, -c CONF's
reactord: section, --data-dir); an event the reaction ledger holds
something about (a dispatch, a suppression, a failure) comes with
reactord's event id, what trace takes: a "# event_id=ID" line before a
pretty event, an "event_id" member in JSON.`,
		Flags: eventsFlags,
	},
	{
		Name:  "bridge",
		Short: "publish a Salt master's events to NATS (its event socket, or salt-api)",
		Usage: "reactord bridge [--sock-dir DIR | --saltapi-url URL ...] [--nats URL] [--data-dir DIR] [--http ADDR]",
		Long: `Publishes every event of a Salt master's event bus to NATS: to JetStream
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
interrupted.`,
		Flags: bridgeFlags,
	},
	{
		Name:  "jobs",
		Short: "list archived jobs, or look up a job's returns",
		Long:  "the job cache the daemon archives, read like salt-run jobs.*",
	},
	{
		Name:  "jobs list",
		Short: "list archived jobs, as salt-run jobs.list_jobs",
		Usage: "reactord jobs list [--since DUR|TIME] [--limit N] [--store URL | -c CONF | --data-dir DIR]",
		Long:  "Lists archived jobs, newest first, with the fields of salt-run jobs.list_jobs (function, arguments, target, target type, user, start time from the jid); with --out json one object {jid: fields}, as list_jobs --out json.",
		Flags: jobsListFlags,
	},
	{
		Name:  "jobs lookup",
		Short: "print a job's returns, as salt-run jobs.lookup_jid",
		Usage: "reactord jobs lookup JID [--out json] [--store URL | -c CONF | --data-dir DIR]",
		Long:  "Prints every minion's return for a job, in the order they returned, like salt-run jobs.lookup_jid; with --out json one object {minion id: return}.",
		Flags: jobsLookupFlags,
	},
	{
		Name:  "trace",
		Short: "print the reaction ledger of a job or an event",
		Usage: "reactord trace JID|EVENT-ID [--store URL | -c CONF | --data-dir DIR]",
		Long:  "Prints the reaction ledger of one job or event: what happened to its reactions (suppressions and why, files that failed, dispatches with their rule and jid, failures), the returns of the jobs it started and the minions that did not return in time.",
		Flags: traceFlags,
	},
	{
		Name:  "convert",
		Short: "translate Salt Jinja reaction files into reactord Go templates",
		Usage: "reactord convert [-w] FILE|DIR...",
		Long: `Translates Salt Jinja reaction files into reactord Go templates, with
Jinja's meaning: a missing key is an error as under Salt's StrictUndefined,
comparisons and 'in' follow Python, set keeps Jinja's scoping. A directory
converts every .sls file under it. The converted template goes to stdout,
or with -w replaces the file, the original kept as FILE.orig. A file that
uses what reactord cannot render (salt[...] calls, pillar, grains, opts,
#!py, macros, imports) is refused whole, with every problem as
file:line:col: construct: reason; it is never half converted. Each file
gets one summary line on stderr. Exit 0 when every file converted, 1 when
some were refused, 2 on bad usage or an unreadable file.`,
		Flags: convertFlags,
	},
	{
		Name:  "version",
		Short: "print the version, commit and Go version (also: reactord --version)",
		Usage: "reactord version [--out json]",
		Long:  "Prints reactord's version, the commit it was built from and the Go version that built it.",
		Flags: versionFlags,
	},
}}
