package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTopLevelTypos(t *testing.T) {
	for _, tc := range []struct {
		conf, want string
	}{
		{"reactors:\n  - 'x': one.sls\n", `top-level key "reactors" is not read; did you mean "reactor"?`},
		{"reacter:\n  - 'x': one.sls\n", `did you mean "reactor"?`},
		{"reactor: []\nreactrod:\n  driver: exec\n", `"reactrod" is not read; did you mean "reactord"?`},
		{"reactor: []\nfile_root:\n  base: [/srv/salt]\n", `did you mean "file_roots"?`},
		{"reactor: []\nincludes: x.conf\n", `did you mean "include"?`},
		{"reactor: []\nworker_threads: 5\nreactor_refresh_interval: 60\ninterface: 0.0.0.0\n", ""},
		{"reactor: []\nreact: 1\n", `"react" is not read; did you mean "reactor"?`},
	} {
		dir := write(t, map[string]string{"master": tc.conf})
		cfg, err := Load(filepath.Join(dir, "master"))
		if err != nil {
			t.Fatalf("%q: %v", tc.conf, err)
		}
		var all []string
		for _, w := range cfg.Warnings {
			all = append(all, w.Error())
		}
		got := strings.Join(all, "\n")
		if tc.want == "" {
			if got != "" {
				t.Errorf("%q: warnings %q, want none", tc.conf, got)
			}
			continue
		}
		if !strings.Contains(got, tc.want) || !strings.Contains(got, filepath.Join(dir, "master")+":") {
			t.Errorf("%q: warnings %q, want %q with the position", tc.conf, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"reactor", "reactor", 0}, {"reactors", "reactor", 1}, {"reactrod", "reactord", 1}, {"reactrod", "reactor", 2}, {"reacter", "reactor", 1}, {"worker_threads", "reactor", 3}, {"", "abc", 3}} {
		if got := editDistance(tc.a, tc.b, 2); got != min(tc.want, 3) {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, min(tc.want, 3))
		}
	}
}
