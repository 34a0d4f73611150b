package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFlagSettings: every daemon flag that makes sense in a file can be
// set in the reactord: section, in the flag's syntax, with the flag's
// checks; secrets only as a file (issue 10 #14).
func TestFlagSettings(t *testing.T) {
	cases := []struct {
		name, src string
		flag      string // the flag set, "" for none
		value     string // its value; a relative path is under the folder
		err       string // the error's text, "" for none
		line, col int
	}{
		{"http", "http: 127.0.0.1:9100", "http", "127.0.0.1:9100", "", 0, 0},
		{"listen", "listen: '0.0.0.0:4222'", "listen", "0.0.0.0:4222", "", 0, 0},
		{"jetstream", "jetstream: true", "jetstream", "true", "", 0, 0},
		{"jetstream yes (YAML 1.1)", "jetstream: yes", "jetstream", "true", "", 0, 0},
		{"no_loop_guard", "no_loop_guard: false", "no-loop-guard", "false", "", 0, 0},
		{"queue", "queue: 4096", "queue", "4096", "", 0, 0},
		{"queue 0", "queue: 0", "queue", "0", "", 0, 0},
		{"store_spool", "store_spool: 1073741824", "store-spool", "1073741824", "", 0, 0},
		{"drain_timeout", "drain_timeout: 1m30s", "drain-timeout", "1m30s", "", 0, 0},
		{"ack_wait", "ack_wait: 45s", "ack-wait", "45s", "", 0, 0},
		{"archive_tags list", "archive_tags: ['salt/job/*', 'myapp/*']", "archive-tags", "salt/job/*,myapp/*", "", 0, 0},
		{"archive_tags string", "archive_tags: salt/job/*", "archive-tags", "salt/job/*", "", 0, 0},
		{"saltapi_url", "saltapi_url: https://salt:8000", "saltapi-url", "https://salt:8000", "", 0, 0},
		{"saltapi_password_file absolute", "saltapi_password_file: /run/credentials/pw", "saltapi-password-file", "/run/credentials/pw", "", 0, 0},
		{"saltapi_password_file relative", "saltapi_password_file: secrets/pw", "saltapi-password-file", "secrets/pw", "", 0, 0},
		{"nats_token_file", "nats_token_file: tok", "nats-token-file", "tok", "", 0, 0},
		{"salt_bin is a program", "salt_bin: salt", "salt-bin", "salt", "", 0, 0},

		{"negative queue", "queue: -1", "", "", "reactord.queue must not be negative (as --queue)", 2, 10},
		{"zero max_payload", "max_payload: 0", "", "", "reactord.max_payload must be more than 0 (as --max-payload)", 2, 16},
		{"negative ack_wait", "ack_wait: -5s", "", "", "reactord.ack_wait must not be negative (as --ack-wait)", 2, 13},
		{"zero drain_timeout", "drain_timeout: 0s", "", "", "reactord.drain_timeout must be more than 0", 2, 18},
		{"duration without unit", "exec_timeout: 30", "", "", "reactord.exec_timeout must be a duration such as 30s", 2, 17},
		{"bool", "jetstream: sometimes", "", "", "reactord.jetstream must be true or false", 2, 14},
		{"integer", "queue: many", "", "", "reactord.queue must be an integer", 2, 10},
		{"empty string", "http: ''", "", "", "reactord.http must be a non-empty string", 2, 9},
		{"password in clear", "saltapi_password: hunter2", "", "", "reactord.saltapi_password would keep a secret in clear in the configuration: put it in a file only reactord can read and give its path as saltapi_password_file", 2, 3},
		{"token in clear", "nats_token: s3cret", "", "", "give its path as nats_token_file", 2, 3},
		{"store with a password", "store: mysql://salt:pw@db:3306/salt", "", "", "reactord.store holds a password in clear", 2, 10},
		{"unknown key near a setting", "htp: :9100", "", "", "unknown reactord setting \"htp\"; did you mean \"http\"?", 2, 3},
		{"unknown key near none", "frobnicate: 1", "", "", "unknown reactord setting \"frobnicate\" (docs/configuration.md lists the settings)", 2, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{"r.conf": "reactord:\n  " + c.src + "\n"})
			path := filepath.Join(dir, "r.conf")
			cfg, err := Load(path)
			if c.err != "" {
				prefix := path + ":" + itoa(c.line) + ":" + itoa(c.col) + ": "
				if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want %q%s", err, prefix, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.value
			if strings.HasSuffix(c.flag, "-file") && !filepath.IsAbs(want) {
				want = filepath.Join(dir, want)
			}
			got, ok := cfg.Settings.Flags[c.flag]
			if !ok || got.Value != want || len(cfg.Settings.Flags) != 1 {
				t.Fatalf("Flags = %+v, want %s=%q", cfg.Settings.Flags, c.flag, want)
			}
			if got.Pos.File != path || got.Pos.Line != 2 {
				t.Errorf("position %v", got.Pos)
			}
		})
	}
}

// TestStoreFileSetting: store_file is resolved against the configuration's
// folder; a store URL without a password is accepted in clear.
func TestStoreFileSetting(t *testing.T) {
	dir := write(t, map[string]string{"r.conf": "reactord:\n  store_file: store.url\n  store: sqlite:///var/lib/reactord/a.db\n"})
	cfg, err := Load(filepath.Join(dir, "r.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Settings.StoreFile != filepath.Join(dir, "store.url") || cfg.Settings.Store != "sqlite:///var/lib/reactord/a.db" {
		t.Fatalf("settings %+v", cfg.Settings)
	}
}

// TestEverySettingDocumented: every key of the reactord: section has a
// row in the configuration reference (docs/configuration.md, generated
// from the daemon's options) and a property in the schema, and neither
// lists a key the loader does not know (issue 10 #14).
func TestEverySettingDocumented(t *testing.T) {
	ref, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../schemas/reactor-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs struct {
			Settings struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"settings"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	section := string(ref)
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| (?:`-[a-z-]+` \\| )?`([a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		rows[m[1]] = true
	}
	keys := SettingKeys()
	for _, k := range keys {
		if !rows[k] {
			t.Errorf("docs/configuration.md has no row for reactord.%s", k)
		}
		if _, ok := schema.Defs.Settings.Properties[k]; !ok {
			t.Errorf("the schema has no property reactord.%s", k)
		}
	}
	for k := range schema.Defs.Settings.Properties {
		if !slices.Contains(keys, k) {
			t.Errorf("the schema has reactord.%s, which the loader does not know", k)
		}
	}
	for k := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("the README's table has reactord.%s, which the loader does not know", k)
		}
	}
}
