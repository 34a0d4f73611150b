package engine

import (
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
)

// TestTagProblems: globs that can never match a tag Salt emits are named,
// with the likely intended spelling; the others pass.
func TestTagProblems(t *testing.T) {
	for _, tc := range []struct {
		glob string
		want string // "" for none
	}{
		{"salt/minion/*/start", ""},
		{"salt/job/*/ret/*", ""},
		{"salt/beacon/*/inotify//etc/important_file", ""},
		{"salt/auth", ""},
		{"myco/custom/*", ""},
		{"salt/*/start", ""},
		{"*", ""},
		{"salt/run/*/ret", ""},
		{"salt/minon/*/start", "Salt has no salt/minon/ tags (did you mean salt/minion/?)"},
		{"salt/jobs/*/ret/*", "(did you mean salt/job/?)"},
		{"salt/foo/bar", "Salt has no salt/foo/ tags"},
		{"salt/job/*/return/*", "not /return"},
		{"salt/job/*/rets/*", "(did you mean /ret?)"},
		{"salt/beacon/*/inotify/etc/important_file", "inotify//etc/important_file"},
		{"salt/beacon/web1/inotify/*", ""},
	} {
		t.Run(tc.glob, func(t *testing.T) {
			errs := tagProblems(config.Rule{Glob: tc.glob, Pos: config.Pos{File: "r.conf", Line: 2, Col: 5}})
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("unexpected: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) || !strings.HasPrefix(errs[0].Error(), "r.conf:2:5: ") {
				t.Fatalf("got %v, want one positioned problem with %q", errs, tc.want)
			}
		})
	}
}
