package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/natsbus"
)

// checkCmd is reactord check: its flags' values.
type checkCmd struct {
	fs                         *flag.FlagSet
	conf, evFile, evsFile, out string
	stubs                      string
	rules, offline, settings   bool
	renderer                   func() string
	nats                       daemon.NATSOptions
}

// checkFlags defines check's flags and returns the command.
func checkFlags(fs *flag.FlagSet) cli.Func {
	c := &checkCmd{fs: fs}
	fs.StringVar(&c.conf, "c", "", "reactor configuration: a file or a master.d directory (required)")
	fs.StringVar(&c.evFile, "event", "", "also render this event ({\"tag\", \"data\"} JSON), or - for stdin")
	fs.StringVar(&c.evsFile, "events", "", "also render every event of this file (in any format replay reads), or - for stdin, and validate the reactions")
	c.renderer = rendererFlag(fs)
	stubsFlag(fs, &c.stubs)
	fs.BoolVar(&c.rules, "rules", false, "print each rule's id (what throttle, debounce and the shared state key its state by), glob, reaction files and loop guard")
	fs.StringVar(&c.out, "out", "text", `text (problems on stderr, one a line, as file:line:col: message) or json (one object on stdout: ok, rules, files, loaded files and their renderers, problems with file, line, col and message)`)
	fs.BoolVar(&c.offline, "offline", false, "do not contact the driver's salt-api or the master's reactord engine (by default, with driver: saltapi configured, check logs in to it; with driver: master, it asks whether the engine listens)")
	fs.BoolVar(&c.settings, "settings", false, "print the daemon's settings as `reactord run -c CONF` would merge them (flag, environment, reactord: section, default), with where each came from")
	c.nats.Flags(fs, "NATS URL(s) of a server to check: its version, JetStream, and which of reactord's features it can have (none: no NATS check)")
	return c.run
}

// run checks the configuration, the NATS server, or both.
func (c *checkCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	if c.conf == "" && c.nats.URL == "" || len(args) > 0 {
		return cli.UsageError(c.fs, "need -c CONF, or --nats URL")
	}
	if c.out != "text" && c.out != "json" {
		return cli.UsageError(c.fs, fmt.Sprintf("--out %q: want text or json", c.out))
	}
	if c.conf == "" {
		// --nats alone: what needs a configuration is refused, not
		// silently skipped.
		for _, f := range []struct {
			name string
			set  bool
		}{{"--event", c.evFile != ""}, {"--events", c.evsFile != ""}, {"--settings", c.settings}, {"--rules", c.rules}} {
			if f.set {
				return cli.UsageError(c.fs, f.name+" needs -c CONF (check --nats URL alone checks the server only)")
			}
		}
	}
	res := checkResult{Loaded: []loadedJSON{}, natsOnly: c.conf == ""}
	if c.nats.URL != "" {
		enabled, err := enabledFeatures(c.conf)
		rep, probs := checkNATS(ctx, c.nats, enabled)
		if err != nil {
			probs = append(probs, err)
		}
		res.NATS, res.problems = &rep, probs
	}
	if c.conf != "" {
		if code := c.checkConf(ctx, &res, s); code != exitOK {
			return code
		}
	}
	if c.out == "json" {
		return res.printJSON(s.Stdout)
	}
	return res.printText(s.Stdout, s.Stderr)
}

// checkConf checks the configuration into res: its rules and files, the
// daemon's settings, the driver, and the events of --event and --events.
func (c *checkCmd) checkConf(ctx context.Context, res *checkResult, s cli.Streams) int {
	if c.settings {
		if code := printSettings(c.conf, s.Stdout, s.Stderr); code != exitOK {
			return code
		}
	}
	rep := engine.Check(c.conf, c.renderer())
	if c.rules && rep.Config != nil && c.out == "text" {
		for _, r := range rep.Config.Rules {
			refs := make([]string, len(r.SLS))
			for i, s := range r.SLS {
				refs[i] = s.Ref
			}
			fmt.Fprintf(s.Stdout, "rule %s: %s -> %s (%s) guard: %s%s\n", r.ID, r.Glob, strings.Join(refs, ", "), r.Pos, guardMode(r), r.Options.Summary())
		}
	}
	res.Rules, res.Files, res.problems = rep.Rules, rep.Files, append(rep.Problems, res.problems...)
	for _, f := range rep.Loaded {
		res.Loaded = append(res.Loaded, loadedJSON{Path: f.Path, Renderer: f.Renderer, SaltCalls: f.SaltCalls})
	}
	if rep.Config == nil {
		return exitOK
	}
	if opts, _, _, code := mergedOptions([]string{"-c", c.conf}, io.Discard, io.Discard); code == exitOK {
		res.Warnings = daemon.TopologyWarnings(rep.Config, opts)
	}
	if !c.offline {
		if note, warn := probeMasterEngine(ctx, c.conf); warn != "" {
			res.Warnings = append(res.Warnings, warn)
		} else if note != "" {
			res.Driver = note
		}
		note, err := probeDriver(ctx, c.conf)
		if note != "" {
			res.Driver = note
		}
		if err != nil {
			res.problems = append(res.problems, err)
		}
	}
	if c.evFile != "" || c.evsFile != "" {
		code := exitOK
		if c.stubs != "" { // the events' Salt calls answered by the stubs
			rep.Engine, code = loadEngine(c.conf, s.Stderr, false, engine.Options{Renderer: c.renderer()}, c.stubs)
		}
		if rep.Engine == nil {
			return code
		}
		return res.renderEvents(ctx, rep, c.evFile, c.evsFile, s.Stdin, s.Stderr)
	}
	return exitOK
}

// checkResult is what check found, printed as text or JSON.
type checkResult struct {
	Rules  int          `json:"rules"`
	Files  int          `json:"files"`
	Loaded []loadedJSON `json:"loaded"`
	// Driver says what the driver's probe found ("" without one).
	Driver string `json:"driver,omitempty"`
	// Events notes each event rendered (--event, --events).
	Events []string `json:"events,omitempty"`
	// Warnings are what is not wrong but would surprise: a topology that
	// reacts once per master (daemon.TopologyWarnings).
	Warnings []string `json:"warnings,omitempty"`
	// NATS is what --nats found.
	NATS     *natsbus.ServerReport `json:"nats,omitempty"`
	problems []error
	natsOnly bool // no configuration: the NATS report alone
}

// loadedJSON is one reaction file that loads, and how it is read.
type loadedJSON struct {
	Path      string `json:"path"`
	Renderer  string `json:"renderer"`
	SaltCalls int    `json:"salt_calls,omitempty"`
}

// renderEvents renders --event and every event of --events, adding their
// problems; it returns a usage exit code when an event cannot be read.
func (r *checkResult) renderEvents(ctx context.Context, rep engine.CheckReport, evFile, evsFile string, stdin io.Reader, stderr io.Writer) int {
	if evFile != "" {
		ev, err := readEvent("", "", evFile, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		res, err := rep.Engine.Process(ctx, ev)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		r.problems = append(r.problems, res.Errors()...)
		r.Events = append(r.Events, fmt.Sprintf("event %s: %d reaction(s)", res.Tag, len(res.Chunks)))
	}
	if evsFile != "" {
		var in io.Reader = stdin
		if evsFile != "-" {
			f, err := os.Open(evsFile)
			if err != nil {
				fmt.Fprintf(stderr, "check: --events: %v\n", err)
				return exitUsage
			}
			defer f.Close()
			in = f
		}
		n, probs := engine.CheckEvents(ctx, rep.Engine, in)
		r.problems = append(r.problems, probs...)
		r.Events = append(r.Events, fmt.Sprintf("%d event(s) rendered", n))
	}
	return exitOK
}

// printText prints the problems on stderr, one a line, and the rest on
// stdout; it returns the exit code.
func (r *checkResult) printText(stdout, stderr io.Writer) int {
	for _, p := range r.problems {
		fmt.Fprintln(stderr, p)
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	salty := 0
	for _, f := range r.Loaded {
		line := fmt.Sprintf("%s: %s", f.Path, f.Renderer)
		if f.SaltCalls > 0 {
			salty++
			line += fmt.Sprintf("; calls Salt while rendering (%d use(s)): salt['mod.fun'](...), grains, pillar and opts run on the master through the driver, if --salt-calls allows it", f.SaltCalls)
		}
		fmt.Fprintln(stdout, line)
	}
	if salty > 0 {
		fmt.Fprintf(stdout, "%d reaction file(s) call Salt while rendering: their salt['mod.fun'](...) calls run on the master through the saltapi, exec or master driver (--salt-calls: read-only functions by default)\n", salty)
	}
	if r.Driver != "" {
		fmt.Fprintln(stdout, r.Driver)
	}
	for _, e := range r.Events {
		fmt.Fprintln(stdout, e)
	}
	if r.NATS != nil {
		r.NATS.WriteText(stdout)
	}
	if len(r.problems) > 0 {
		fmt.Fprintf(stdout, "%d problem(s) found\n", len(r.problems))
		return exitFound
	}
	if r.natsOnly {
		fmt.Fprintln(stdout, "ok")
		return exitOK
	}
	fmt.Fprintf(stdout, "ok: %d rule(s), %d reaction file(s)\n", r.Rules, r.Files)
	return exitOK
}

// printJSON prints one JSON object: {"ok", "rules", "files", "loaded",
// "problems": [{"file", "line", "col", "message"}], ...}; it returns the
// exit code.
func (r *checkResult) printJSON(stdout io.Writer) int {
	type problem struct {
		File    string `json:"file,omitempty"`
		Line    int    `json:"line,omitempty"`
		Col     int    `json:"col,omitempty"`
		Message string `json:"message"`
	}
	probs := make([]problem, 0, len(r.problems))
	for _, e := range r.problems {
		for _, text := range strings.Split(e.Error(), "\n") {
			pos, msg, _ := position.Split(text)
			probs = append(probs, problem{File: pos.File, Line: pos.Line, Col: pos.Col, Message: msg})
		}
	}
	var doc any = struct {
		OK bool `json:"ok"`
		*checkResult
		Problems []problem `json:"problems"`
	}{len(probs) == 0, r, probs}
	if r.natsOnly {
		doc = struct {
			OK       bool                  `json:"ok"`
			NATS     *natsbus.ServerReport `json:"nats"`
			Problems []problem             `json:"problems"`
		}{len(probs) == 0, r.NATS, probs}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	if len(probs) > 0 {
		return exitFound
	}
	return exitOK
}

// probeMasterEngine, when the configuration chooses the master driver,
// asks whether reactord's Salt engine listens (daemon.ProbeMasterEngine).
func probeMasterEngine(ctx context.Context, conf string) (note, warning string) {
	opts, _, _, code := mergedOptions([]string{"-c", conf}, io.Discard, io.Discard)
	if code != exitOK || opts.Driver != "master" {
		return "", ""
	}
	return opts.Drivers.ProbeMasterEngine(ctx)
}

// probeDriver, when the configuration (its reactord: section, flags'
// environment variables) chooses the saltapi driver, checks that salt-api
// answers and the credentials log in, as the daemon does at start. It
// returns what it found ("" without a driver to probe), and the problem.
func probeDriver(ctx context.Context, conf string) (string, error) {
	opts, _, _, code := mergedOptions([]string{"-c", conf}, io.Discard, io.Discard)
	if code != exitOK || opts.Driver != "saltapi" {
		return "", nil
	}
	return opts.Drivers.ProbeSaltAPI(ctx)
}

// printSettings prints the daemon's settings for conf, merged as
// `reactord run -c CONF` merges them (mergedOptions), one per line: the flag, its value (secrets as "(set)") and where it came from.
func printSettings(conf string, stdout, stderr io.Writer) int {
	_, fs, sources, code := mergedOptions([]string{"-c", conf}, stdout, stderr)
	if code != exitOK {
		return code
	}
	for _, s := range daemon.Settings(fs, sources) {
		fmt.Fprintf(stdout, "setting --%s = %q (%s; key %s, $%s)\n", s.Flag, s.Value, s.Source, s.Key, s.Env)
	}
	return exitOK
}
