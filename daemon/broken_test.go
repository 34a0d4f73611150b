package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// brokenConf writes a configuration with two rules: good.sls loads, and
// bad.sls is the given source.
func brokenConf(t *testing.T, bad string) (conf, badPath string) {
	t.Helper()
	dir := t.TempDir()
	conf = filepath.Join(dir, "reactor.conf")
	badPath = filepath.Join(dir, "bad.sls")
	files := map[string]string{
		conf:                           "reactor:\n  - 'salt/minion/*/start':\n    - " + dir + "/good.sls\n  - 'myco/*':\n    - " + badPath + "\n",
		filepath.Join(dir, "good.sls"): "#!gotmpl|yaml\nstart:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
		badPath:                        bad,
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return conf, badPath
}

// TestBrokenFilesRefuseStart: a reaction file that does not load stops
// the start with each positioned problem, before the embedded server
// starts (its data directory stays empty); --start-broken starts anyway,
// with /healthz failing and the metric counting the problems, and the
// files that load react.
func TestBrokenFilesRefuseStart(t *testing.T) {
	conf, bad := brokenConf(t, "{% if data.x %}\nr:\n  local.test.ping:\n    - tgt: {{ data.id }\n")
	o := testOptions(t)
	o.Config = conf
	_, err := New(context.Background(), o)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New: %v, want a configuration error", err)
	}
	var le *LoadError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), bad+":4:") || !strings.Contains(err.Error(), "--start-broken") {
		t.Fatalf("New: %v, want the problem at %s:4 and --start-broken named", err, bad)
	}
	if ents, _ := os.ReadDir(o.DataDir); len(ents) > 0 {
		t.Errorf("the data directory was used before the configuration was refused: %v", ents)
	}

	o = testOptions(t)
	o.Config, o.StartBroken = conf, true
	out := &syncbuf.Buffer{}
	o.Stdout = out
	d, _ := runDaemon(t, o)
	if err := d.Health(); err == nil || !strings.Contains(err.Error(), "reaction files that do not load: "+bad) {
		t.Errorf("health with a broken file: %v", err)
	}
	if n := brokenMetric(t, d); n != 1 {
		t.Errorf("reactord_reaction_files_broken = %v, want 1", n)
	}
	publish(t, d, "salt/minion/web1/start", `{"id": "web1"}`)
	waitFor(t, out, `"tgt":"web1"`)

	// Fixed on disk: healthy again, without a reload.
	if err := os.WriteFile(bad, []byte("#!yaml\nr:\n  local.test.ping:\n    - tgt: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, func() error {
		if err := d.Health(); err != nil {
			return fmt.Errorf("still unhealthy after the fix: %w", err)
		}
		if n := brokenMetric(t, d); n != 0 {
			return fmt.Errorf("reactord_reaction_files_broken = %v after the fix", n)
		}
		return nil
	})
}

// TestFilesNoEventRendersRefuseStart: a reaction file whose every render
// fails, whatever the event, refuses the start as a syntax error does,
// positioned where it fails; the one broken for some events only does not.
func TestFilesNoEventRendersRefuseStart(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // after the path; "" starts
	}{
		{"syntax error", "r:\n  local.test.ping:\n    - tgt: {{ data.id }\n", ":3:"},
		{"YAML error, no expression", "r:\n  local.test.ping:\n    - tgt: web1\n   oops: x\n", ":4:4: did not find expected key"},
		{"YAML error, values printed", "r:\n  local.test.ping:\n    - tgt: {{ data.id }}\n   - x\n", ":4:4: did not find expected key"},
		{"YAML error for some events", "{% if data.get('x') %}\nr: [\n{% endif %}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf, bad := brokenConf(t, c.src)
			cfg, err := config.Load(conf)
			if err != nil {
				t.Fatal(err)
			}
			_, err = (&Daemon{opts: Options{Config: conf}, log: slog.New(slog.DiscardHandler)}).loadEngine(cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), bad+c.want) {
				t.Fatalf("loadEngine: %v, want the problem at %s%s", err, bad, c.want)
			}
			o := testOptions(t)
			o.Config = conf
			if _, err := New(context.Background(), o); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad+c.want) {
				t.Fatalf("New: %v, want a configuration error at %s%s", err, bad, c.want)
			}
		})
	}
}

// TestReloadKeepsConfigurationWhenFilesBreak: an edit that breaks a
// reaction file is logged once and counted, and the daemon goes on with
// the file's previous version; once fixed, the new version reacts.
func TestReloadKeepsConfigurationWhenFilesBreak(t *testing.T) {
	conf, bad := brokenConf(t, "#!gotmpl|yaml\nv1:\n  local.test.ping:\n    - tgt: {{ .data.id }}-v1\n")
	o := testOptions(t)
	o.Config, o.ReloadSettle = conf, 50*time.Millisecond
	out := &syncbuf.Buffer{}
	o.Stdout = out
	d, _ := runDaemon(t, o)
	publish(t, d, "myco/a", `{"id": "m1"}`)
	waitFor(t, out, `"tgt":"m1-v1"`)

	if err := os.WriteFile(bad, []byte("{% if data.x %}\nbroken: {{ data.id }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Reaction files are looked at on disk at most once a second, when an
	// event renders them: events react with the previous version until
	// the edit is seen (and logged), and after.
	seen := 0
	wait.For(t, 10*time.Second, func() error {
		seen++
		publish(t, d, "myco/b", fmt.Sprintf(`{"id": "m2-%d"}`, seen))
		waitFor(t, out, fmt.Sprintf(`"tgt":"m2-%d-v1"`, seen))
		if !strings.Contains(o.Stderr.(*syncbuf.Buffer).String(), "bad.sls:2:") {
			return errors.New("the broken edit is not seen yet")
		}
		return nil
	})
	if n := brokenMetric(t, d); n != 1 {
		t.Errorf("reactord_reaction_files_broken = %v while the edit does not load, want 1", n)
	}

	if err := os.WriteFile(bad, []byte("#!gotmpl|yaml\nv2:\n  local.test.ping:\n    - tgt: {{ .data.id }}-v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, func() error {
		if strings.Contains(out.String(), "-v2") {
			return nil
		}
		publish(t, d, "myco/c", `{"id": "m3"}`)
		return errors.New("the fixed file is not taken yet")
	})
	if n := brokenMetric(t, d); n != 0 {
		t.Errorf("reactord_reaction_files_broken = %v once fixed, want 0", n)
	}
	if strings.Count(o.Stderr.(*syncbuf.Buffer).String(), "does not load: previous version kept") != 1 {
		t.Errorf("the broken edit was not logged once:\n%s", o.Stderr.(*syncbuf.Buffer).String())
	}

	// A configuration reload that brings a file that does not load is
	// refused, naming it; the running configuration goes on.
	// So is one that brings a file no event can render (a YAML error,
	// no expression).
	worse := filepath.Join(filepath.Dir(conf), "worse.sls")
	if err := os.WriteFile(worse, []byte("{{ data.id }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unrendered := filepath.Join(filepath.Dir(conf), "unrendered.sls")
	if err := os.WriteFile(unrendered, []byte("r:\n  local.test.ping:\n    - tgt: [web1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(conf)
	if err := os.WriteFile(conf, append(src, "  - 'other/*':\n    - "+worse+"\n    - "+unrendered+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, o.Stderr.(*syncbuf.Buffer), "reload failed; keeping the running configuration")
	for _, want := range []string{"worse.sls:1:", "unrendered.sls:3:12: "} {
		if !strings.Contains(o.Stderr.(*syncbuf.Buffer).String(), want) {
			t.Errorf("the refused reload does not name %s\n%s", want, o.Stderr.(*syncbuf.Buffer).String())
		}
	}
	publish(t, d, "myco/d", `{"id": "m4"}`)
	waitFor(t, out, `"tgt":"m4-v2"`)
}

func brokenMetric(t *testing.T, d *Daemon) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "reactord_reaction_files_broken" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no reactord_reaction_files_broken metric")
	return 0
}

func publish(t *testing.T, d *Daemon, tag, data string) {
	t.Helper()
	token, err := ReadSecretFile(natsbus.TokenFile(d.DataDir()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: d.NATSURL(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Publish(context.Background(), natsbus.Msg{Tag: tag, Body: []byte(`{"tag": "` + tag + `", "data": ` + data + `}`)}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, buf *syncbuf.Buffer, want string) {
	t.Helper()
	wait.For(t, 10*time.Second, func() error {
		if !strings.Contains(buf.String(), want) {
			return fmt.Errorf("no %q in:\n%s", want, buf.String())
		}
		return nil
	})
}
