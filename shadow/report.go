package shadow

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Unreadable is the verdict a report counts a stored entry under when
// its detail is not a Record.
const Unreadable = "unreadable"

// Stored is one verdict as the audit store keeps it (a ledger entry of
// stage shadow): the entry's columns, and the Record, as JSON, in its
// detail.
type Stored struct {
	Time       time.Time
	Rule       string
	File       string
	ReactionID string
	EventID    string
	Tag        string
	JID        string
	Minion     string
	Detail     string
}

// Report sums up stored verdicts (reactord shadow report): counted
// by verdict and by rule, and the latest disagreements. As JSON, the
// object shadow report --out json writes.
type Report struct {
	// Since and Until are the span read (nil: unbounded).
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// Total is the number of entries read; Verdicts counts them by
	// verdict, Rules by rule and verdict.
	Total    int         `json:"total"`
	Verdicts Counts      `json:"verdicts"`
	Rules    []RuleCount `json:"rules"`
	// Disagreements are the latest entries whose verdict is not agree
	// (nor unreadable), newest first.
	Disagreements []Disagreement `json:"disagreements"`

	// Unread is the number of entries whose detail did not decode;
	// FirstUnread says which was the first, and why.
	Unread      int    `json:"-"`
	FirstUnread string `json:"-"`

	// rule is the rule the entries were read for ("" for all).
	rule string
	// others is the number of entries whose verdict is not agree (nor
	// unreadable), listed or not.
	others int
}

// RuleCount is one rule's row of the report.
type RuleCount struct {
	// Rule is the rule's tag glob, "" for the entries of no rule (Salt
	// jobs no decision of reactord's accounts for).
	Rule     string `json:"rule"`
	Verdicts Counts `json:"verdicts"`
	Total    int    `json:"total"`
}

// Disagreement is one verdict other than agree: the ledger entry's
// columns and its record's fields.
type Disagreement struct {
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

// Counts counts entries by verdict.
type Counts map[string]int

// MarshalJSON writes the counts as one object, in the order of
// countOrder.
func (c Counts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, v := range countOrder(c) {
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

// countOrder returns the verdicts counted in c: those of
// Verdicts in its order, then any other (of a later version) in
// alphabetical order, then unreadable.
func countOrder(c Counts) []string {
	var out, other []string
	for _, v := range Verdicts {
		if c[v] > 0 {
			out = append(out, v)
		}
	}
	for v, n := range c {
		if n > 0 && v != Unreadable && !slices.Contains(Verdicts, v) {
			other = append(other, v)
		}
	}
	slices.Sort(other)
	out = append(out, other...)
	if c[Unreadable] > 0 {
		out = append(out, Unreadable)
	}
	return out
}

// readRecord decodes the detail of a shadow ledger entry.
func readRecord(detail string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(detail), &r); err != nil {
		return r, err
	}
	if r.Verdict == "" {
		return r, errors.New("no verdict")
	}
	return r, nil
}

// NewReport counts entries (read oldest first, between since and
// until, of rule or of every rule when it is "") and lists the latest
// limit of those whose verdict is not agree (all when limit is 0 or
// less).
func NewReport(entries []Stored, since, until time.Time, rule string, limit int) *Report {
	rep := &Report{rule: rule, Total: len(entries), Verdicts: Counts{}, Rules: []RuleCount{}, Disagreements: []Disagreement{}}
	if !since.IsZero() {
		t := since.UTC()
		rep.Since = &t
	}
	if !until.IsZero() {
		t := until.UTC()
		rep.Until = &t
	}
	byRule := map[string]Counts{}
	records := make([]Record, len(entries))
	for i, e := range entries {
		r, err := readRecord(e.Detail)
		if err != nil {
			if rep.Unread == 0 {
				rep.FirstUnread = fmt.Sprintf("at %s, %s: %v", e.Time.UTC().Format(time.RFC3339Nano), entryName(e), err)
			}
			rep.Unread++
			r = Record{Verdict: Unreadable}
		}
		records[i] = r
		rep.Verdicts[r.Verdict]++
		if byRule[e.Rule] == nil {
			byRule[e.Rule] = Counts{}
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
		rep.Rules = append(rep.Rules, RuleCount{Rule: r, Verdicts: byRule[r], Total: total})
	}
	for i := len(entries) - 1; i >= 0; i-- {
		r := records[i]
		if r.Verdict == Agree || r.Verdict == Unreadable {
			continue
		}
		rep.others++
		if limit > 0 && len(rep.Disagreements) >= limit {
			continue
		}
		rep.Disagreements = append(rep.Disagreements, newDisagreement(entries[i], r))
	}
	return rep
}

// entryName names a ledger entry in a message: its event id, else its
// tag.
func entryName(e Stored) string {
	switch {
	case e.EventID != "":
		return "event " + e.EventID
	case e.Tag != "":
		return "tag " + e.Tag
	}
	return "an entry with no event id or tag"
}

// newDisagreement is entry e, whose detail is r.
func newDisagreement(e Stored, r Record) Disagreement {
	d := Disagreement{
		Time: e.Time.UTC(), Verdict: r.Verdict, Rule: e.Rule, File: e.File, ReactionID: e.ReactionID,
		EventID: e.EventID, Tag: e.Tag, JID: e.JID, Minion: e.Minion,
		Reason: r.Reason, EventStamp: r.EventStamp, Chunk: r.Chunk,
	}
	if j := r.Salt; j != nil {
		// Salt's job as stored: decoding it into a Job made its
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
func (rep *Report) WriteTable(w io.Writer) {
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
		of = " of rule " + tableCell(rep.rule)
	}
	fmt.Fprintf(tw, "shadow verdicts%s from %s until %s: %s read\n", of, from, to, plural(rep.Total, "entry", "entries"))
	if rep.Total == 0 {
		fmt.Fprintln(tw, "nothing recorded: shadow mode (reactord shadow) writes one entry per verdict")
		return
	}

	fmt.Fprintln(tw)
	verdicts := countOrder(rep.Verdicts)
	fmt.Fprintf(tw, "rule\t%s\ttotal\n", strings.Join(verdicts, "\t"))
	for _, r := range rep.Rules {
		name := tableCell(r.Rule)
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
		fmt.Fprintf(tw, "%s, newest first:\n", plural(rep.others, "disagreement", "disagreements"))
	}
	fmt.Fprintln(tw, "time\tverdict\trule\tevent\tsalt job\treason")
	for _, d := range rep.Disagreements {
		ev := tableCell(d.Tag)
		if d.EventID != "" {
			ev += " (" + tableCell(d.EventID) + ")"
		}
		job := strings.TrimSpace(d.JID + " " + d.fun)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Time.Format(time.RFC3339), tableCell(d.Verdict), tableCell(d.Rule), ev, tableCell(job), tableCell(d.Reason))
	}
}

// summary says the counts in words, one line per verdict that occurs.
func (rep *Report) summary() []string {
	c := rep.Verdicts
	decisions := rep.Total - c[Unreadable]
	var lines []string
	if decisions > 0 {
		lines = append(lines, fmt.Sprintf("agree %d of %s (%.1f%%)", c[Agree], plural(decisions, "decision", "decisions"), 100*float64(c[Agree])/float64(decisions)))
		held := 0
		for v, n := range c {
			if Expected(v) {
				held += n
			}
		}
		if others := decisions - c[Agree]; held > 0 {
			lines = append(lines, fmt.Sprintf("%d of the %d others are reactord's own gates at work (held-*): differences on purpose", held, others))
		}
	}
	for _, v := range countOrder(c) {
		n := c[v]
		var line string
		switch v {
		case Agree:
			continue
		case Differ:
			line = fmt.Sprintf("%s where Salt's reactor ran the same function with other arguments or another target (differ)", plural(n, "decision", "decisions"))
		case ReactordOnly:
			line = fmt.Sprintf("reactord would have run %s Salt's reactor did not (reactord-only)", plural(n, "reaction", "reactions"))
		case SaltOnly:
			line = fmt.Sprintf("Salt's reactor ran %s reactord would not have (salt-only)", plural(n, "job", "jobs"))
		case Ambiguous:
			line = fmt.Sprintf("%d ambiguous: local jobs of the master's user no reactord decision accounts for", n)
		case HeldLoop:
			line = fmt.Sprintf("reactord would have stopped %s (held-loop)", plural(n, "loop reaction", "loop reactions"))
		case HeldHops:
			line = fmt.Sprintf("reactord would have stopped %s at the hop limit (held-hops)", plural(n, "reaction", "reactions"))
		case HeldForged:
			line = fmt.Sprintf("%s refused (held-forged)", plural(n, "forged event", "forged events"))
		case HeldThrottle:
			line = fmt.Sprintf("reactord would have throttled %s (held-throttle)", plural(n, "reaction", "reactions"))
		case HeldDebounce:
			line = fmt.Sprintf("reactord would have debounced %s (held-debounce)", plural(n, "reaction", "reactions"))
		case HeldCollect:
			line = fmt.Sprintf("reactord would have collected %s into fewer runs (held-collect)", plural(n, "reaction", "reactions"))
		case Unreadable:
			line = fmt.Sprintf("%s whose detail is not a shadow record (unreadable)", plural(n, "entry", "entries"))
		default:
			line = fmt.Sprintf("%d %s (a verdict this version does not know)", n, tableCell(v))
		}
		lines = append(lines, line)
	}
	return lines
}

// plural is "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// tableCell is s fit for one cell of a table: on one line, without tabs, "-"
// when empty.
func tableCell(s string) string {
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
