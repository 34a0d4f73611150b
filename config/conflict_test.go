package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeConflicts: two master.d files with the same tag glob and
// reaction files merge as Salt merges them when they are identical (one
// kept, a warning naming both positions); when their reactord options
// differ — a mapping-form rule beside a plain one — it is an error naming
// both positions, not a silent drop of the second rule's options.
func TestMergeConflicts(t *testing.T) {
	cases := []struct {
		name     string
		a, b     string
		wantErr  string
		wantWarn string
	}{
		{
			name:     "identical plain rules",
			a:        "reactor:\n  - 'x': one.sls\n",
			b:        "reactor:\n  - 'x': one.sls\n",
			wantWarn: "20-b.conf:2:5: rule \"x\" repeats the rule at ",
		},
		{
			name:    "mapping form with when beside a plain rule",
			a:       "reactor:\n  - 'x': one.sls\n",
			b:       "reactor:\n  - 'x':\n      sls: one.sls\n      when: data.id == 'web1'\n",
			wantErr: "20-b.conf:2:5: rule \"x\" conflicts with the rule at ",
		},
		{
			name:    "mapping form whose when does not compile",
			a:       "reactor:\n  - 'x': one.sls\n",
			b:       "reactor:\n  - 'x':\n      sls: one.sls\n      when: data.id ==\n",
			wantErr: "conflicts with the rule at ",
		},
		{
			name:    "two different throttles",
			a:       "reactor:\n  - 'x':\n      sls: one.sls\n      throttle: {count: 1, per: 1m}\n",
			b:       "reactor:\n  - 'x':\n      sls: one.sls\n      throttle: {count: 2, per: 1m}\n",
			wantErr: "conflicts with the rule at ",
		},
		{
			name:     "identical mapping forms",
			a:        "reactor:\n  - 'x':\n      sls: one.sls\n      debounce: 5s\n",
			b:        "reactor:\n  - 'x':\n      sls: one.sls\n      debounce: 5s\n",
			wantWarn: "repeats the rule at ",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{"master.d/10-a.conf": c.a, "master.d/20-b.conf": c.b, "one.sls": "x: {}\n"})
			cfg, err := Load(filepath.Join(dir, "master.d"))
			first := filepath.Join(dir, "master.d", "10-a.conf") + ":2:5"
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), first) {
					t.Fatalf("err = %v; want %q naming %s", err, c.wantErr, first)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Rules) != 1 {
				t.Errorf("%d rules, want 1", len(cfg.Rules))
			}
			var warns []string
			for _, w := range cfg.Warnings {
				warns = append(warns, w.Error())
			}
			all := strings.Join(warns, "\n")
			if !strings.Contains(all, c.wantWarn) || !strings.Contains(all, first) {
				t.Fatalf("warnings = %q; want %q naming %s", all, c.wantWarn, first)
			}
		})
	}
}
