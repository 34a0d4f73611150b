package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/matchers"
)

// Explain writes, for reactord explain, what the engine did with event
// ev and why: the pre-filters, who sent it, each of rules matched or not
// (and, matched, what the daemon applies to its reactions: throttle,
// debounce, concurrency, collect, retry, guardMode's loop guard, from),
// each file rendered or its error, the reaction IDs a later file
// replaced, Salt's verify_high, and the Salt calls the files made.
func Explain(w io.Writer, ev event.Event, rules []config.Rule, res *Result, guardMode func(config.Rule) string) {
	explainRules(w, ev, rules, res, guardMode)
	explainFiles(w, res)
	explainSaltCalls(w, res)
}

// explainRules writes the pre-filters and, per rule, its id, whether it
// matched and why it did not react, and the throttle or debounce the
// daemon would apply.
func explainRules(w io.Writer, ev event.Event, rules []config.Rule, res *Result, guardMode func(config.Rule) string) {
	if res.Skipped != "" {
		fmt.Fprintf(w, "  pre-filter: skipped: %s\n", res.Skipped)
	} else {
		fmt.Fprintf(w, "  pre-filters: passed (data.user is not \"Reactor\", not a salt/reactors/manage request)\n")
	}
	switch o := OriginOf(ev.Tag, ev.Data); {
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
		if len(notes[i]) == 0 && r.Options.When != "" {
			fmt.Fprintf(w, "      when: `%s` is true\n", r.Options.When)
		}
		explainOptions(w, r)
		fmt.Fprintf(w, "      guard: %s\n", guardMode(r))
		fmt.Fprintf(w, "      from: %s\n", fromMode(r))
	}
}

// explainOptions writes what the daemon applies to a matched rule's
// reactions: throttle, debounce, concurrency, collect and retry.
func explainOptions(w io.Writer, r config.Rule) {
	o := r.Options
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
}

// explainFiles writes each file rendered or its error, the reaction IDs a
// later file replaced, warnings and Salt's verify_high.
func explainFiles(w io.Writer, res *Result) {
	if len(res.Files) > 0 {
		fmt.Fprintf(w, "files\n")
	}
	for _, f := range res.Files {
		switch {
		case f.Err != nil:
			fmt.Fprintf(w, "  %s (rule #%d): error: %v\n", cmp.Or(f.Path, f.Ref), f.Rule, f.Err)
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
func explainSaltCalls(w io.Writer, res *Result) {
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
