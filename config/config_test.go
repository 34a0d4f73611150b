package config

import (
	"log/slog"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/testfiles"
)

// write writes files into a temporary directory and returns it.
func write(t *testing.T, files map[string]string) string { return testfiles.Tree(t, files) }

func globs(c *Config) []string {
	var out []string
	for _, r := range c.Rules {
		var refs []string
		for _, s := range r.SLS {
			refs = append(refs, s.Ref)
		}
		out = append(out, r.Glob+"="+strings.Join(refs, ","))
	}
	return out
}

func TestMerging(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		load  string
		want  []string
	}{
		{
			name:  "single file, string and list values",
			files: map[string]string{"r.conf": "reactor:\n  - 'a/*': a.sls\n  - 'b/*':\n    - b1.sls\n    - b2.sls\n"},
			load:  "r.conf",
			want:  []string{"a/*=a.sls", "b/*=b1.sls,b2.sls"},
		},
		{
			name: "master.d concatenates in sorted order and drops equal entries",
			files: map[string]string{
				"master.d/20-b.conf": "reactor:\n  - 'x': one.sls\n  - 'y': two.sls\n",
				"master.d/10-a.conf": "reactor:\n  - 'x': one.sls\n  - 'z': three.sls\n",
				"master.d/notes.txt": "reactor:\n  - 'ignored': no.sls\n",
			},
			load: "master.d",
			want: []string{"x=one.sls", "z=three.sls", "y=two.sls"},
		},
		{
			name: "master.d replaces the main file's reactor",
			files: map[string]string{
				"master":             "interface: 0.0.0.0\nreactor:\n  - 'main': main.sls\n",
				"master.d/r.conf":    "reactor:\n  - 'included': inc.sls\n",
				"master.d/more.conf": "worker_threads: 5\n",
			},
			load: "master",
			want: []string{"included=inc.sls"},
		},
		{
			name: "include replaces master.d, which replaces the main file",
			files: map[string]string{
				"master":            "include: extra/*.conf\nreactor:\n  - 'main': main.sls\n",
				"master.d/b.conf":   "reactor:\n  - 'md': md.sls\n",
				"master.d/.#b.conf": "reactor:\n  - 'lock': lock.sls\n",
				"extra/x.conf":      "reactor:\n  - 'inc': inc.sls\n",
			},
			load: "master",
			want: []string{"inc=inc.sls"},
		},
		{
			name: "dotfiles in master.d are skipped",
			files: map[string]string{
				"master.d/a.conf":       "reactor:\n  - 'a': a.sls\n",
				"master.d/.hidden.conf": "reactor:\n  - 'h': h.sls\n",
			},
			load: "master.d",
			want: []string{"a=a.sls"},
		},
		{
			name:  "main file alone",
			files: map[string]string{"master": "reactor:\n  - 'main': main.sls\n"},
			load:  "master",
			want:  []string{"main=main.sls"},
		},
		{
			name: "include option",
			files: map[string]string{
				"master":         "include: extra/*.conf\n",
				"extra/r.conf":   "reactor:\n  - 'inc': inc.sls\n",
				"extra/r2.conf":  "reactor:\n  - 'inc2': inc2.sls\n",
				"unrelated.conf": "reactor:\n  - 'no': no.sls\n",
			},
			load: "master",
			want: []string{"inc=inc.sls", "inc2=inc2.sls"},
		},
		{
			name: "reactor as a file path holding the bare list",
			files: map[string]string{
				"master":      "reactor: reactor.yml\n",
				"reactor.yml": "- 'f/*': f.sls\n",
			},
			load: "master",
			want: []string{"f/*=f.sls"},
		},
		{
			name:  "empty reactor",
			files: map[string]string{"master": "reactor:\n"},
			load:  "master",
			want:  nil,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, c.files)
			cfg, err := Load(filepath.Join(dir, c.load))
			if err != nil {
				t.Fatal(err)
			}
			if got := globs(cfg); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("rules = %q, want %q", got, c.want)
			}
		})
	}
}

func TestPathResolution(t *testing.T) {
	dir := write(t, map[string]string{
		"etc/r.conf": `reactor:
  - 'a': rel/a.sls
  - 'b': /abs/b.sls
  - 'c': salt://reactor/c.sls
  - 'd': salt://reactor/d.sls?saltenv=prod
  - 'e': salt://reactor/missing.sls
file_roots:
  base:
    - ../srv/base
  prod:
    - ../srv/prod
    - ../srv/base
`,
		"srv/base/reactor/c.sls": "",
		"srv/base/reactor/d.sls": "",
		"srv/prod/reactor/x.sls": "",
	})
	cfg, err := Load(filepath.Join(dir, "etc/r.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "etc/rel/a.sls"),
		"/abs/b.sls",
		filepath.Join(dir, "srv/base/reactor/c.sls"),
		filepath.Join(dir, "srv/base/reactor/d.sls"),
		"",
	}
	for i, r := range cfg.Rules {
		if got := r.SLS[0].Pattern; got != want[i] {
			t.Errorf("rule %s: pattern %q, want %q", r.Glob, got, want[i])
		}
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "salt://reactor/missing.sls is not in file_roots") {
		t.Errorf("warnings = %v", cfg.Warnings)
	}
}

func TestRuleOptions(t *testing.T) {
	dir := write(t, map[string]string{"r.conf": `reactor:
  - 'salt/beacon/*/inotify/*':
      sls: [revert.sls]
      when: data.change == "IN_MODIFY"
      throttle: {count: 2, per: 1m, key: data.id}
      debounce: 3s
  - 'plain/*': plain.sls
`})
	cfg, err := Load(filepath.Join(dir, "r.conf"))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Rules[0].Options
	if o.When != `data.change == "IN_MODIFY"` || o.Key != "data.id" || o.ThrottleCount != 2 || o.ThrottlePer != time.Minute || o.Debounce != 3*time.Second {
		t.Fatalf("options = %+v", o)
	}
	if o.WhenPos.Line != 4 || o.WhenPos.Col != 13 {
		t.Fatalf("when position = %v", o.WhenPos)
	}
	if len(cfg.Rules[0].SLS) != 1 || cfg.Rules[1].Options != (RuleOptions{}) {
		t.Fatalf("rules = %+v", cfg.Rules)
	}
}

func TestSettings(t *testing.T) {
	dir := write(t, map[string]string{"r.conf": "reactord:\n  nats: nats://127.0.0.1:4222\n  driver: dryrun\n  data_dir: /var/lib/reactord\n  log_level: debug\n  workers: 4\n"})
	cfg, err := Load(filepath.Join(dir, "r.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{NATS: "nats://127.0.0.1:4222", Driver: "dryrun", DataDir: "/var/lib/reactord", LogLevel: "debug", Workers: 4}
	if !reflect.DeepEqual(cfg.Settings, want) {
		t.Fatalf("settings = %+v", cfg.Settings)
	}
}

// TestLogLevels: Salt's log levels are accepted and mapped to reactord's
// (issue 10 #14).
func TestLogLevels(t *testing.T) {
	cases := []struct {
		in, want string
		level    slog.Level
	}{
		{"all", "debug", slog.LevelDebug},
		{"garbage", "debug", slog.LevelDebug},
		{"trace", "debug", slog.LevelDebug},
		{"debug", "debug", slog.LevelDebug},
		{"profile", "info", slog.LevelInfo},
		{"info", "info", slog.LevelInfo},
		{"warning", "warn", slog.LevelWarn},
		{"WARNING", "warn", slog.LevelWarn},
		{"warn", "warn", slog.LevelWarn},
		{"error", "error", slog.LevelError},
		{"critical", "error", slog.LevelError},
		{"quiet", "quiet", slog.LevelError + 1000},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			dir := write(t, map[string]string{"r.conf": "reactord:\n  log_level: " + c.in + "\n"})
			cfg, err := Load(filepath.Join(dir, "r.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Settings.LogLevel != c.want || cfg.Settings.SlogLevel() != c.level {
				t.Fatalf("log_level %s: %q (%v), want %q (%v)", c.in, cfg.Settings.LogLevel, cfg.Settings.SlogLevel(), c.want, c.level)
			}
		})
	}
	if (Settings{}).SlogLevel() != slog.LevelInfo {
		t.Fatal("no log_level is not info")
	}
}

// TestErrors is one case per message: the input, the position and the text.
func TestErrors(t *testing.T) {
	cases := []struct {
		name, src   string
		line, col   int
		msg         string
		warningOnly bool
	}{
		{"reactor not a list", "reactor:\n  a: b\n", 2, 3, "reactor must be a list", false},
		{"glob not a string", "reactor:\n  - 1234: a.sls\n", 2, 5, "tag glob \"1234\" is not a string", false},
		{"two globs in one entry", "reactor:\n  - 'a': a.sls\n    'b': b.sls\n", 2, 5, "reactor entry has 2 keys", true},
		{"entry not a mapping", "reactor:\n  - a.sls\n", 2, 5, "reactor entry is not a mapping", true},
		{"value neither path nor list", "reactor:\n  - 'a': 5\n", 2, 10, "maps to neither a path nor a list", true},
		{"unknown rule option", "reactor:\n  - 'a': {sls: a.sls, x: 1}\n", 2, 23, "unknown rule option \"x\"", false},
		{"options without sls", "reactor:\n  - 'a': {when: 'true'}\n", 2, 10, "needs sls", false},
		{"bad debounce", "reactor:\n  - 'a': {sls: a.sls, debounce: soon}\n", 2, 33, "debounce must be a positive duration", false},
		{"bad concurrency", "reactor:\n  - 'a': {sls: a.sls, concurrency: 0}\n", 2, 36, "concurrency must be a positive integer", false},
		{"concurrency with debounce", "reactor:\n  - 'a': {sls: a.sls, debounce: 5s, concurrency: 2}\n", 2, 50, "concurrency and debounce do not go together", false},
		{"retry without attempts", "reactor:\n  - 'a': {sls: a.sls, retry: {backoff: 5s}}\n", 2, 30, "retry needs attempts", false},
		{"retry on what", "reactor:\n  - 'a': {sls: a.sls, retry: {attempts: 2, on: [failure]}}\n", 2, 49, "retry on \"failure\"", false},
		{"collect without within", "reactor:\n  - 'a': {sls: a.sls, collect: {quiet: 5s}}\n", 2, 32, "collect needs within", false},
		{"collect with debounce", "reactor:\n  - 'a': {sls: a.sls, debounce: 5s, collect: {within: 30s}}\n", 2, 46, "collect does not go with debounce", false},
		{"bad from", "reactor:\n  - 'a': {sls: a.sls, from: minions}\n", 2, 29, "from must be master", false},
		{"throttle without per", "reactor:\n  - 'a':\n      sls: a.sls\n      throttle: {count: 2}\n", 4, 17, "throttle needs count and per", false},
		{"bad settle", "reactord:\n  settle: 5\n", 2, 11, "settle must be a positive duration", false},
		{"path not a string", "reactor:\n  - 'a':\n    - [x]\n", 3, 7, "SLS path is not a string", true},
		{"unknown setting", "reactord:\n  workerz: 2\n", 2, 3, "unknown reactord setting \"workerz\"", false},
		{"bad log level", "reactord:\n  log_level: loud\n", 2, 14, "log_level must be one of all, garbage, trace, debug, profile, info, warning, error, critical, quiet (Salt's levels; warn is warning), not \"loud\"", false},
		{"bad workers", "reactord:\n  workers: -1\n", 2, 12, "workers must be a positive integer", false},
		{"unknown driver", "reactord:\n  driver: saltapii\n", 2, 11, `reactord.driver "saltapii" is not a driver: want one of dryrun, saltapi, master, exec, nats, null (did you mean saltapi?)`, false},
		// The values the daemon's flags refuse are refused here too, with
		// their position (issue 10 #14).
		{"zero workers", "reactord:\n  workers: 0\n", 2, 12, "workers must be a positive integer", false},
		{"negative settle", "reactord:\n  settle: -5s\n", 2, 11, "reactord.settle must be a positive duration", false},
		{"negative job_timeout", "reactord:\n  job_timeout: -1m\n", 2, 16, "reactord.job_timeout must be a positive duration", false},
		{"negative keep_jobs", "reactord:\n  keep_jobs: -24h\n", 2, 14, "reactord.keep_jobs must be a positive duration", false},
		{"negative max_hops", "reactord:\n  max_hops: -1\n", 2, 13, "reactord.max_hops must be a positive integer", false},
		{"settings not a mapping", "reactord: yes\n", 1, 11, "reactord must be a mapping", false},
		{"file_roots not a mapping", "file_roots: [a]\n", 1, 13, "file_roots must be a mapping", false},
		{"syntax error", "reactor:\n  - 'a': [x\n", 2, 10, "did not find expected ',' or ']' (the [ opened here is not closed)", false},
		{"not a mapping", "- a\n", 1, 1, "must be a mapping of options", false},
		{"duplicate top-level key", "reactor: []\nreactor: []\n", 2, 1, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{"r.conf": c.src})
			path := filepath.Join(dir, "r.conf")
			cfg, err := Load(path)
			var text string
			if c.warningOnly {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if len(cfg.Warnings) != 1 {
					t.Fatalf("warnings = %v", cfg.Warnings)
				}
				text = cfg.Warnings[0].Error()
			} else {
				if err == nil {
					t.Fatal("no error")
				}
				text = err.Error()
			}
			prefix := path + ":" + itoa(c.line) + ":"
			if c.col > 0 {
				prefix += itoa(c.col) + ":"
			}
			if !strings.HasPrefix(text, prefix) || !strings.Contains(text, c.msg) {
				t.Fatalf("got %q, want prefix %q and %q", text, prefix, c.msg)
			}
		})
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	dir := write(t, map[string]string{"r.conf": "reactor:\n  - 1: a.sls\n  - 2: b.sls\nreactord:\n  bogus: 1\n"})
	_, err := Load(filepath.Join(dir, "r.conf"))
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("want three errors, got %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestLoadSaltConfigDir: -c takes Salt's configuration directory (as
// salt-master -c does): its master file, with master.d; a directory with
// neither *.conf nor master says what -c wants.
func TestLoadSaltConfigDir(t *testing.T) {
	dir := write(t, map[string]string{
		"salt/master":                "interface: 127.0.0.1\n",
		"salt/master.d/reactor.conf": "reactor:\n  - 'salt/minion/*/start': /srv/reactor/start.sls\n",
		"empty/README":               "",
	})
	cfg, err := Load(filepath.Join(dir, "salt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := globs(cfg); !reflect.DeepEqual(got, []string{"salt/minion/*/start=/srv/reactor/start.sls"}) {
		t.Fatalf("rules %v", got)
	}
	_, err = Load(filepath.Join(dir, "empty"))
	if err == nil || !strings.Contains(err.Error(), "Salt's configuration directory") {
		t.Fatalf("an empty directory: %v", err)
	}
}
