package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestOverlaid: deletions remove the first configuration rule left with
// their glob, additions come after with Added set, an ID of their own
// (another than a configuration rule of the same text) and relative files
// read from the configuration's folder; SaltList lists them as Salt does.
func TestOverlaid(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'a/*': [one.sls]\n  - 'b/*': [two.sls]\n  - 'a/*': [three.sls]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name    string
		added   []Added
		deleted []string
		want    []map[string][]string
	}{
		{"nothing", nil, nil, []map[string][]string{{"a/*": {"one.sls"}}, {"b/*": {"two.sls"}}, {"a/*": {"three.sls"}}}},
		{"delete the first", nil, []string{"a/*"}, []map[string][]string{{"b/*": {"two.sls"}}, {"a/*": {"three.sls"}}}},
		{"delete twice", nil, []string{"a/*", "a/*"}, []map[string][]string{{"b/*": {"two.sls"}}}},
		{"delete none", nil, []string{"c/*"}, []map[string][]string{{"a/*": {"one.sls"}}, {"b/*": {"two.sls"}}, {"a/*": {"three.sls"}}}},
		{"add after", []Added{{Glob: "b/*", Files: []string{"two.sls"}, At: at}}, []string{"b/*"},
			[]map[string][]string{{"a/*": {"one.sls"}}, {"a/*": {"three.sls"}}, {"b/*": {"two.sls"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := base.Overlaid(c.added, c.deleted)
			if l := got.SaltList(); !reflect.DeepEqual(l, c.want) {
				t.Errorf("SaltList: %v, want %v", l, c.want)
			}
			if len(base.Rules) != 3 {
				t.Errorf("the base changed: %d rules", len(base.Rules))
			}
			ids := map[string]bool{}
			for _, r := range got.Rules {
				if ids[r.ID] {
					t.Errorf("id %s twice", r.ID)
				}
				ids[r.ID] = true
			}
		})
	}
	got := base.Overlaid([]Added{{Glob: "a/*", Files: []string{"one.sls"}, At: at, Master: "m1"}}, nil)
	r := got.Rules[3]
	if r.Added == nil || r.Added.Master != "m1" || r.Pos.File != AddedSource || r.SLS[0].Pattern != filepath.Join(dir, "one.sls") {
		t.Errorf("added rule: %+v", r)
	}
	if r.ID == got.Rules[0].ID {
		t.Errorf("the added rule has the id of the configuration's rule of the same text: %s", r.ID)
	}
}
