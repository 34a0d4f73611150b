package daemon

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
)

// TestMergeOrder: a setting comes from its flag, else its variable, else
// the file, else its default; a secret and its *-file flag are one setting.
func TestMergeOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		env   map[string]string
		file  map[string]string
		sec   config.Settings // the keys config types
		check func(o Options) bool
		src   map[string]Source
	}{
		{name: "default", check: func(o Options) bool { return o.Queue == 1024 }, src: map[string]Source{"queue": FromDefault}},
		{name: "file over default", file: map[string]string{"queue": "7"},
			check: func(o Options) bool { return o.Queue == 7 }, src: map[string]Source{"queue": FromFile}},
		{name: "env over file", env: map[string]string{"REACTORD_QUEUE": "9"}, file: map[string]string{"queue": "7"},
			check: func(o Options) bool { return o.Queue == 9 }, src: map[string]Source{"queue": FromEnv}},
		{name: "flag over env", args: []string{"--queue", "11"}, env: map[string]string{"REACTORD_QUEUE": "9"}, file: map[string]string{"queue": "7"},
			check: func(o Options) bool { return o.Queue == 11 }, src: map[string]Source{"queue": FromFlag}},
		{name: "NATS_URL", env: map[string]string{"NATS_URL": "nats://a:4222"},
			check: func(o Options) bool { return o.NATS.URL == "nats://a:4222" }, src: map[string]Source{"nats": FromEnv}},
		{name: "REACTORD_NATS over NATS_URL", env: map[string]string{"NATS_URL": "nats://a:4222", "REACTORD_NATS": "nats://b:4222"},
			check: func(o Options) bool { return o.NATS.URL == "nats://b:4222" }},
		{name: "jetstream from the file", file: map[string]string{"jetstream": "false"},
			check: func(o Options) bool { return o.JetStream.Given && !o.JetStream.Value }},
		{name: "jetstream unset", check: func(o Options) bool { return !o.JetStream.Given && o.JetStream.On(true) }},
		{name: "secret's variable over the file's *_file", env: map[string]string{"REACTORD_SALTAPI_PASSWORD": "pw"}, file: map[string]string{"saltapi-password-file": "/pw"},
			check: func(o Options) bool { return o.Drivers.APIPassword == "pw" && o.Drivers.APIPasswordFile == "" },
			src:   map[string]Source{"saltapi-password": FromEnv}},
		{name: "command line's *-file over the secret's variable", args: []string{"--store-file", "/s"}, env: map[string]string{"REACTORD_STORE": "sqlite:///x"},
			check: func(o Options) bool { return o.Store == "" && o.StoreFile == "/s" }},
		{name: "the file's store under the variable", env: map[string]string{"REACTORD_STORE": "none"}, file: map[string]string{"store": "sqlite:///f"},
			check: func(o Options) bool { return o.Store == "none" }},
		{name: "typed keys as config read them", sec: config.Settings{Settle: 5 * time.Second, Renderer: config.RendererGotmpl, Workers: 3, Store: "sqlite:///f"},
			check: func(o Options) bool {
				return o.Settle == 5*time.Second && o.Renderer == config.RendererGotmpl && o.Workers == 3 && o.Store == "sqlite:///f"
			},
			src: map[string]Source{"settle": FromFile, "renderer": FromFile, "workers": FromFile, "job-timeout": FromDefault}},
		{name: "flag and variable over typed keys", args: []string{"--settle", "1s"}, env: map[string]string{"REACTORD_RENDERER": "jinja"},
			sec:   config.Settings{Settle: 5 * time.Second, Renderer: config.RendererGotmpl},
			check: func(o Options) bool { return o.Settle == time.Second && o.Renderer == config.RendererJinja },
			src:   map[string]Source{"settle": FromFlag, "renderer": FromEnv}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Defaults()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.Flags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			file := map[string]config.FlagSetting{}
			for k, v := range c.file {
				file[k] = config.FlagSetting{Value: v}
			}
			sec := c.sec
			sec.Flags = file
			src, err := Merge(&o, fs, sec, func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o) {
				t.Errorf("merged options wrong: %+v", o)
			}
			for k, want := range c.src {
				if src[k] != want {
					t.Errorf("source of %s = %s, want %s", k, src[k], want)
				}
			}
		})
	}
}

// TestMergeErrors: an unknown file key and a variable that does not parse
// are errors naming them.
func TestMergeErrors(t *testing.T) {
	o := Defaults()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.Flags(fs)
	if _, err := Merge(&o, fs, config.Settings{Flags: map[string]config.FlagSetting{"nope": {Value: "1"}}}, func(string) string { return "" }); err == nil {
		t.Error("an unknown setting was accepted")
	}
	_, err := Merge(&o, fs, config.Settings{}, func(k string) string {
		if k == "REACTORD_QUEUE" {
			return "many"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "$REACTORD_QUEUE") {
		t.Errorf("bad variable: %v", err)
	}
}

// TestEverySettingHasItsNames: each daemon flag has a reactord: key (or a
// reason above), an environment variable of its own, and a line in the
// configuration reference.
func TestEverySettingHasItsNames(t *testing.T) {
	keys := config.SettingKeys()
	o := Defaults()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.Flags(fs)
	envs := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := noFileKey[f.Name]; !ok && !slices.Contains(keys, FileKey(f.Name)) {
			t.Errorf("--%s has no reactord: key %s (config's flagSettings) and no reason in noFileKey", f.Name, FileKey(f.Name))
		}
		env := EnvName(f.Name)
		if other, dup := envs[env]; dup {
			t.Errorf("--%s and --%s share $%s", f.Name, other, env)
		}
		envs[env] = f.Name
	})
	for name := range noFileKey {
		if fs.Lookup(name) == nil {
			t.Errorf("noFileKey names --%s, which is no daemon flag", name)
		}
	}
}

var update = flag.Bool("update", false, "write docs/configuration.md again")

// TestReference: docs/configuration.md is what WriteReference makes.
func TestReference(t *testing.T) {
	var b strings.Builder
	if err := WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	const path = "../docs/configuration.md"
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b.String() {
		t.Errorf("%s is not the reference the options make: run go test ./daemon -update", path)
	}
}
