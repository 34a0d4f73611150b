package daemon

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/syncbuf"
)

// referenceRow is one row of docs/configuration.md's table of settings.
type referenceRow struct{ def, meaning string }

// referenceRows reads the settings table of the configuration reference,
// by flag name.
func referenceRows(t *testing.T, path string) map[string]referenceRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `-([a-z-]+)` \\| [^|]* \\| `[A-Z_]+` \\| `([^`]*)` \\| (.*) \\|$")
	rows := map[string]referenceRow{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows[m[1]] = referenceRow{def: m[2], meaning: strings.ReplaceAll(m[3], `\|`, "|")}
		}
	}
	if len(rows) < 50 {
		t.Fatalf("%s: %d settings rows read; the table's form changed?", path, len(rows))
	}
	return rows
}

// statesDefault finds a meaning that says a default itself (the default
// column is the only place for it).
var statesDefault = regexp.MustCompile(`(?i)\bdefaults?\b`)

// TestReferenceShowsEffectiveDefaults: the default column of
// docs/configuration.md is what a daemon given no flag, no variable and no
// reactord: key really uses, as its parts got it; no meaning states a
// default of its own; a default decided at start shows as auto and its
// meaning says what auto is.
func TestReferenceShowsEffectiveDefaults(t *testing.T) {
	rows := referenceRows(t, "../docs/configuration.md")
	for name, r := range rows {
		if m := statesDefault.FindString(r.meaning); m != "" {
			t.Errorf("-%s: the meaning states a default (%q) besides the default column %q: %s", name, m, r.def, r.meaning)
		}
		if (r.def == Auto) != strings.Contains(r.meaning, "("+Auto+": ") {
			t.Errorf("-%s: default %q, meaning %q: an auto default, and only it, says (auto: what it is)", name, r.def, r.meaning)
		}
	}

	// A daemon given nothing: the merge with no command line, environment
	// or file, then the settings a test must give (an address and a
	// directory of its own, a configuration).
	o := Defaults()
	fs := flag.NewFlagSet("reactord", flag.ContinueOnError)
	o.Flags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(&o, fs, config.Settings{}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	given := map[string]string{"c": exampleConf, "listen": "127.0.0.1:-1", "data-dir": t.TempDir()}
	for name, v := range given {
		if err := fs.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	o.Stderr = &syncbuf.Buffer{}
	d, _ := runDaemon(t, o)

	// What the parts use, where a part can say; the other settings reach
	// their part as the daemon settled them (d.opts).
	used := map[string]string{}
	after := d.opts
	settled := flag.NewFlagSet("settled", flag.ContinueOnError)
	after.Flags(settled)
	settled.VisitAll(func(f *flag.Flag) { used[f.Name] = f.DefValue })
	used["settle"] = d.guard.Settle().String()
	used["job-timeout"] = d.guard.JobTimeout().String()
	used["driver"] = d.drv.Name()
	used["shared-state"] = strconv.FormatBool(d.SharedState())
	used["log-level"], used["log-format"] = logLevelOf(d.log), logFormatOf(d.log)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := d.conn.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	used["dedupe-window"] = stream.CachedInfo().Config.Duplicates.String()
	cons, err := stream.Consumer(ctx, "reactord")
	if err != nil {
		t.Fatal(err)
	}
	used["ack-wait"] = cons.CachedInfo().Config.AckWait.String()
	used["max-payload"] = strconv.Itoa(d.conn.MaxPayload())
	// The auto settings this daemon settles (the others belong to drivers
	// it does not run).
	used["jetstream"] = strconv.FormatBool(d.JetStream())
	used["stream-replicas"] = strconv.Itoa(stream.CachedInfo().Config.Replicas)
	if used["store"], err = d.storeURL(); err != nil {
		t.Fatal(err)
	}
	autoSettled := []string{"workers", "jetstream", "stream-replicas", "store"}

	for name, r := range rows {
		switch {
		case given[name] != "" || name == "master-id": // the test's own; the docs show HOST_master
		case r.def == Auto:
			// Decided at start: settled to a value of its own.
			if u := used[name]; slices.Contains(autoSettled, name) && (u == Auto || u == "" || u == "0") {
				t.Errorf("-%s: not settled at the start: %q", name, u)
			}
		case used[name] != strings.ReplaceAll(r.def, "—", ""):
			t.Errorf("-%s: docs/configuration.md says the default is %q, the daemon uses %q", name, r.def, used[name])
		}
	}
	for name := range used {
		if _, ok := rows[name]; !ok {
			t.Errorf("-%s: not in docs/configuration.md", name)
		}
	}
}

// logLevelOf names the least severe level l logs, in Salt's names.
func logLevelOf(l *slog.Logger) string {
	ctx := context.Background()
	for _, lv := range []struct {
		level slog.Level
		name  string
	}{{slog.LevelDebug, "debug"}, {slog.LevelInfo, "info"}, {slog.LevelWarn, "warning"}, {slog.LevelError, "error"}} {
		if l.Enabled(ctx, lv.level) {
			return lv.name
		}
	}
	return "quiet"
}

// logFormatOf names the format of l's lines.
func logFormatOf(l *slog.Logger) string {
	switch l.Handler().(type) {
	case *slog.TextHandler:
		return "text"
	case *slog.JSONHandler:
		return "json"
	}
	return "?"
}

// TestFileBeatsDefaults: a reactord: key beats a default that is not the
// zero value (Merge asks the command line what it gave, never compares
// with a zero), and the command line beats the key.
func TestFileBeatsDefaults(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "master")
	if err := os.WriteFile(filepath.Join(dir, "a.sls"), []byte("a:\n  local.test.ping:\n    - tgt: '*'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(`reactord:
  settle: 5s
  job_timeout: 1m
  max_hops: 7
  keep_jobs: 1h
  log_level: warning
  log_format: json
  driver: exec
  workers: 3
  queue: 5
  renderer: jinja
  ack_wait: 3s
reactor:
  - 'salt/minion/*/start':
    - `+filepath.Join(dir, "a.sls")+`
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	fs := flag.NewFlagSet("reactord", flag.ContinueOnError)
	o.Flags(fs)
	if err := fs.Parse([]string{"-c", conf, "--queue", "9"}); err != nil {
		t.Fatal(err)
	}
	src, err := Load(&o, fs, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"settle": o.Settle, "job-timeout": o.JobTimeout, "max-hops": o.MaxHops, "keep-jobs": o.KeepJobs, "log-level": o.LogLevel,
		"log-format": o.LogFormat, "driver": o.Driver, "workers": o.Workers, "renderer": string(o.Renderer), "ack-wait": o.AckWait, "queue": o.Queue}
	want := map[string]any{"settle": 5 * time.Second, "job-timeout": time.Minute, "max-hops": 7, "keep-jobs": time.Hour, "log-level": "warn",
		"log-format": "json", "driver": "exec", "workers": 3, "renderer": "jinja", "ack-wait": 3 * time.Second, "queue": 9}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("--%s = %v, want %v (from %s)", k, got[k], w, src[k])
		}
		wantSrc := FromFile
		if k == "queue" {
			wantSrc = FromFlag
		}
		if src[k] != wantSrc {
			t.Errorf("--%s came from %s, want %s", k, src[k], wantSrc)
		}
	}
}

// TestSectionRendererWithoutFlag: with no --renderer (the default, auto),
// the reactord: section's renderer is the one used, also when the caller
// gives New a path it did not merge: a section's gotmpl refuses a Jinja
// file that Salt's way (auto) would load.
func TestSectionRendererWithoutFlag(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	for p, s := range map[string]string{
		conf:                        "reactord:\n  renderer: gotmpl\nreactor:\n  - 'myco/*': " + filepath.Join(dir, "j.sls") + "\n",
		filepath.Join(dir, "j.sls"): "r:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions(t)
	o.Config = conf
	if _, err := New(context.Background(), o); !errors.Is(err, ErrConfig) {
		t.Fatalf("New: %v, want the Jinja file refused as a Go template (the section's renderer)", err)
	}
}
