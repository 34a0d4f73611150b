package execdriver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/event"
)

const (
	localJID  = "20261122010203123456"
	runnerJID = "20261122010203654321"
)

func m(kv ...any) *event.Map {
	c := event.NewMap(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i].(string), kv[i+1])
	}
	return c
}

// chunk builds a low chunk with the keys the compiler always sets.
func chunk(state, fun string, kv ...any) *event.Chunk {
	c := m("state", state, "__id__", "react", "name", "react", "__sls__", "/srv/reactor/r.sls", "order", int64(1), "fun", fun)
	c.Update(m(kv...))
	return c
}

// shq quotes s for /bin/sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fakeSalt holds stand-in salt, salt-run and salt-call scripts in a
// temporary directory. Each records its argv, one argument a line, in
// NAME.argv next to it.
type fakeSalt struct {
	dir string
}

func newFakeSalt(t *testing.T) *fakeSalt {
	t.Helper()
	f := &fakeSalt{dir: t.TempDir()}
	f.script(t, "salt", "echo 'Executed command with job ID: "+localJID+"'\n")
	f.script(t, "salt-run", "echo '[WARNING ] Running in asynchronous mode. Results of this execution may be collected by attaching to the master event bus or by examining the master job cache, if configured. This execution is running under tag salt/run/"+runnerJID+"' >&2\n")
	f.script(t, "salt-call", "echo 'local:'\necho '    True'\n")
	return f
}

// script (re)writes the stand-in for name: it records its arguments, then
// runs body.
func (f *fakeSalt) script(t *testing.T, name, body string) {
	t.Helper()
	text := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + shq(f.path(name)+".argv") + "\n" + body
	if err := os.WriteFile(f.path(name), []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeSalt) path(name string) string { return filepath.Join(f.dir, name) }

func (f *fakeSalt) argv(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(f.path(name) + ".argv")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func (f *fakeSalt) config() execdriver.Config {
	return execdriver.Config{Salt: f.path("salt"), SaltRun: f.path("salt-run"), SaltCall: f.path("salt-call"), Timeout: 10 * time.Second}
}

func (f *fakeSalt) driver(t *testing.T, cfg execdriver.Config) *execdriver.Driver {
	t.Helper()
	d, err := execdriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

func do(d *execdriver.Driver, c *event.Chunk) (actions.Result, error) {
	return d.Do(context.Background(), actions.Action{Tag: "salt/test", Chunk: c})
}

// TestCommandLines runs every kind of reaction against the stand-ins and
// checks the exact argument vector each received.
func TestCommandLines(t *testing.T) {
	cases := []struct {
		name string
		c    *event.Chunk
		prog string
		argv []string
		jid  string
	}{
		{"glob", chunk("local", "test.ping", "tgt", "web*"), "salt",
			[]string{"--async", "--", "web*", "test.ping"}, localJID},
		{"explicit glob", chunk("local", "test.ping", "tgt", "web*", "tgt_type", "glob"), "salt",
			[]string{"--async", "--", "web*", "test.ping"}, localJID},
		{"pcre", chunk("local", "test.ping", "tgt", `web\d+`, "tgt_type", "pcre"), "salt",
			[]string{"--async", "-E", "--", `web\d+`, "test.ping"}, localJID},
		{"list of ids", chunk("local", "test.ping", "tgt", []any{"web1", "web2", "db1"}, "tgt_type", "list"), "salt",
			[]string{"--async", "-L", "--", "web1,web2,db1", "test.ping"}, localJID},
		{"list as text", chunk("local", "test.ping", "tgt", "web1,web2", "tgt_type", "list"), "salt",
			[]string{"--async", "-L", "--", "web1,web2", "test.ping"}, localJID},
		{"grain", chunk("local", "test.ping", "tgt", "os:Debian", "tgt_type", "grain"), "salt",
			[]string{"--async", "-G", "--", "os:Debian", "test.ping"}, localJID},
		{"grain_pcre", chunk("local", "test.ping", "tgt", "os:(Debian|Ubuntu)", "tgt_type", "grain_pcre"), "salt",
			[]string{"--async", "--grain-pcre", "--", "os:(Debian|Ubuntu)", "test.ping"}, localJID},
		{"pillar", chunk("local", "test.ping", "tgt", "role:web", "tgt_type", "pillar"), "salt",
			[]string{"--async", "-I", "--", "role:web", "test.ping"}, localJID},
		{"pillar_pcre", chunk("local", "test.ping", "tgt", "role:w.*", "tgt_type", "pillar_pcre"), "salt",
			[]string{"--async", "--pillar-pcre", "--", "role:w.*", "test.ping"}, localJID},
		{"nodegroup", chunk("local", "test.ping", "tgt", "webservers", "tgt_type", "nodegroup"), "salt",
			[]string{"--async", "-N", "--", "webservers", "test.ping"}, localJID},
		{"range", chunk("local", "test.ping", "tgt", "%cluster", "tgt_type", "range"), "salt",
			[]string{"--async", "-R", "--", "%cluster", "test.ping"}, localJID},
		{"compound", chunk("local", "test.ping", "tgt", "G@os:Debian and web*", "tgt_type", "compound"), "salt",
			[]string{"--async", "-C", "--", "G@os:Debian and web*", "test.ping"}, localJID},
		{"ipcidr", chunk("local", "test.ping", "tgt", "10.0.0.0/8", "tgt_type", "ipcidr"), "salt",
			[]string{"--async", "-S", "--", "10.0.0.0/8", "test.ping"}, localJID},
		{"target that looks like an option", chunk("local", "test.ping", "tgt", "-c/tmp/evil"), "salt",
			[]string{"--async", "--", "-c/tmp/evil", "test.ping"}, localJID},
		{"returner", chunk("local", "state.apply", "tgt", "web1", "ret", "mongo"), "salt",
			[]string{"--async", "--return", "mongo", "--", "web1", "state.apply"}, localJID},
		{"returner list", chunk("local", "state.apply", "tgt", "web1", "ret", []any{"mongo", "syslog"}), "salt",
			[]string{"--async", "--return", "mongo,syslog", "--", "web1", "state.apply"}, localJID},
		{"old-style arg and kwarg", chunk("local", "cmd.run", "tgt", "web1",
			"arg", []any{
				"ls -l /tmp", int64(5), 1.5, true, nil, "123", "yes", "", "a#b", "x=y",
				[]any{"a", int64(1), m("k", "v#")}, m("k", "v"), "tab\there", "None", "-rf", 1e16, "salt://top.sls", "é",
			},
			"kwarg", m("runas", "root", "timeout", int64(30), "env", m("A", "1"), "cwd", "/tmp")), "salt",
			[]string{
				"--async", "--", "web1", "cmd.run",
				"ls -l /tmp", "5", "1.5", "true", "null", `"123"`, `"yes"`, `""`, `"a\x23b"`, `"x=y"`,
				`["a", 1, {"k": "v\x23"}]`, `{"k": "v"}`, `"tab\there"`, `"None"`, `"-rf"`, "1.0e+16", "salt://top.sls", `"é"`,
				"runas=root", "timeout=30", `env={"A": "1"}`, "cwd=/tmp",
			}, localJID},
		{"new-style args", chunk("local", "state.single", "tgt", "web1", "args", []any{m("fun", "pkg.installed"), m("name", "zsh"), m("refresh", true)}), "salt",
			[]string{"--async", "--", "web1", "state.single", "fun=pkg.installed", "name=zsh", "refresh=true"}, localJID},
		{"single arg not in a list", chunk("local", "cmd.run", "tgt", "web1", "arg", "uptime"), "salt",
			[]string{"--async", "--", "web1", "cmd.run", "uptime"}, localJID},
		{"runner", chunk("runner", "state.orchestrate", "args", []any{m("mods", "orch.deploy"), m("pillar", m("target", "web1", "n", int64(2)))}), "salt-run",
			[]string{"--async", "--", "state.orchestrate", "mods=orch.deploy", `pillar={"target": "web1", "n": 2}`}, runnerJID},
		{"runner args mapping", chunk("runner", "jobs.lookup_jid", "args", m("jid", "20261122010203123456")), "salt-run",
			[]string{"--async", "--", "jobs.lookup_jid", `jid="20261122010203123456"`}, runnerJID},
		{"runner legacy body keys", chunk("runner", "jobs.lookup_jid", "jid", "20261122010203123456", "__env__", "base"), "salt-run",
			[]string{"--async", "--", "jobs.lookup_jid", `jid="20261122010203123456"`}, runnerJID},
		{"runner legacy with positional arg", chunk("runner", "test.arg", "arg", []any{"a"}, "b", int64(1)), "salt-run",
			[]string{"--async", "--", "test.arg", "a", "b=1"}, runnerJID},
		{"runner kwarg hides body keys", chunk("runner", "test.arg", "kwarg", m("x", "1"), "b", int64(1)), "salt-run",
			[]string{"--async", "--", "test.arg", `x="1"`}, runnerJID},
		{"wheel", chunk("wheel", "key.accept", "args", []any{m("match", "web1")}), "salt-run",
			[]string{"--async", "--", "salt.cmd", "saltutil.wheel", "key.accept", "match=web1"}, runnerJID},
		{"wheel legacy body keys", chunk("wheel", "key.accept", "match", "web1"), "salt-run",
			[]string{"--async", "--", "salt.cmd", "saltutil.wheel", "key.accept", "match=web1"}, runnerJID},
		{"wheel positional strings are parsed twice", chunk("wheel", "key.delete", "arg", []any{"web1", "123", "a b", int64(4)}), "salt-run",
			[]string{"--async", "--", "salt.cmd", "saltutil.wheel", "key.delete", "web1", `"\"123\""`, "a b", "4"}, runnerJID},
		{"caller positional", chunk("caller", "file.touch", "args", []any{"/tmp/foo"}), "salt-call",
			[]string{"--", "file.touch", "/tmp/foo"}, ""},
		{"caller dictlist", chunk("caller", "file.touch", "args", []any{m("name", "/tmp/foo")}), "salt-call",
			[]string{"--", "file.touch", "name=/tmp/foo"}, ""},
	}
	f := newFakeSalt(t)
	d := f.driver(t, f.config())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(f.path(c.prog) + ".argv")
			res, err := do(d, c.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.argv(t, c.prog); !slices.Equal(got, c.argv) {
				t.Fatalf("%s argv\n got %q\nwant %q", c.prog, got, c.argv)
			}
			if res.JID != c.jid {
				t.Fatalf("jid = %q, want %q", res.JID, c.jid)
			}
		})
	}
}

func TestExtraArgs(t *testing.T) {
	f := newFakeSalt(t)
	cfg := f.config()
	cfg.ExtraArgs = []string{"-c", "/etc/salt"}
	d := f.driver(t, cfg)
	for _, c := range []struct {
		c    *event.Chunk
		prog string
		argv []string
	}{
		{chunk("local", "test.ping", "tgt", "web1", "tgt_type", "list", "ret", "mongo"), "salt",
			[]string{"--async", "-c", "/etc/salt", "-L", "--return", "mongo", "--", "web1", "test.ping"}},
		{chunk("runner", "manage.up"), "salt-run", []string{"--async", "-c", "/etc/salt", "--", "manage.up"}},
		{chunk("wheel", "minions.connected"), "salt-run", []string{"--async", "-c", "/etc/salt", "--", "salt.cmd", "saltutil.wheel", "minions.connected"}},
		{chunk("caller", "test.ping"), "salt-call", []string{"-c", "/etc/salt", "--", "test.ping"}},
	} {
		if _, err := do(d, c.c); err != nil {
			t.Fatal(err)
		}
		if got := f.argv(t, c.prog); !slices.Equal(got, c.argv) {
			t.Fatalf("%s argv\n got %q\nwant %q", c.prog, got, c.argv)
		}
	}
	if _, err := execdriver.New(execdriver.Config{ExtraArgs: []string{"--"}}); err == nil {
		t.Fatal(`"--" in extra arguments accepted`)
	}
}

// TestRefusedChunks covers chunks that have no command line: each fails
// before anything runs, and none is retryable.
func TestRefusedChunks(t *testing.T) {
	cases := []struct {
		name string
		c    *event.Chunk
		msg  string
	}{
		{"pillar_exact", chunk("local", "test.ping", "tgt", "role:web", "tgt_type", "pillar_exact"), `tgt_type "pillar_exact" has no salt command-line option`},
		{"unknown tgt_type", chunk("local", "test.ping", "tgt", "web1", "tgt_type", "bogus"), `unknown tgt_type "bogus"`},
		{"list target without list type", chunk("local", "test.ping", "tgt", []any{"a", "b"}), `tgt is a list but tgt_type is "glob"`},
		{"list target with comma", chunk("local", "test.ping", "tgt", []any{"a,b"}, "tgt_type", "list"), "holds a comma"},
		{"compound function", chunk("local", "test.ping,cmd.run", "tgt", "web1"), "not of the form module.function"},
		{"function like an option", chunk("caller", "--local"), "not of the form module.function"},
		{"bad keyword name", chunk("local", "test.arg", "tgt", "web1", "kwarg", m("1st", "x")), `keyword argument name "1st"`},
		{"wheel reserved keyword", chunk("wheel", "error.error", "args", []any{m("name", "x")}), `keyword argument "name" cannot reach a wheel function`},
		{"unencodable value", chunk("local", "test.arg", "tgt", "web1", "arg", []any{"\xff"}), "not valid UTF-8"},
		{"args format", chunk("runner", "x.y", "args", []any{}), "incorrect argument format"},
	}
	f := newFakeSalt(t)
	d := f.driver(t, f.config())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := do(d, c.c)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
			if strings.HasPrefix(err.Error(), "exec") {
				t.Errorf("%v starts with the driver's name, which whoever reports it adds", err)
			}
			if actions.IsRetryable(err) {
				t.Fatalf("%v is retryable", err)
			}
			for _, prog := range []string{"salt", "salt-run", "salt-call"} {
				if _, err := os.Stat(f.path(prog) + ".argv"); err == nil {
					t.Fatalf("%s ran", prog)
				}
			}
		})
	}
}

// TestOutcomes checks how the output and exit status of each program turn
// into a result or an error.
func TestOutcomes(t *testing.T) {
	traceback := "for i in 1 2 3 4 5 6 7 8; do echo \"noise line $i\" >&2; done\n"
	cases := []struct {
		name      string
		prog      string
		body      string
		c         *event.Chunk
		jid       string
		msg       []string // fragments the error must hold; nil for success
		absent    string   // a fragment the error must not hold
		retryable bool
		is        error
	}{
		{"local jid with unique_jid suffix", "salt", "echo 'Executed command with job ID: 20261122010203123456_4242'\n",
			chunk("local", "test.ping", "tgt", "web1"), "20261122010203123456_4242", nil, "", false, nil},
		{"no minions matched", "salt", "echo 'No minions matched the target. No command was sent, no jid was assigned.'\necho 'Executed command with job ID: 0'\n",
			chunk("local", "test.ping", "tgt", "nomatch*"), "", []string{"no minions matched the target"}, "", false, execdriver.ErrNoMinions},
		{"master down, job ID 0", "salt", "echo 'Failed to connect to the Master, is the Salt Master running?'\necho 'Executed command with job ID: 0'\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"started no job (job ID 0)", "is the Salt Master running?"}, "", true, nil},
		{"no job line", "salt", "echo 'something else'\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"printed no job ID", "stdout: something else"}, "", false, nil},
		{"master not contacted", "salt", traceback + "echo 'salt.exceptions.SaltClientError: The salt master could not be contacted. Is master running?' >&2\nexit 1\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"exit status 1", "noise line 5", "could not be contacted"}, "noise line 4", true, nil},
		{"request timed out", "salt", "echo 'Salt request timed out. The master is not responding. You may need to run your command with `--async` in order to bypass the congested event bus.' >&2\nexit 2\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"exit status 2", "Salt request timed out"}, "", true, nil},
		{"publish refused", "salt", "echo 'Failed to authenticate! This is most likely because this user is not permitted to execute commands, but there is a small possibility that a disk error occurred (check disk/inode usage).' >&2\nexit 1\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"exit status 1", "Failed to authenticate!"}, "", false, nil},
		{"runner failed to start", "salt-run", "echo \"'nope.nothing' is not available.\"\n",
			chunk("runner", "nope.nothing"), "", []string{`printed no "running under tag salt/run/JID" warning`, "is not available"}, "", false, nil},
		{"caller non-zero exit", "salt-call", traceback + "echo 'Passed invalid arguments: touch() missing 1 required positional argument' >&2\nexit 1\n",
			chunk("caller", "file.touch"), "", []string{"salt-call", "exit status 1", "noise line 8", "Passed invalid arguments"}, "noise line 3", false, nil},
		{"caller cannot reach master", "salt-call", "echo 'SaltClientError: Attempt to authenticate with the salt master failed with timeout error' >&2\nexit 2\n",
			chunk("caller", "test.ping"), "", []string{"exit status 2"}, "", true, nil},
		{"killed by a signal", "salt", "kill -9 $$\n",
			chunk("local", "test.ping", "tgt", "web1"), "", []string{"signal: killed"}, "", false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeSalt(t)
			f.script(t, c.prog, c.body)
			d := f.driver(t, f.config())
			res, err := do(d, c.c)
			if c.msg == nil {
				if err != nil {
					t.Fatal(err)
				}
				if res.JID != c.jid {
					t.Fatalf("jid = %q, want %q", res.JID, c.jid)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; result %+v", res)
			}
			for _, frag := range c.msg {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q lacks %q", err, frag)
				}
			}
			if c.absent != "" && strings.Contains(err.Error(), c.absent) {
				t.Errorf("error %q holds %q", err, c.absent)
			}
			if got := actions.IsRetryable(err); got != c.retryable {
				t.Errorf("retryable = %v, want %v (%v)", got, c.retryable, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
		})
	}
}

// stubborn is a stand-in that records TERM and keeps running, so only
// SIGKILL ends it. It writes "started" once it is running.
func stubborn(f *fakeSalt) string {
	marks := shq(f.path("signals"))
	return "trap 'echo TERM >> " + marks + "' TERM\necho started >> " + marks + "\nwhile :; do sleep 0.05; done\n"
}

func (f *fakeSalt) signals(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.path("signals"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func TestTimeoutTermThenKill(t *testing.T) {
	f := newFakeSalt(t)
	f.script(t, "salt", stubborn(f))
	cfg := f.config()
	cfg.Timeout, cfg.KillGrace = 300*time.Millisecond, 300*time.Millisecond
	d := f.driver(t, cfg)

	start := time.Now()
	_, err := do(d, chunk("local", "test.ping", "tgt", "web1"))
	elapsed := time.Since(start)

	if !errors.Is(err, execdriver.ErrTimeout) || !actions.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable ErrTimeout", err)
	}
	want := "salt timed out after 300ms (sent SIGTERM to its process group, then SIGKILL after 300ms)"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to hold %q", err, want)
	}
	if got := f.signals(t); !reflect.DeepEqual(got, []string{"started", "TERM"}) {
		t.Fatalf("signals seen by the script = %q, want started then TERM (the KILL cannot be trapped)", got)
	}
	if elapsed < 600*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("took %v, want timeout + grace (600ms) and well under 5s", elapsed)
	}
}

func TestTimeoutTermSuffices(t *testing.T) {
	f := newFakeSalt(t)
	f.script(t, "salt-run", "exec sleep 30\n")
	cfg := f.config()
	cfg.Timeout, cfg.KillGrace = 200*time.Millisecond, 10*time.Second
	d := f.driver(t, cfg)

	start := time.Now()
	_, err := do(d, chunk("runner", "state.orchestrate", "args", []any{m("mods", "orch")}))
	elapsed := time.Since(start)

	if !errors.Is(err, execdriver.ErrTimeout) || !actions.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "salt-run timed out after 200ms (sent SIGTERM to its process group)") {
		t.Fatalf("err = %q", err)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("took %v: SIGTERM should have ended the child long before the 10s grace", elapsed)
	}
}

func TestContextStopsChild(t *testing.T) {
	f := newFakeSalt(t)
	f.script(t, "salt-call", stubborn(f))
	cfg := f.config()
	cfg.Timeout, cfg.KillGrace = time.Minute, 200*time.Millisecond
	d := f.driver(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := d.Do(ctx, actions.Action{Chunk: chunk("caller", "test.ping")})
	if !errors.Is(err, context.Canceled) || actions.IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "salt-call stopped: context canceled (sent SIGTERM to its process group, then SIGKILL after 200ms)") {
		t.Fatalf("err = %q", err)
	}
	if got := f.signals(t); !reflect.DeepEqual(got, []string{"started", "TERM"}) {
		t.Fatalf("signals = %q", got)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("took %v", elapsed)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	f.script(t, "salt-call", "exec sleep 30\n")
	_, err = d.Do(dctx, actions.Action{Chunk: chunk("caller", "test.ping")})
	if !errors.Is(err, context.DeadlineExceeded) || !actions.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable context.DeadlineExceeded", err)
	}

	// A context that is already done starts nothing.
	_ = os.Remove(f.path("salt-call") + ".argv")
	_, err = d.Do(ctx, actions.Action{Chunk: chunk("caller", "test.ping")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, statErr := os.Stat(f.path("salt-call") + ".argv"); statErr == nil {
		t.Fatal("salt-call ran with a done context")
	}
}

// envScript records the environment the program was started with, as
// /proc/$$/environ has it (not the shell's, which adds variables).
func envScript(f *fakeSalt) string {
	return "tr '\\0' '\\n' < /proc/$$/environ > " + shq(f.path("env")) + "\necho 'Executed command with job ID: " + localJID + "'\n"
}

func (f *fakeSalt) env(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.path("env"))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(env)
	return env
}

func TestExplicitEnvironment(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	f := newFakeSalt(t)
	f.script(t, "salt", envScript(f))
	cfg := f.config()
	cfg.Env = []string{"PATH=" + os.Getenv("PATH"), "SALT_CONFIG_DIR=/etc/salt", "X=1=2"}
	d := f.driver(t, cfg)
	if _, err := do(d, chunk("local", "test.ping", "tgt", "web1")); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(cfg.Env)
	slices.Sort(want)
	if got := f.env(t); !slices.Equal(got, want) {
		t.Fatalf("env\n got %q\nwant %q", got, want)
	}

	if _, err := execdriver.New(execdriver.Config{Env: []string{"NOEQUALS"}}); err == nil {
		t.Fatal("malformed environment entry accepted")
	}
}

func TestDefaultEnvironment(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	t.Setenv("HOME", "/home/reactord")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_ALL", "C")
	t.Setenv("SALT_MASTER_CONFIG", "/etc/salt/master")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
	t.Setenv("LC_CTYPE", "C")
	f := newFakeSalt(t)
	f.script(t, "salt", envScript(f))
	d := f.driver(t, f.config()) // the environment is read here
	t.Setenv("SALT_LATE", "ignored")
	if _, err := do(d, chunk("local", "test.ping", "tgt", "web1")); err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/home/reactord", "LANG=C.UTF-8", "LC_ALL=C", "PATH=" + os.Getenv("PATH"), "SALT_MASTER_CONFIG=/etc/salt/master"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SALT_") && !strings.HasPrefix(kv, "SALT_MASTER_CONFIG=") && !strings.HasPrefix(kv, "SALT_LATE=") {
			want = append(want, kv) // SALT_* set outside the test
		}
	}
	slices.Sort(want)
	if got := f.env(t); !slices.Equal(got, want) {
		t.Fatalf("env\n got %q\nwant %q", got, want)
	}
}

func TestProgramLookup(t *testing.T) {
	f := newFakeSalt(t)
	// Bare names are looked up in the PATH of the child environment.
	d, err := execdriver.New(execdriver.Config{Env: []string{"PATH=/nonexistent:" + f.dir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if res, err := do(d, chunk("local", "test.ping", "tgt", "web1")); err != nil || res.JID != localJID {
		t.Fatalf("res %+v err %v", res, err)
	}

	d, err = execdriver.New(execdriver.Config{Salt: f.path("salt"), SaltRun: filepath.Join(f.dir, "missing-salt-run"), Env: []string{"PATH=/nonexistent"}})
	if err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]bool{"local": true, "runner": false, "wheel": false, "caller": false, "bogus": false} {
		if got := d.Supports(state); got != want {
			t.Errorf("Supports(%q) = %v, want %v", state, got, want)
		}
	}
	verr := d.Validate()
	if verr == nil || !strings.Contains(verr.Error(), "missing-salt-run") || !strings.Contains(verr.Error(), `"salt-call": executable file not found`) {
		t.Fatalf("Validate = %v", verr)
	}
	_, err = do(d, chunk("runner", "manage.up"))
	if err == nil || !strings.Contains(err.Error(), "is not available") || actions.IsRetryable(err) {
		t.Fatalf("runner without salt-run: %v", err)
	}
}

func TestNewRejectsNegativeDurations(t *testing.T) {
	for _, cfg := range []execdriver.Config{{Timeout: -time.Second}, {KillGrace: -time.Second}, {MaxProcs: -1}, {MaxCoalesce: -1}} {
		if _, err := execdriver.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	d, err := execdriver.New(execdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() != "exec" {
		t.Fatalf("Name = %q", d.Name())
	}
}
