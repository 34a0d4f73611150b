package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/shadow"
	"github.com/reactord/reactord/store"
)

// shadowReportCmd is reactord shadow report: its flags' values.
type shadowReportCmd struct {
	fs                      *flag.FlagSet
	since, until, rule, out string
	limit                   int
	src                     *storeSource
}

// shadowReportFlags defines shadow report's flags and returns the command.
func shadowReportFlags(fs *flag.FlagSet) cli.Func {
	c := &shadowReportCmd{fs: fs}
	fs.StringVar(&c.since, "since", "", "only verdicts since this long ago (24h) or this RFC 3339 time (default: every one kept)")
	fs.StringVar(&c.until, "until", "", "only verdicts before this long ago (1h) or this RFC 3339 time (default: no end)")
	fs.StringVar(&c.rule, "rule", "", "only the verdicts of this rule: its tag glob as the configuration writes it, compared as it is")
	fs.StringVar(&c.out, "out", "table", "table or json")
	fs.IntVar(&c.limit, "limit", 50, "list at most this many disagreements, the latest (0: all); the counts cover every verdict")
	c.src = storeFlag(fs)
	return c.run
}

// run sums up what shadow mode wrote to the audit store (shadow.Report).
func (c *shadowReportCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	stderr := s.Stderr
	if len(args) > 0 {
		return cli.UsageError(c.fs, fmt.Sprintf("unexpected argument %q", args[0]))
	}
	if c.out != "table" && c.out != "json" {
		return cli.UsageError(c.fs, fmt.Sprintf("--out %q: want table or json", c.out))
	}
	from, err := parseWhen("--since", c.since)
	var to time.Time
	if err == nil {
		to, err = parseWhen("--until", c.until)
	}
	if err == nil && !from.IsZero() && !to.IsZero() && !to.After(from) {
		err = fmt.Errorf("--until (%s) is not after --since (%s)", to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	}
	if err != nil {
		fmt.Fprintf(stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	return c.report(ctx, from, to, s)
}

// report reads the verdicts between from and to and prints their report.
func (c *shadowReportCmd) report(ctx context.Context, from, to time.Time, s cli.Streams) int {
	st, err := openStore(ctx, c.src)
	if err != nil {
		fmt.Fprintf(s.Stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	defer st.Close()
	entries, err := st.Ledger(ctx, store.LedgerQuery{Stage: store.StageShadow, Since: from, Until: to, Rule: c.rule})
	if err != nil {
		fmt.Fprintf(s.Stderr, "shadow report: %v\n", err)
		return exitUsage
	}
	stored := make([]shadow.Stored, len(entries))
	for i, e := range entries {
		stored[i] = shadow.Stored{Time: e.Time, Rule: e.Rule, File: e.File, ReactionID: e.ReactionID,
			EventID: e.EventID, Tag: e.Tag, JID: e.JID, Minion: e.Minion, Detail: e.Detail}
	}
	rep := shadow.NewReport(stored, from, to, c.rule, c.limit)
	if rep.Unread > 0 {
		fmt.Fprintf(s.Stderr, "shadow report: %s whose detail is not a shadow record, counted as %q (the first: %s)\n",
			ledgerEntries(rep.Unread), shadow.Unreadable, rep.FirstUnread)
	}
	var b bytes.Buffer
	if c.out == "json" {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(s.Stderr, "shadow report: writing JSON: %v\n", err)
			return exitFound
		}
	} else {
		rep.WriteTable(&b)
	}
	if _, err := s.Stdout.Write(b.Bytes()); err != nil {
		fmt.Fprintf(s.Stderr, "shadow report: %v\n", err)
		return exitFound
	}
	return exitOK
}

// ledgerEntries is "1 ledger entry" or "n ledger entries".
func ledgerEntries(n int) string {
	if n == 1 {
		return "1 ledger entry"
	}
	return fmt.Sprintf("%d ledger entries", n)
}
