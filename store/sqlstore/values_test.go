package sqlstore

import (
	"context"
	"github.com/reactord/reactord/store"
	"strings"
	"testing"
	"time"
)

func TestCleanString(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		nul   bool
		want  string
	}{
		{"abc", 0, true, "abc"},
		{"abcdef", 3, true, "abc"},
		{"ééééé", 3, true, "ééé"},
		{"ab\xffc", 0, true, "ab\uFFFDc"},
		{"a\x00b", 0, true, "a\x00b"},
		{"a\x00b", 0, false, "a\uFFFDb"},
		{"🚀🚀", 1, true, "🚀"},
	} {
		if got := cleanString(tc.in, tc.width, tc.nul); got != tc.want {
			t.Errorf("cleanString(%q, %d, %v) = %q, want %q", tc.in, tc.width, tc.nul, got, tc.want)
		}
	}
}

func TestCleanJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		nul  bool
		want string
	}{
		{``, true, `null`},
		{`  `, true, `null`},
		{`{"a": 1}`, true, `{"a": 1}`},
		{`not json`, true, `"not json"`},
		{`{"a": "x\u0000"}`, true, `{"a": "x\u0000"}`},
		{`{"a": "x\u0000"}`, false, `{"a": "x\ufffd"}`},
		// An escaped backslash followed by u0000 is text, not a NUL.
		{`{"a": "\\u0000"}`, false, `{"a": "\\u0000"}`},
		{`{"a": "\\\u0000"}`, false, `{"a": "\\\ufffd"}`},
		{"{\"a\": \"\xff\"}", true, "{\"a\": \"\uFFFD\"}"},
	} {
		if got := cleanJSON([]byte(tc.in), tc.nul); got != tc.want {
			t.Errorf("cleanJSON(%q, %v) = %q, want %q", tc.in, tc.nul, got, tc.want)
		}
	}
}

func TestWithStamp(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 5000, time.UTC)
	for _, tc := range []struct{ in, want string }{
		{`{"fun": "x"}`, `{"_stamp":"2025-03-01T12:00:00.000005","fun": "x"}`},
		{` {} `, `{"_stamp":"2025-03-01T12:00:00.000005"}`},
		{`{"_stamp": "2020-01-01T00:00:00", "fun": "x"}`, `{"_stamp": "2020-01-01T00:00:00", "fun": "x"}`},
		{`{"nested": {"_stamp": 1}}`, `{"_stamp":"2025-03-01T12:00:00.000005","nested": {"_stamp": 1}}`},
		{`[1]`, `[1]`},
		{`{bad`, `{bad`},
	} {
		if got := string(withStamp(raw(tc.in), ts)); got != tc.want {
			t.Errorf("withStamp(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestJidString: jidString writes the jid Salt would give a job published
// at a time, which reads back as that time.
func TestJidString(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 34, 56, 789012000, time.Local)
	jid := jidString(ts)
	if jid != "20250301123456789012" {
		t.Fatalf("jidString = %s", jid)
	}
	if got := store.JobTime(jid, nil); !got.Equal(ts) {
		t.Errorf("JobTime(%s) = %v, want %v", jid, got, ts)
	}
}

func TestGlobPrefix(t *testing.T) {
	for glob, want := range map[string]string{
		"salt/job/*/ret/*": "salt/job/",
		"salt/auth":        "salt/auth",
		"*":                "",
		"salt/job/?":       "salt/job/",
		"salt/[ab]":        "salt/",
		"a\xffb*":          "a",
	} {
		if got := globPrefix(glob); got != want {
			t.Errorf("globPrefix(%q) = %q, want %q", glob, got, want)
		}
	}
	if got := likeEscape("100%_a!b"); got != "100!%!_a!!b" {
		t.Errorf("likeEscape = %q", got)
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, err string }{
		{"nope", "not a URL"},
		{"redis://localhost", "unsupported scheme"},
		{"sqlite://", "no database file"},
		{"mysql://root:secret@127.0.0.1:1/", "no database name"},
		{"sqlite:///nonexistent-dir/x/y.db", "open sqlite:///nonexistent-dir/x/y.db"},
	} {
		_, err := Open(ctx, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Open(%q) = %v, want an error with %q", tc.url, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", tc.url, err)
		}
	}
	// A relative path.
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := Open(ctx, "sqlite://relative.db")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, "sqlite://"+dir+"/relative.db?_journal_mode=DELETE"); err != nil {
		t.Fatal(err)
	}
}

func TestMySQLConfig(t *testing.T) {
	for _, tc := range []struct{ in, addr, user, pass, db string }{
		{"root@tcp(127.0.0.1:3306)/test", "127.0.0.1:3306", "root", "", "test"},
		{"salt:p%40ss@db.example:3307/salt", "db.example:3307", "salt", "p@ss", "salt"},
		{"salt@db.example/salt?timeout=5s", "db.example:3306", "salt", "", "salt"},
		{"u:p@/salt", "127.0.0.1:3306", "u", "p", "salt"},
	} {
		cfg, err := mysqlConfig(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if cfg.Addr != tc.addr || cfg.User != tc.user || cfg.Passwd != tc.pass || cfg.DBName != tc.db || !cfg.ParseTime || cfg.Params["time_zone"] != "'+00:00'" {
			t.Errorf("%s: %+v", tc.in, cfg)
		}
	}
	// A store that cannot open names its URL without the password, in
	// the user information or in the query.
	for _, u := range []string{"mysql://salt:secret@127.0.0.1:1/salt", "mysql://salt:se,secret@127.0.0.1:1/salt", "postgres://salt@127.0.0.1:1/salt?password=secret&connect_timeout=1"} {
		if _, err := Open(context.Background(), u); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("Open(%s): %v", u, err)
		}
	}
}

// TestSQLiteDefaults: a sqlite URL gets WAL, synchronous FULL and
// temporary files in memory unless it says otherwise, and the defaults
// never displace a pragma of its own.
func TestSQLiteDefaults(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		query string
		want  map[string]string
	}{
		{"", map[string]string{"journal_mode": "wal", "synchronous": "2", "temp_store": "2", "foreign_keys": "0"}},
		{"?_pragma=synchronous(normal)", map[string]string{"journal_mode": "wal", "synchronous": "1"}},
		{"?_pragma=foreign_keys(1)", map[string]string{"temp_store": "2", "foreign_keys": "1"}},
		{"?_pragma=temp_store(file)&_pragma=synchronous(full)", map[string]string{"temp_store": "1", "synchronous": "2"}},
	} {
		st, err := Open(ctx, "sqlite://"+dir+"/d.db"+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		s := st.(*sqlStore)
		for pragma, want := range tc.want {
			var got string
			if err := s.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%q: PRAGMA %s = %s, want %s", tc.query, pragma, got, want)
			}
		}
		st.Close()
	}
}

func TestReplaceTopLevel(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"fun": "runner.x", "_stamp": "old", "return": {"_stamp": "inner"}}`, `{"fun": "runner.x", "_stamp": "new", "return": {"_stamp": "inner"}}`},
		{`{"return": {"_stamp": "inner"}, "_stamp" :  "old" }`, `{"return": {"_stamp": "inner"}, "_stamp" :  "new" }`},
		{`{"_stamp":1}`, `{"_stamp":"new"}`},
		{`{"a": [1, {"_stamp": 2}]}`, `{"a": [1, {"_stamp": 2}]}`},
		{`["_stamp", "old"]`, `["_stamp", "old"]`},
		{`"x"`, `"x"`},
		{`{"a": `, `{"a": `},
		{``, ``},
	} {
		if got := string(replaceTopLevel(raw(tc.doc), "_stamp", raw(`"new"`))); got != tc.want {
			t.Errorf("replaceTopLevel(%s) = %s, want %s", tc.doc, got, tc.want)
		}
	}
}
