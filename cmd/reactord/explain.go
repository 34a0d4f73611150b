package main

import (
	"context"
	"encoding/json"
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
	"github.com/reactord/reactord/matchers"
)

func cmdExplain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("explain", "reactord explain -c CONF (--tag TAG [--data JSON|@FILE] | --event FILE|-) [--saltapi-url URL]",
		`Explains what reactord does with one event: the pre-filters, each rule
matched or not and why (glob, when condition), each file rendered or its
error with position, reaction IDs a later file overwrote, Salt's verify_high,
the loop guard, throttle and debounce that would apply, and the exact call
each driver would make for each reaction. Exit 0, or 1 when the event's
reactions have errors, 2 on bad input.`, stderr)
	conf := fs.String("c", "", "reactor configuration: a file or a master.d directory (required)")
	tag := fs.String("tag", "", "event tag (as render takes it)")
	data := fs.String("data", "", "event data as a JSON object, or @FILE to read it from a file")
	evFile := fs.String("event", "", "file holding one event {\"tag\", \"data\"} (or - for stdin)")
	renderer := rendererFlag(fs)
	verbose := fs.Bool("v", false, "log each pipeline decision to stderr")
	df := daemon.DefaultDriverOptions()
	df.Flags(fs)
	saltCalls := daemon.SaltCallsDefault
	daemon.SaltCallsFlag(fs, &saltCalls)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *conf == "" || (*tag == "") == (*evFile == "") || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "explain: need -c CONF and exactly one of --tag or --event FILE")
		return exitUsage
	}
	ev, err := readEvent(*tag, *data, *evFile, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return exitUsage
	}
	eo := engine.Options{Renderer: renderer()}
	if df.APIURL != "" && saltCalls != "off" {
		// The files' allowed Salt calls run for real, through salt-api.
		api, err := df.Driver("saltapi", stdout, nil)
		if err != nil {
			fmt.Fprintf(stderr, "explain: %v\n", err)
			return exitUsage
		}
		defer api.Close(context.WithoutCancel(ctx))
		if eo.SaltCalls, err = daemon.NewSaltCalls(saltCalls, api, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
			fmt.Fprintf(stderr, "explain: %v\n", err)
			return exitUsage
		}
	}
	eng, code := loadEngine(*conf, stderr, *verbose, eo)
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
	explainRules(w, ev, eng.Config().Rules, res)
	explainFiles(w, res)
	explainSaltCalls(w, res)
	apiURL, _, _ := strings.Cut(df.APIURL, ",") // several: the first describes the call
	if apiURL == "" {
		apiURL = "https://salt-api:8000"
	}
	explainReactions(w, ev, res, explainDrivers(&df, apiURL, stdout))
	_, _ = io.WriteString(stdout, w.String())
	if len(res.Errors()) > 0 {
		return exitFound
	}
	return exitOK
}

// explainRules writes the pre-filters and, per rule, its id, whether it
// matched and why it did not react, and the throttle or debounce the
// daemon would apply.
func explainRules(w io.Writer, ev event.Event, rules []config.Rule, res *engine.Result) {
	if res.Skipped != "" {
		fmt.Fprintf(w, "  pre-filter: skipped: %s\n", res.Skipped)
	} else {
		fmt.Fprintf(w, "  pre-filters: passed (data.user is not \"Reactor\", not a salt/reactors/manage request)\n")
	}
	switch o := engine.OriginOf(ev.Tag, ev.Data); {
	case o.Forged != "":
		fmt.Fprintf(w, "  origin: forged? %s (rules without from: any do not react)\n", o.Forged)
	case o.Minion != "":
		fmt.Fprintf(w, "  origin: sent by minion %s (data.cmd _minion_event; the master verified the id)\n", o.Minion)
	default:
		fmt.Fprintf(w, "  origin: the master (or a batched minion event, which carries no sender)\n")
	}
	fmt.Fprintf(w, "rules\n")
	matched := map[int]bool{}
	for _, r := range res.Rules {
		matched[r] = true
	}
	notes := map[int][]string{}
	for _, n := range res.Notes {
		notes[n.Rule] = append(notes[n.Rule], n.Note)
	}
	for i, r := range rules {
		status := "no match (Python fnmatch over the whole tag)"
		if matchers.Compile(r.Glob).Match(ev.Tag) {
			status = "matched"
			if res.Skipped != "" {
				status = "matched, but the event was skipped"
			}
		}
		fmt.Fprintf(w, "  #%d %q (%s, id %s): %s\n", i, r.Glob, r.Pos, r.ID, status)
		for _, n := range notes[i] {
			fmt.Fprintf(w, "      not reacting: %s\n", n)
		}
		if !matched[i] {
			continue
		}
		o := r.Options
		if o.When != "" && len(notes[i]) == 0 {
			fmt.Fprintf(w, "      when: `%s` is true\n", o.When)
		}
		key := "the event's minion"
		if o.Key != "" {
			key = "`" + o.Key + "`"
		}
		if o.ThrottleCount > 0 {
			fmt.Fprintf(w, "      throttle (applied by the daemon): at most %d per %s per %s, counted under rule id %s\n", o.ThrottleCount, o.ThrottlePer, key, r.ID)
		}
		if o.Debounce > 0 {
			fmt.Fprintf(w, "      debounce (applied by the daemon): reacts once, with the last event, after %s without a new one per %s, held under rule id %s\n", o.Debounce, key, r.ID)
		}
		if o.Concurrency > 0 {
			fmt.Fprintf(w, "      concurrency (applied by the daemon): at most %d reactions in flight per %s (until every target of their jobs returned, or the job timeout); more wait, in order, unacknowledged\n", o.Concurrency, key)
		}
		if c := o.Collect; c.Within > 0 {
			per := "one collection for the rule"
			if o.Key != "" {
				per = "per " + key
			}
			quiet := ""
			if c.Quiet > 0 {
				quiet = fmt.Sprintf(", or once %s passed without one", c.Quiet)
			}
			fmt.Fprintf(w, "      collect (applied by the daemon): gathers up to %d events, %s, and reacts once %s after the first%s, with all of them as events (rendered here with this event alone)\n",
				c.Max, per, c.Within, quiet)
		}
		if rt := o.Retry; rt.Attempts > 0 {
			var on []string
			if rt.OnFailed {
				on = append(on, "failed")
			}
			if rt.OnNoReturn {
				on = append(on, "no_return")
			}
			fmt.Fprintf(w, "      retry (applied by the daemon): local jobs run again on the minions where they %s, up to %d times, %s apart (doubled each time)\n",
				strings.Join(on, " or "), rt.Attempts, rt.Backoff)
		}
		fmt.Fprintf(w, "      guard: %s\n", guardMode(r))
		fmt.Fprintf(w, "      from: %s\n", fromMode(r))
	}
}

// explainFiles writes each file rendered or its error, the reaction IDs a
// later file replaced, warnings and Salt's verify_high.
func explainFiles(w io.Writer, res *engine.Result) {
	if len(res.Files) > 0 {
		fmt.Fprintf(w, "files\n")
	}
	for _, f := range res.Files {
		switch {
		case f.Err != nil:
			fmt.Fprintf(w, "  %s (rule #%d): error: %v\n", or(f.Path, f.Ref), f.Rule, f.Err)
		default:
			fmt.Fprintf(w, "  %s (rule #%d): %d reaction ID(s)\n", f.Path, f.Rule, f.Reactions)
		}
	}
	for _, o := range res.Overwritten {
		fmt.Fprintf(w, "  reaction ID %q from %s:%d was replaced by %s:%d (Salt's merge by ID: the later file wins)\n", o.ID, o.Old.File, o.Old.Line, o.New.File, o.New.Line)
	}
	for _, wa := range res.Warnings {
		fmt.Fprintf(w, "  warning: %v\n", wa)
	}
	if len(res.VerifyErrors) > 0 {
		fmt.Fprintf(w, "verify_high: failed; Salt discards every reaction of this event:\n")
		for _, e := range res.VerifyErrors {
			fmt.Fprintf(w, "  %v\n", e)
		}
	} else if len(res.Files) > 0 {
		fmt.Fprintf(w, "verify_high: ok\n")
	}
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

type namedDescriber struct {
	name string
	d    actions.Describer
}

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

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func must(v any, _ bool) any { return v }

// fromMode says which senders' events a rule reacts to.
func fromMode(r config.Rule) string {
	switch r.Options.From {
	case config.FromAny:
		return "any (forged minion events included)"
	case config.FromMaster:
		return "master (events no minion sent)"
	case config.FromMinion:
		return "minion (events a minion sent, forged ones refused)"
	}
	return "default (forged minion events refused: a tag naming another minion, or a family only the master fires)"
}

// explainSaltCalls writes each Salt call a file made while rendering and
// its answer.
func explainSaltCalls(w io.Writer, res *engine.Result) {
	if len(res.SaltCalls) == 0 {
		return
	}
	fmt.Fprintf(w, "salt calls (run on the master while rendering)\n")
	for _, f := range res.SaltCalls {
		for _, c := range f.Calls {
			args, _ := json.Marshal(c.Args)
			answer := ""
			if c.Err != "" {
				answer = "error: " + c.Err
			} else {
				b, _ := json.Marshal(c.Result)
				answer = string(b)
			}
			cached := ""
			if c.Cached {
				cached = ", cached"
			}
			fmt.Fprintf(w, "  %s: salt['%s'](%s) -> %s (%s%s)\n", f.Path, c.Fun, strings.Trim(string(args), "[]"), answer, c.Took.Round(time.Millisecond), cached)
		}
	}
}
