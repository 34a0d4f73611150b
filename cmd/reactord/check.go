package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/engine"
)

func cmdCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("check", "reactord check -c CONF [--event FILE|-] [--events FILE|-] [--nats URL]\n  or: reactord check --nats URL",
		`Validates everything that can be checked without an event: the
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
were found, 2 on bad usage.`, stderr)
	conf := fs.String("c", "", "reactor configuration: a file or a master.d directory (required)")
	evFile := fs.String("event", "", "also render this event ({\"tag\", \"data\"} JSON), or - for stdin")
	evsFile := fs.String("events", "", "also render every event of this file (in any format replay reads), or - for stdin, and validate the reactions")
	renderer := rendererFlag(fs)
	rules := fs.Bool("rules", false, "print each rule's id (what throttle, debounce and the shared state key its state by), glob, reaction files and loop guard")
	out := fs.String("out", "text", `text (problems on stderr, one a line, as file:line:col: message) or json (one object on stdout: ok, rules, files, loaded files and their renderers, problems with file, line, col and message)`)
	offline := fs.Bool("offline", false, "do not contact the driver's salt-api or the master's reactord engine (by default, with driver: saltapi configured, check logs in to it; with driver: master, it asks whether the engine listens)")
	settings := fs.Bool("settings", false, "print the daemon's settings as `reactord run -c CONF` would merge them (flag, environment, reactord: section, default), with where each came from")
	var nopts daemon.NATSOptions
	nopts.Flags(fs, "NATS URL(s) of a server to check: its version, JetStream, and which of reactord's features it can have (none: no NATS check)")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *conf == "" && nopts.URL == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "check: need -c CONF, or --nats URL")
		fs.Usage()
		return exitUsage
	}
	if *out != "text" && *out != "json" {
		fmt.Fprintf(stderr, "check: --out %q: want text or json\n", *out)
		return exitUsage
	}
	var natsRep *natsReport
	var natsProblems []error
	if *conf == "" {
		// --nats alone: what needs a configuration is refused, not
		// silently skipped.
		for _, f := range []struct {
			name string
			set  bool
		}{{"--event", *evFile != ""}, {"--events", *evsFile != ""}, {"--settings", *settings}, {"--rules", *rules}} {
			if f.set {
				fmt.Fprintf(stderr, "check: %s needs -c CONF (check --nats URL alone checks the server only)\n", f.name)
				return exitUsage
			}
		}
	}
	if nopts.URL != "" {
		enabled, err := enabledFeatures(*conf)
		rep, probs := checkNATS(ctx, nopts, enabled)
		if err != nil {
			probs = append(probs, err)
		}
		natsRep, natsProblems = &rep, probs
	}
	if *conf == "" {
		res := checkResult{NATS: natsRep, problems: natsProblems, natsOnly: true}
		if *out == "json" {
			return res.printJSON(stdout)
		}
		return res.printText(stdout, stderr)
	}
	if *settings {
		if code := printSettings(*conf, stdout, stderr); code != exitOK {
			return code
		}
	}
	rep := engine.Check(*conf, renderer())
	if *rules && rep.Config != nil && *out == "text" {
		for _, r := range rep.Config.Rules {
			refs := make([]string, len(r.SLS))
			for i, s := range r.SLS {
				refs[i] = s.Ref
			}
			fmt.Fprintf(stdout, "rule %s: %s -> %s (%s) guard: %s%s\n", r.ID, r.Glob, strings.Join(refs, ", "), r.Pos, guardMode(r), ruleOptionsText(r.Options))
		}
	}
	res := checkResult{Rules: rep.Rules, Files: rep.Files, Loaded: []loadedJSON{}, problems: append(rep.Problems, natsProblems...), NATS: natsRep}
	for _, f := range rep.Loaded {
		res.Loaded = append(res.Loaded, loadedJSON{Path: f.Path, Renderer: f.Renderer, SaltCalls: f.SaltCalls})
	}
	if rep.Config != nil {
		if opts, _, _, code := mergedOptions([]string{"-c", *conf}, io.Discard, io.Discard); code == exitOK {
			res.Warnings = daemon.TopologyWarnings(rep.Config, opts)
		}
	}
	if rep.Config != nil && !*offline {
		if note, warn := probeMasterEngine(ctx, *conf); warn != "" {
			res.Warnings = append(res.Warnings, warn)
		} else if note != "" {
			res.Driver = note
		}
		note, err := probeDriver(ctx, *conf)
		if note != "" {
			res.Driver = note
		}
		if err != nil {
			res.problems = append(res.problems, err)
		}
	}
	if rep.Config != nil && (*evFile != "" || *evsFile != "") {
		if code := res.renderEvents(ctx, rep, *evFile, *evsFile, stdin, stderr); code != exitOK {
			return code
		}
	}
	if *out == "json" {
		return res.printJSON(stdout)
	}
	return res.printText(stdout, stderr)
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
	NATS     *natsReport `json:"nats,omitempty"`
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
		printNATSText(stdout, r.NATS)
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

// problemPos splits "FILE:LINE:COL: message".
var problemPos = regexp.MustCompile(`^(.+?):(\d+):(\d+): `)

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
			p := problem{Message: text}
			if m := problemPos.FindStringSubmatch(text); m != nil {
				p.File, p.Message = m[1], text[len(m[0]):]
				p.Line, _ = strconv.Atoi(m[2])
				p.Col, _ = strconv.Atoi(m[3])
			}
			probs = append(probs, p)
		}
	}
	var doc any = struct {
		OK bool `json:"ok"`
		*checkResult
		Problems []problem `json:"problems"`
	}{len(probs) == 0, r, probs}
	if r.natsOnly {
		doc = struct {
			OK       bool        `json:"ok"`
			NATS     *natsReport `json:"nats"`
			Problems []problem   `json:"problems"`
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
	drv, err := opts.Drivers.Driver(opts.Driver, nil, nil)
	if err == nil {
		defer drv.Close(ctx)
		if p, ok := drv.(actions.Prober); ok {
			pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err = p.Probe(pctx)
			cancel()
		}
	}
	if err != nil {
		return "", fmt.Errorf("driver saltapi: %w (check --offline skips this)", err)
	}
	what := "answers"
	if opts.Drivers.APIUser != "" {
		what = "answers and the credentials log in"
	}
	return fmt.Sprintf("driver saltapi: %s %s", opts.Drivers.APIURL, what), nil
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

// ruleOptionsText lists the options of a rule that change which events
// react and how often, for check --rules ("" when none).
func ruleOptionsText(o config.RuleOptions) string {
	var b strings.Builder
	if o.From != "" {
		fmt.Fprintf(&b, " from: %s", o.From)
	}
	if o.Concurrency > 0 {
		fmt.Fprintf(&b, " concurrency: %d", o.Concurrency)
	}
	if o.Retry.Attempts > 0 {
		fmt.Fprintf(&b, " retry: %d every %s+", o.Retry.Attempts, o.Retry.Backoff)
	}
	if o.Collect.Within > 0 {
		fmt.Fprintf(&b, " collect: within %s, max %d", o.Collect.Within, o.Collect.Max)
	}
	return b.String()
}
