package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/store"
)

// storeFlag adds --store with the daemon's default, and --store-file, a
// file holding the URL (read when the flag is parsed; --store wins).
func storeFlag(fs *flag.FlagSet) *string {
	url := fs.String("store", "", "audit store URL (default: $"+envStore+", else sqlite under the user cache directory's reactord folder, as the daemon)")
	fs.Func("store-file", "file holding the audit store URL, so its password stays out of ps", func(path string) error {
		if *url != "" {
			return nil
		}
		s, err := readSecretFile(path)
		if err == nil {
			*url = s
		}
		return err
	})
	return url
}

func openStore(ctx context.Context, url string) (store.Store, error) {
	if url == "" {
		url = os.Getenv(envStore)
	}
	if url == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		url = "sqlite://" + filepath.Join(base, "reactord", "reactord.db")
	}
	return store.Open(ctx, url)
}

// parseSince takes a duration back from now (1h) or an RFC 3339 time.
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (24h) or an RFC 3339 time", s)
	}
	return t, nil
}

func cmdJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (isHelpArg(args[0]) || args[0] == "help") {
		// The help of both subcommands, with their flags, on stdout.
		fmt.Fprint(stdout, "reactord jobs: the job cache the daemon archives, read like salt-run jobs.*\n\n")
		cmdJobs(ctx, []string{"list", "--help"}, stdout, stderr)
		fmt.Fprintln(stdout)
		return cmdJobs(ctx, []string{"lookup", "--help"}, stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "lookup") {
		fmt.Fprintln(stderr, "usage: reactord jobs list [--since DUR|TIME] [--store URL] | reactord jobs lookup JID [--out json] [--store URL]")
		fmt.Fprintln(stderr, "(reactord jobs --help for their flags)")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	if sub == "list" {
		fs := newFlags("jobs list", "reactord jobs list [--since DUR|TIME] [--limit N] [--store URL]",
			"Lists archived jobs, newest first, with the fields of salt-run jobs.list_jobs (function, arguments, target, target type, user, start time from the jid); with --out json one object {jid: fields}, as list_jobs --out json.", stderr)
		since := fs.String("since", "", "only jobs since this long ago (24h) or this RFC 3339 time")
		limit := fs.Int("limit", 100, "at most this many jobs (0: all)")
		out := fs.String("out", "text", "text or json")
		url := storeFlag(fs)
		if ok, code := parseFlags(fs, args, stdout); !ok {
			return code
		}
		t, err := parseSince(*since)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		st, err := openStore(ctx, *url)
		if err != nil {
			fmt.Fprintf(stderr, "jobs: %v\n", err)
			return exitUsage
		}
		defer st.Close()
		jobs, err := st.Jobs(ctx, t, *limit)
		if err != nil {
			fmt.Fprintf(stderr, "jobs: %v\n", err)
			return exitFound
		}
		if *out == "json" {
			obj := make([]keyValue, len(jobs))
			for i, j := range jobs {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(j.Listing()); err != nil {
					fmt.Fprintf(stderr, "jobs: job %s: %v\n", j.JID, err)
					return exitFound
				}
				obj[i] = keyValue{j.JID, bytes.TrimSpace(b.Bytes())}
			}
			return writeObject(stdout, stderr, obj)
		}
		for _, j := range jobs {
			l := j.Listing()
			fmt.Fprintf(stdout, "%s:\n    Function: %s\n    Arguments: %s\n    Target: %s\n    Target-type: %s\n    User: %s\n",
				j.JID, plain(l.Function), plainList(l.Arguments), plain(l.Target), plain(l.TargetType), plain(l.User))
			if l.Metadata != nil {
				fmt.Fprintf(stdout, "    Metadata: %s\n", plain(l.Metadata))
			}
			fmt.Fprintf(stdout, "    StartTime: %s\n", l.StartTime)
		}
		return exitOK
	}
	fs := newFlags("jobs lookup", "reactord jobs lookup JID [--out json] [--store URL]",
		"Prints every minion's return for a job, in the order they returned, like salt-run jobs.lookup_jid; with --out json one object {minion id: return}.", stderr)
	out := fs.String("out", "text", "text or json")
	url := storeFlag(fs)
	jid, st, code := idAndStore(ctx, fs, args, url, "jobs lookup: need a JID", stdout, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	rets, err := st.Lookup(ctx, jid)
	if err != nil {
		fmt.Fprintf(stderr, "jobs: %v\n", err)
		return exitFound
	}
	if *out == "json" {
		obj := make([]keyValue, len(rets))
		for i, r := range rets {
			obj[i] = keyValue{r.MinionID, r.Return}
		}
		return writeObject(stdout, stderr, obj)
	}
	for _, r := range rets {
		var b bytes.Buffer
		if err := json.Indent(&b, orNull(r.Return), "    ", "    "); err != nil {
			b.Reset()
			b.Write(r.Return)
		}
		fmt.Fprintf(stdout, "%s:\n    %s\n", r.MinionID, b.Bytes())
	}
	return exitOK
}

// keyValue is one member of a JSON object written in order.
type keyValue struct {
	key   string
	value json.RawMessage
}

// writeObject writes members as one JSON object, in their order, indented
// by four spaces as Salt's json outputter does.
func writeObject(stdout, stderr io.Writer, members []keyValue) int {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(orNull(m.value))
	}
	b.WriteByte('}')
	var ind bytes.Buffer
	if err := json.Indent(&ind, b.Bytes(), "", "    "); err != nil {
		fmt.Fprintf(stderr, "jobs: writing JSON: %v\n", err)
		return exitFound
	}
	ind.WriteByte('\n')
	if _, err := stdout.Write(ind.Bytes()); err != nil {
		fmt.Fprintf(stderr, "jobs: %v\n", err)
		return exitFound
	}
	return exitOK
}

// orNull is raw, or null when raw is empty.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// plain shows a JSON value on one line: a string as its text, anything
// else as compact JSON.
func plain(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, orNull(raw)) != nil {
		return string(raw)
	}
	return b.String()
}

// plainList shows JSON values as a compact JSON array.
func plainList(vals []json.RawMessage) string {
	b, err := json.Marshal(vals)
	if err != nil {
		return fmt.Sprint(vals)
	}
	return string(b)
}

func cmdTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("trace", "reactord trace JID|EVENT-ID [--store URL]",
		"Prints the reaction ledger of one job or event: matched rules, rendered files, suppressions, dispatches with their jid, returns and timeouts.", stderr)
	url := storeFlag(fs)
	id, st, code := idAndStore(ctx, fs, args, url, "trace: need a JID or an event id", stdout, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	entries, err := st.Trace(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "trace: %v\n", err)
		return exitFound
	}
	if len(entries) == 0 {
		fmt.Fprintf(stderr, "trace: nothing recorded for %s\n", id)
		return exitFound
	}
	for _, e := range entries {
		var parts []string
		add := func(k, v string) {
			if v != "" {
				parts = append(parts, k+"="+v)
			}
		}
		add("event", e.EventID)
		add("tag", e.Tag)
		add("rule", e.Rule)
		add("file", e.File)
		add("reaction", e.ReactionID)
		add("jid", e.JID)
		add("minion", e.Minion)
		fmt.Fprintf(stdout, "%s %-10s %s  %s\n", e.Time.UTC().Format(time.RFC3339Nano), e.Stage, strings.Join(parts, " "), e.Detail)
	}
	return exitOK
}

// idAndStore parses "ID [flags]" or "[flags] ID" and opens the store; a
// nil store means the command ends with code.
func idAndStore(ctx context.Context, fs *flag.FlagSet, args []string, url *string, missing string, stdout, stderr io.Writer) (string, store.Store, int) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return "", nil, code
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	if id == "" {
		fmt.Fprintln(stderr, missing)
		return "", nil, exitUsage
	}
	st, err := openStore(ctx, *url)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return "", nil, exitUsage
	}
	return id, st, exitOK
}

// cmdStoredEvents prints archived events (reactord events --since).
func cmdStoredEvents(ctx context.Context, url, since, glob string, limit int, format eventFormatter, stdout, stderr io.Writer) int {
	t, err := parseSince(since)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	st, err := openStore(ctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "events: %v\n", err)
		return exitUsage
	}
	defer st.Close()
	evs, err := st.Events(ctx, t, glob, limit)
	if err != nil {
		fmt.Fprintf(stderr, "events: %v\n", err)
		return exitFound
	}
	// Oldest first, as a live stream would have shown them.
	code := exitOK
	w := bufio.NewWriter(stdout)
	for i := len(evs) - 1; i >= 0; i-- {
		data, err := event.DecodeData(evs[i].Data)
		if err != nil {
			fmt.Fprintf(stderr, "events: archived event %s (%s): %v\n", evs[i].ID, evs[i].Tag, err)
			code = exitFound
			continue
		}
		line, err := format(event.Event{Tag: evs[i].Tag, Data: data})
		if err != nil {
			fmt.Fprintf(stderr, "events: archived event %s (%s): %v\n", evs[i].ID, evs[i].Tag, err)
			code = exitFound
			continue
		}
		if _, err := w.Write(line); err != nil {
			fmt.Fprintf(stderr, "events: %v\n", err)
			return exitFound
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "events: %v\n", err)
		return exitFound
	}
	return code
}
