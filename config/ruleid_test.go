package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuleIDs: a rule's ID is its id: option, else a hash of its glob and
// file references as written, the same wherever the files lie, with an
// occurrence number for the same text twice.
func TestRuleIDs(t *testing.T) {
	const conf = `reactor:
  - 'salt/minion/*/start':
    - /srv/reactor/start.sls
  - 'salt/minion/*/start':
      sls: /srv/reactor/start.sls
      throttle: {count: 1, per: 1h}
  - 'myco/*':
      id: custom-1
      sls: /srv/reactor/x.sls
`
	load := func() []Rule {
		dir := t.TempDir()
		p := filepath.Join(dir, "reactor.conf")
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Rules
	}
	a, b := load(), load()
	want := RuleID("salt/minion/*/start", []string{"/srv/reactor/start.sls"})
	if a[0].ID != want || a[1].ID != want+"-2" || a[2].ID != "custom-1" {
		t.Fatalf("ids %q %q %q, want %q, %q-2, custom-1", a[0].ID, a[1].ID, a[2].ID, want, want)
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			t.Errorf("rule %d: %q in one directory, %q in another", i, a[i].ID, b[i].ID)
		}
	}
	if RuleID("a", []string{"b", "c"}) == RuleID("a", []string{"bc"}) {
		t.Error("file references are not told apart")
	}
}

// TestRuleIDErrors: an id: used twice or holding other characters is an
// error at its position.
func TestRuleIDErrors(t *testing.T) {
	for _, c := range []struct{ conf, want string }{
		{"reactor:\n  - 'a/*': {id: x, sls: /a.sls}\n  - 'b/*': {id: x, sls: /b.sls}\n", `rule id "x" is already`},
		{"reactor:\n  - 'a/*': {id: 'a b', sls: /a.sls}\n", "id must be"},
	} {
		p := filepath.Join(t.TempDir(), "reactor.conf")
		if err := os.WriteFile(p, []byte(c.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "reactor.conf:") {
			t.Errorf("%q: %v, want an error with %q and its position", c.conf, err, c.want)
		}
	}
}
