package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
)

// verdictUnreadable is the verdict shadow report counts a ledger entry
// under when its detail is not a shadow.Record.
const verdictUnreadable = "unreadable"

// cmdShadowReport sums up the verdicts shadow mode wrote to the audit
// store (reactord shadow report).
func cmdShadowReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("shadow report",
		"reactord shadow report [--since DUR|TIME] [--until DUR|TIME] [--rule GLOB] [--out table|json] [--limit N] [--store URL | -c CONF | --data-dir DIR]",
		`Sums up what shadow mode (reactord shadow) wrote to the audit store: the
verdict of each of reactord's decisions against the jobs Salt's reactor
started, counted by rule and in words, and the latest verdicts other than
agree with their reasons. Exit 0, or 2 on bad usage or when the store
cannot be read.`, stderr)
	since := fs.String("since", "", "only verdicts since this long ago (24h) or this RFC 3339 time (default: every one kept)")
	until := fs.String("until", "", "only verdicts before this long ago (1h) or this RFC 3339 time (default: no end)")
	rule := fs.String("rule", "", "only the verdicts of this rule: its tag glob as the configuration writes it, compared as it is")
	out := fs.String("out", "table", "table or json")
	limit := fs.Int("limit", 50, "list at most this many disagreements, the latest (0: all); the counts cover every verdict")
	src := storeFlag(fs)
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shadow report: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *out != "table" && *out != "json" {
		fmt.Fprintf(stderr, "shadow report: --out %q: want table or json\n", *out)
		return exitUsage
	}
	from, err := parseWhen("--since", *since)
	if err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	to, err := parseWhen("--until", *until)
	if err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		fmt.Fprintf(stderr, "shadow report: --until (%s) is not after --since (%s)\n", to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
		return exitUsage
	}
	st, err := openStore(ctx, src)
	if err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	defer st.Close()
	entries, err := st.Ledger(ctx, store.LedgerQuery{Stage: store.StageShadow, Since: from, Until: to, Rule: *rule})
	if err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	rep := newShadowReport(entries, from, to, *limit)
	rep.rule = *rule
	if rep.unreadable > 0 {
		fmt.Fprintf(stderr, "shadow report: %s whose detail is not a shadow record, counted as %q (the first: %s)\n",
			count(rep.unreadable, "ledger entry", "ledger entries"), verdictUnreadable, rep.firstUnreadable)
	}
	var b bytes.Buffer
	if *out == "json" {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "shadow report: writing JSON: %v\n", err)
			return exitFound
		}
	} else {
		rep.writeTable(&b)
	}
	if _, err := stdout.Write(b.Bytes()); err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitFound
	}
	return exitOK
}

// shadowReport is what shadow report prints; as JSON, the object --out
// json writes.
type shadowReport struct {
	// Since and Until are the span read (nil: unbounded).
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// Total is the number of entries read; Verdicts counts them by
	// verdict, Rules by rule and verdict.
	Total    int               `json:"total"`
	Verdicts verdictCounts     `json:"verdicts"`
	Rules    []shadowRuleCount `json:"rules"`
	// Disagreements are the latest entries whose verdict is not agree
	// (nor unreadable), newest first.
	Disagreements []shadowDisagreement `json:"disagreements"`

	// rule is the --rule the entries were read with ("" for all).
	rule string
	// others is the number of entries whose verdict is not agree (nor
	// unreadable), listed or not.
	others int
	// unreadable is the number of entries whose detail did not decode;
	// firstUnreadable says which was the first, and why.
	unreadable      int
	firstUnreadable string
}

// shadowRuleCount is one rule's row of the report.
type shadowRuleCount struct {
	// Rule is the rule's tag glob, "" for the entries of no rule (Salt
	// jobs no decision of reactord's accounts for).
	Rule     string        `json:"rule"`
	Verdicts verdictCounts `json:"verdicts"`
	Total    int           `json:"total"`
}

// shadowDisagreement is one verdict other than agree: the ledger entry's
// columns and its record's fields.
type shadowDisagreement struct {
	Time       time.Time `json:"time"`
	Verdict    string    `json:"verdict"`
	Rule       string    `json:"rule"`
	File       string    `json:"file"`
	ReactionID string    `json:"reaction_id"`
	EventID    string    `json:"event_id"`
	Tag        string    `json:"tag"`
	JID        string    `json:"jid"`
	Minion     string    `json:"minion"`
	Reason     string    `json:"reason"`
	EventStamp string    `json:"event_stamp"`
	// Chunk and Salt are as the record holds them (null when absent):
	// Salt's job keeps its arguments' numbers as they were written.
	Chunk json.RawMessage `json:"chunk"`
	Salt  json.RawMessage `json:"salt"`

	// fun is Salt's job's function as its job event names it
	// (runner.state.orchestrate), "" when Salt ran nothing.
	fun string
}

// verdictCounts counts entries by verdict.
type verdictCounts map[string]int

// MarshalJSON writes the counts as one object, in the order of
// verdictOrder.
func (c verdictCounts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, v := range verdictOrder(c) {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = append(b, k...)
		b = fmt.Appendf(b, ":%d", c[v])
	}
	return append(b, '}'), nil
}

// verdictOrder returns the verdicts counted in c: those of
// shadow.Verdicts in its order, then any other (of a later version) in
// alphabetical order, then unreadable.
func verdictOrder(c verdictCounts) []string {
	var out, other []string
	for _, v := range shadow.Verdicts {
		if c[v] > 0 {
			out = append(out, v)
		}
	}
	for v, n := range c {
		if n > 0 && v != verdictUnreadable && !slices.Contains(shadow.Verdicts, v) {
			other = append(other, v)
		}
	}
	slices.Sort(other)
	out = append(out, other...)
	if c[verdictUnreadable] > 0 {
		out = append(out, verdictUnreadable)
	}
	return out
}

// readShadowRecord decodes the detail of a shadow ledger entry.
func readShadowRecord(detail string) (shadow.Record, error) {
	var r shadow.Record
	if err := json.Unmarshal([]byte(detail), &r); err != nil {
		return r, err
	}
	if r.Verdict == "" {
		return r, errors.New("no verdict")
	}
	return r, nil
}

// newShadowReport counts entries (read oldest first) and lists the
// latest limit of those whose verdict is not agree (all when limit is 0
// or less).
func newShadowReport(entries []store.LedgerEntry, since, until time.Time, limit int) *shadowReport {
	rep := &shadowReport{Total: len(entries), Verdicts: verdictCounts{}, Rules: []shadowRuleCount{}, Disagreements: []shadowDisagreement{}}
	if !since.IsZero() {
		t := since.UTC()
		rep.Since = &t
	}
	if !until.IsZero() {
		t := until.UTC()
		rep.Until = &t
	}
	byRule := map[string]verdictCounts{}
	records := make([]shadow.Record, len(entries))
	for i, e := range entries {
		r, err := readShadowRecord(e.Detail)
		if err != nil {
			if rep.unreadable == 0 {
				rep.firstUnreadable = fmt.Sprintf("at %s, %s: %v", e.Time.UTC().Format(time.RFC3339Nano), entryName(e), err)
			}
			rep.unreadable++
			r = shadow.Record{Verdict: verdictUnreadable}
		}
		records[i] = r
		rep.Verdicts[r.Verdict]++
		if byRule[e.Rule] == nil {
			byRule[e.Rule] = verdictCounts{}
		}
		byRule[e.Rule][r.Verdict]++
	}
	rules := make([]string, 0, len(byRule))
	for r := range byRule {
		rules = append(rules, r)
	}
	// By name, the entries of no rule last.
	slices.SortFunc(rules, func(a, b string) int {
		if (a == "") != (b == "") {
			if a == "" {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, r := range rules {
		total := 0
		for _, n := range byRule[r] {
			total += n
		}
		rep.Rules = append(rep.Rules, shadowRuleCount{Rule: r, Verdicts: byRule[r], Total: total})
	}
	for i := len(entries) - 1; i >= 0; i-- {
		r := records[i]
		if r.Verdict == shadow.Agree || r.Verdict == verdictUnreadable {
			continue
		}
		rep.others++
		if limit > 0 && len(rep.Disagreements) >= limit {
			continue
		}
		rep.Disagreements = append(rep.Disagreements, newShadowDisagreement(entries[i], r))
	}
	return rep
}

// entryName names a ledger entry in a message: its event id, else its
// tag.
func entryName(e store.LedgerEntry) string {
	switch {
	case e.EventID != "":
		return "event " + e.EventID
	case e.Tag != "":
		return "tag " + e.Tag
	}
	return "an entry with no event id or tag"
}

// newShadowDisagreement is entry e, whose detail is r.
func newShadowDisagreement(e store.LedgerEntry, r shadow.Record) shadowDisagreement {
	d := shadowDisagreement{
		Time: e.Time.UTC(), Verdict: r.Verdict, Rule: e.Rule, File: e.File, ReactionID: e.ReactionID,
		EventID: e.EventID, Tag: e.Tag, JID: e.JID, Minion: e.Minion,
		Reason: r.Reason, EventStamp: r.EventStamp, Chunk: r.Chunk,
	}
	if j := r.Salt; j != nil {
		// Salt's job as stored: decoding it into a shadow.Job made its
		// numbers float64s.
		var raw struct {
			Salt json.RawMessage `json:"salt"`
		}
		if json.Unmarshal([]byte(e.Detail), &raw) == nil {
			d.Salt = raw.Salt
		}
		d.fun = j.Fun
		if j.Kind == "runner" || j.Kind == "wheel" {
			d.fun = j.Kind + "." + j.Fun
		}
		if d.JID == "" {
			d.JID = j.JID
		}
	}
	return d
}

// writeTable writes the report for people: the span, the counts by rule,
// the counts in words, the latest disagreements.
func (rep *shadowReport) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	from, to := "the oldest entry kept", "now"
	if rep.Since != nil {
		from = rep.Since.Format(time.RFC3339)
	}
	if rep.Until != nil {
		to = rep.Until.Format(time.RFC3339)
	}
	of := ""
	if rep.rule != "" {
		of = " of rule " + cell(rep.rule)
	}
	fmt.Fprintf(tw, "shadow verdicts%s from %s until %s: %s read\n", of, from, to, count(rep.Total, "entry", "entries"))
	if rep.Total == 0 {
		fmt.Fprintln(tw, "nothing recorded: shadow mode (reactord shadow) writes one entry per verdict")
		return
	}

	fmt.Fprintln(tw)
	verdicts := verdictOrder(rep.Verdicts)
	fmt.Fprintf(tw, "rule\t%s\ttotal\n", strings.Join(verdicts, "\t"))
	for _, r := range rep.Rules {
		name := cell(r.Rule)
		if r.Rule == "" {
			name = "(no rule)"
		}
		fmt.Fprint(tw, name)
		for _, v := range verdicts {
			fmt.Fprintf(tw, "\t%d", r.Verdicts[v])
		}
		fmt.Fprintf(tw, "\t%d\n", r.Total)
	}

	fmt.Fprintln(tw)
	for _, line := range rep.summary() {
		fmt.Fprintln(tw, line)
	}

	fmt.Fprintln(tw)
	switch {
	case rep.others == 0:
		fmt.Fprintln(tw, "no disagreements")
		return
	case len(rep.Disagreements) < rep.others:
		fmt.Fprintf(tw, "the latest %d of %d disagreements, newest first (--limit 0 lists them all):\n", len(rep.Disagreements), rep.others)
	default:
		fmt.Fprintf(tw, "%s, newest first:\n", count(rep.others, "disagreement", "disagreements"))
	}
	fmt.Fprintln(tw, "time\tverdict\trule\tevent\tsalt job\treason")
	for _, d := range rep.Disagreements {
		ev := cell(d.Tag)
		if d.EventID != "" {
			ev += " (" + cell(d.EventID) + ")"
		}
		job := strings.TrimSpace(d.JID + " " + d.fun)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Time.Format(time.RFC3339), cell(d.Verdict), cell(d.Rule), ev, cell(job), cell(d.Reason))
	}
}

// summary says the counts in words, one line per verdict that occurs.
func (rep *shadowReport) summary() []string {
	c := rep.Verdicts
	decisions := rep.Total - c[verdictUnreadable]
	var lines []string
	if decisions > 0 {
		lines = append(lines, fmt.Sprintf("agree %d of %s (%.1f%%)", c[shadow.Agree], count(decisions, "decision", "decisions"), 100*float64(c[shadow.Agree])/float64(decisions)))
		held := 0
		for v, n := range c {
			if shadow.Expected(v) {
				held += n
			}
		}
		if others := decisions - c[shadow.Agree]; held > 0 {
			lines = append(lines, fmt.Sprintf("%d of the %d others are reactord's own gates at work (held-*): differences on purpose", held, others))
		}
	}
	for _, v := range verdictOrder(c) {
		n := c[v]
		var line string
		switch v {
		case shadow.Agree:
			continue
		case shadow.Differ:
			line = fmt.Sprintf("%s where Salt's reactor ran the same function with other arguments or another target (differ)", count(n, "decision", "decisions"))
		case shadow.ReactordOnly:
			line = fmt.Sprintf("reactord would have run %s Salt's reactor did not (reactord-only)", count(n, "reaction", "reactions"))
		case shadow.SaltOnly:
			line = fmt.Sprintf("Salt's reactor ran %s reactord would not have (salt-only)", count(n, "job", "jobs"))
		case shadow.Ambiguous:
			line = fmt.Sprintf("%d ambiguous: local jobs of the master's user no reactord decision accounts for", n)
		case shadow.HeldLoop:
			line = fmt.Sprintf("reactord would have stopped %s (held-loop)", count(n, "loop reaction", "loop reactions"))
		case shadow.HeldHops:
			line = fmt.Sprintf("reactord would have stopped %s at the hop limit (held-hops)", count(n, "reaction", "reactions"))
		case shadow.HeldForged:
			line = fmt.Sprintf("%s refused (held-forged)", count(n, "forged event", "forged events"))
		case shadow.HeldThrottle:
			line = fmt.Sprintf("reactord would have throttled %s (held-throttle)", count(n, "reaction", "reactions"))
		case shadow.HeldDebounce:
			line = fmt.Sprintf("reactord would have debounced %s (held-debounce)", count(n, "reaction", "reactions"))
		case shadow.HeldCollect:
			line = fmt.Sprintf("reactord would have collected %s into fewer runs (held-collect)", count(n, "reaction", "reactions"))
		case verdictUnreadable:
			line = fmt.Sprintf("%s whose detail is not a shadow record (unreadable)", count(n, "entry", "entries"))
		default:
			line = fmt.Sprintf("%d %s (a verdict this version does not know)", n, cell(v))
		}
		lines = append(lines, line)
	}
	return lines
}

// count is "1 thing" or "n things".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// cell is s fit for one cell of a table: on one line, without tabs, "-"
// when empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r', '\v', '\f':
			return ' '
		}
		return r
	}, s)
}
