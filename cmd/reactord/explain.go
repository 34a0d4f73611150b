package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/guard"
	"github.com/reactord/reactord/internal/cli"
)

// explainCmd is reactord explain: its flags' values.
type explainCmd struct {
	fs                      *flag.FlagSet
	conf, tag, data, evFile string
	verbose                 bool
	renderer                func() string
	drivers                 daemon.DriverOptions
	saltCalls, stubs        string
}

// explainFlags defines explain's flags and returns the command.
func explainFlags(fs *flag.FlagSet) cli.Func {
	c := &explainCmd{fs: fs, drivers: daemon.DefaultDriverOptions(), saltCalls: daemon.SaltCallsDefault}
	fs.StringVar(&c.conf, "c", "", "reactor configuration: a file or a master.d directory (required)")
	fs.StringVar(&c.tag, "tag", "", "event tag (as render takes it)")
	fs.StringVar(&c.data, "data", "", "event data as a JSON object, or @FILE to read it from a file")
	fs.StringVar(&c.evFile, "event", "", "file holding one event {\"tag\", \"data\"} (or - for stdin)")
	c.renderer = rendererFlag(fs)
	stubsFlag(fs, &c.stubs)
	fs.BoolVar(&c.verbose, "v", false, "log each pipeline decision to stderr")
	c.drivers.Flags(fs)
	daemon.SaltCallsFlag(fs, &c.saltCalls)
	return c.run
}

// run explains one event.
func (c *explainCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	stdout, stderr := s.Stdout, s.Stderr
	if c.conf == "" || (c.tag == "") == (c.evFile == "") || len(args) > 0 {
		return cli.UsageError(c.fs, "need -c CONF and exactly one of --tag or --event FILE")
	}
	ev, err := readEvent(c.tag, c.data, c.evFile, s.Stdin)
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return exitUsage
	}
	eo := engine.Options{Renderer: c.renderer()}
	df := &c.drivers
	if df.APIURL != "" && c.saltCalls != "off" {
		// The files' allowed Salt calls run for real, through salt-api.
		api, err := df.Driver("saltapi", stdout, nil)
		if err != nil {
			fmt.Fprintf(stderr, "explain: %v\n", err)
			return exitUsage
		}
		defer api.Close(context.WithoutCancel(ctx))
		if eo.SaltCalls, err = daemon.NewSaltCalls(c.saltCalls, api, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
			fmt.Fprintf(stderr, "explain: %v\n", err)
			return exitUsage
		}
	}
	eng, code := loadEngine(c.conf, stderr, c.verbose, eo, c.stubs)
	if eng == nil {
		return code
	}
	w := &strings.Builder{}
	fmt.Fprintf(w, "event %s\n", ev.Tag)
	res, err := eng.Process(ctx, ev)
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return exitUsage
	}
	engine.Explain(w, ev, eng.Config().Rules, res, guardMode)
	apiURL, _, _ := strings.Cut(df.APIURL, ",") // several: the first describes the call
	if apiURL == "" {
		apiURL = "https://salt-api:8000"
	}
	explainReactions(w, ev, res, explainDrivers(df, apiURL, stdout))
	_, _ = io.WriteString(stdout, w.String())
	if len(res.Errors()) > 0 {
		return exitFound
	}
	return exitOK
}

// explainReactions writes each reaction in execution order, the loop
// guard that would hold it and the call each driver would make.
func explainReactions(w io.Writer, ev event.Event, res *engine.Result, describers []namedDescriber) {
	fmt.Fprintf(w, "reactions (%d, in execution order)\n", len(res.Chunks))
	minion := event.MinionOf(ev.Tag, nil)
	if minion == "" {
		minion, _ = ev.Data["id"].(string)
	}
	gev := guard.EventOf(ev.Tag, minion, time.Now())
	for i, c := range res.Chunks {
		fmt.Fprintf(w, "  %d. %s %s (id %q, %s, order %v)\n", i+1, c.Str("state"), c.Str("fun"), c.Str("__id__"), c.Str("__sls__"), must(c.Get("order")))
		option := ""
		if r := res.RuleOf(i); r != nil {
			option = r.Options.Guard
		}
		mode := guard.ModeFor(option, c.Str("state"), c.Str("fun"))
		fmt.Fprintf(w, "     loop guard (%s): %s\n", mode, guardExplained(mode, gev))
		a := actions.Action{Tag: ev.Tag, Chunk: c}
		for _, d := range describers {
			desc, err := d.d.Describe(a)
			if err != nil {
				desc = "cannot: " + err.Error()
			}
			fmt.Fprintf(w, "     %s: %s\n", d.name, desc)
		}
	}
}

// guardMode is a rule's loop guard mode, its guard option or the default.
func guardMode(r config.Rule) string {
	if r.Options.Guard != "" {
		return r.Options.Guard
	}
	return guard.ModeBeacons
}

// guardExplained says when the daemon's loop guard would hold a reaction
// back from this event (see guard.Guard.Held).
func guardExplained(mode string, ev guard.Event) string {
	const dry = " (--dry-run and the nats driver count a dispatch as a job that returned at once: the settle window only)"
	switch {
	case mode == guard.ModeOff:
		return "off for this rule: only the hop limit and Salt's Reactor rule apply"
	case ev.JID != "":
		return "held back if this reaction started job " + ev.JID + " (an event of its own job); other rules react"
	case mode == guard.ModeMinion && ev.Minion != "":
		return "held back while a job this reaction started runs on " + ev.Minion + ", and --settle after it returned there" + dry
	case ev.Beacon:
		return "held back while a job this reaction started runs on " + ev.Minion + ", and --settle after it returned there (the job's own changes)" + dry
	case ev.Start:
		return "held back while a job this reaction started on " + ev.Minion + " has not returned (the job restarted the minion)"
	}
	return "never held back for this event: only its own jobs' events, their minions' beacons and restarts are (the hop limit applies)"
}

// namedDescriber is a driver that says the call it would make, and its
// name.
type namedDescriber struct {
	name string
	d    actions.Describer
}

// explainDrivers are the drivers whose calls explain shows: dryrun,
// saltapi (at apiURL) and exec.
func explainDrivers(df *daemon.DriverOptions, apiURL string, stdout io.Writer) []namedDescriber {
	out := []namedDescriber{{"dryrun", actions.NewDryRun(stdout)}}
	if api, err := saltapi.New(saltapi.Config{URL: apiURL, Token: "TOKEN"}); err == nil {
		out = append(out, namedDescriber{"saltapi", api})
	}
	if ex, err := execdriver.New(execdriver.Config{Salt: df.SaltBin, SaltRun: df.SaltRunBin, SaltCall: df.SaltCallBin}); err == nil {
		out = append(out, namedDescriber{"exec", ex})
	}
	return out
}

// must is v, whether it was found or not.
func must(v any, _ bool) any { return v }
