package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// storeSource is how a command that reads the audit store (jobs, trace,
// events --since, shadow report) finds it, as the daemon does: --store, else
// --store-file, else $REACTORD_STORE, else the store (or store_file) of the
// reactord: section of -c CONF, else sqlite under --data-dir, else under
// the configuration's data_dir, else under the default data directory.
type storeSource struct {
	url     string
	conf    string
	dataDir string
}

// storeFlag adds --store, --store-file (a file holding the URL, read when
// the flag is parsed; --store wins), -c and --data-dir.
func storeFlag(fs *flag.FlagSet) *storeSource {
	src := &storeSource{}
	fs.StringVar(&src.url, "store", "", "audit store URL (default: $"+daemon.EnvName("store")+", else the -c CONF's store, else sqlite under --data-dir, as the daemon)")
	fs.Func("store-file", "file holding the audit store URL, so its password stays out of ps", func(path string) error {
		if src.url != "" {
			return nil
		}
		s, err := daemon.ReadSecretFile(path)
		if err == nil {
			src.url = s
		}
		return err
	})
	fs.StringVar(&src.conf, "c", "", "the daemon's reactor configuration: use the store (store, store_file) and data_dir of its reactord: section")
	fs.StringVar(&src.dataDir, "data-dir", "", "the daemon's --data-dir: use the sqlite store under it (default: the configuration's data_dir, else the user cache directory's reactord folder)")
	return src
}

// resolve returns the store URL src stands for.
func (src *storeSource) resolve() (string, error) {
	if src.url != "" {
		return src.url, nil
	}
	if u := os.Getenv(daemon.EnvName("store")); u != "" {
		return u, nil
	}
	dir := src.dataDir
	if src.conf != "" {
		cfg, err := config.Load(src.conf)
		if err != nil {
			return "", fmt.Errorf("-c %s: %w", src.conf, err)
		}
		if u, err := settingsStore(cfg.Settings); err != nil || u != "" {
			return u, err
		}
		if dir == "" {
			dir = cfg.Settings.DataDir
		}
	}
	if dir == "" {
		dir = natsbus.DefaultDataDir()
	}
	return "sqlite://" + filepath.Join(dir, "reactord.db"), nil
}

// settingsStore is the store URL of the reactord: section: store, or the
// content of store_file; "" when neither is set.
func settingsStore(s config.Settings) (string, error) {
	if s.Store != "" || s.StoreFile == "" {
		return s.Store, nil
	}
	u, err := daemon.ReadSecretFile(s.StoreFile)
	if err != nil {
		return "", fmt.Errorf("reactord.store_file: %w", err)
	}
	return u, nil
}

// openStore opens the store src stands for. A SQLite store that does not
// exist is an error naming where it looked, not a new empty database
// that answers "nothing recorded" (the commands only read).
func openStore(ctx context.Context, src *storeSource) (store.Store, error) {
	url, err := src.resolve()
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(url, "sqlite://"); ok {
		path, _, _ := strings.Cut(rest, "?")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no audit store at %s: give the daemon's --data-dir (or -c CONF, or --store URL)", path)
		}
	}
	return sqlstore.Open(ctx, url)
}

// parseSince takes a duration back from now (1h) or an RFC 3339 time.
func parseSince(s string) (time.Time, error) { return parseWhen("--since", s) }

// parseWhen reads the value s of the time flag name (--since, --until): a
// duration back from now (1h) or an RFC 3339 time; "" is the zero time.
func parseWhen(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want a duration (24h) or an RFC 3339 time", name, s)
	}
	return t, nil
}

func cmdJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (cli.IsHelpArg(args[0]) || args[0] == "help") {
		// The help of both subcommands, with their flags, on stdout.
		fmt.Fprint(stdout, "reactord jobs: the job cache the daemon archives, read like salt-run jobs.*\n\n")
		cmdJobs(ctx, []string{"list", "--help"}, stdout, stderr)
		fmt.Fprintln(stdout)
		return cmdJobs(ctx, []string{"lookup", "--help"}, stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "lookup") {
		fmt.Fprintln(stderr, "usage: reactord jobs list [--since DUR|TIME] [--store URL | -c CONF | --data-dir DIR] | reactord jobs lookup JID [--out json] [--store URL | -c CONF | --data-dir DIR]")
		fmt.Fprintln(stderr, "(reactord jobs --help for their flags)")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	if sub == "list" {
		fs := newFlags("jobs list", "reactord jobs list [--since DUR|TIME] [--limit N] [--store URL | -c CONF | --data-dir DIR]",
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
		st, err := openStore(ctx, url)
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
	fs := newFlags("jobs lookup", "reactord jobs lookup JID [--out json] [--store URL | -c CONF | --data-dir DIR]",
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
	fs := newFlags("trace", "reactord trace JID|EVENT-ID [--store URL | -c CONF | --data-dir DIR]",
		"Prints the reaction ledger of one job or event: what happened to its reactions (suppressions and why, files that failed, dispatches with their rule and jid, failures), the returns of the jobs it started and the minions that did not return in time.", stderr)
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
func idAndStore(ctx context.Context, fs *flag.FlagSet, args []string, src *storeSource, missing string, stdout, stderr io.Writer) (string, store.Store, int) {
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
	st, err := openStore(ctx, src)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return "", nil, exitUsage
	}
	return id, st, exitOK
}

// cmdStoredEvents prints archived events (reactord events --since).
func cmdStoredEvents(ctx context.Context, src *storeSource, since, glob string, limit int, format eventFormatter, stdout, stderr io.Writer) int {
	t, err := parseSince(since)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	st, err := openStore(ctx, src)
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
		line, err := format(event.Event{Tag: evs[i].Tag, Data: data}, evs[i].ID)
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
