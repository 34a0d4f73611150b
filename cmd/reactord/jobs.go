package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/cli"
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

// resolve returns the store URL src stands for (daemon.StoreURL).
func (src *storeSource) resolve() (string, error) {
	return daemon.StoreURL(src.url, src.conf, src.dataDir)
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

// jobsListFlags defines jobs list's flags and returns the command, which
// lists archived jobs.
func jobsListFlags(fs *flag.FlagSet) cli.Func {
	since := fs.String("since", "", "only jobs since this long ago (24h) or this RFC 3339 time")
	limit := fs.Int("limit", 100, "at most this many jobs (0: all)")
	out := fs.String("out", "text", "text or json")
	src := storeFlag(fs)
	return func(ctx context.Context, _ []string, s cli.Streams) int {
		t, err := parseSince(*since)
		if err != nil {
			fmt.Fprintln(s.Stderr, err)
			return exitUsage
		}
		st, err := openStore(ctx, src)
		if err != nil {
			fmt.Fprintf(s.Stderr, "jobs: %v\n", err)
			return exitUsage
		}
		defer st.Close()
		jobs, err := st.Jobs(ctx, t, *limit)
		if err == nil {
			err = store.WriteJobs(s.Stdout, jobs, *out == "json")
		}
		return storeOutput("jobs", err, s.Stderr)
	}
}

// jobsLookupFlags defines jobs lookup's flags and returns the command,
// which prints a job's returns.
func jobsLookupFlags(fs *flag.FlagSet) cli.Func {
	out := fs.String("out", "text", "text or json")
	src := storeFlag(fs)
	return func(ctx context.Context, args []string, s cli.Streams) int {
		jid, st, code := idAndStore(ctx, fs, args, src, "need a JID", s.Stderr)
		if st == nil {
			return code
		}
		defer st.Close()
		rets, err := st.Lookup(ctx, jid)
		if err == nil {
			err = store.WriteReturns(s.Stdout, rets, *out == "json")
		}
		return storeOutput("jobs", err, s.Stderr)
	}
}

// traceFlags defines trace's flags and returns the command, which prints
// the reaction ledger of a job or an event.
func traceFlags(fs *flag.FlagSet) cli.Func {
	src := storeFlag(fs)
	return func(ctx context.Context, args []string, s cli.Streams) int {
		id, st, code := idAndStore(ctx, fs, args, src, "need a JID or an event id", s.Stderr)
		if st == nil {
			return code
		}
		defer st.Close()
		entries, err := st.Trace(ctx, id)
		if err == nil && len(entries) == 0 {
			err = fmt.Errorf("nothing recorded for %s", id)
		}
		if err == nil {
			err = store.WriteTrace(s.Stdout, entries)
		}
		return storeOutput("trace", err, s.Stderr)
	}
}

// storeOutput is the exit code of a command that read the store and
// printed what it found: exitFound, the error printed, when err is not
// nil.
func storeOutput(name string, err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFound
	}
	return exitOK
}

// idAndStore takes the one argument, an id, and opens the store; a nil
// store means the command ends with code.
func idAndStore(ctx context.Context, fs *flag.FlagSet, args []string, src *storeSource, missing string, stderr io.Writer) (string, store.Store, int) {
	if len(args) != 1 || args[0] == "" {
		return "", nil, cli.UsageError(fs, missing)
	}
	st, err := openStore(ctx, src)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return "", nil, exitUsage
	}
	return args[0], st, exitOK
}

// cmdStoredEvents prints archived events (reactord events --since).
func cmdStoredEvents(ctx context.Context, src *storeSource, since, glob string, limit int, format event.Formatter, stdout, stderr io.Writer) int {
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
