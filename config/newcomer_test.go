package config

import (
	"path/filepath"
	"testing"
)

// TestNewcomerErrors: the configuration mistakes a new operator makes are
// reported where they are, with the fix in the message (issue 10 #15).
func TestNewcomerErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // the error after "PATH:"
	}{
		{"unquoted leading star", "reactor:\n  - *start:\n    - a.sls\n",
			"2:5: found undefined alias 'start': an unquoted * starts a YAML alias; quote the glob: '*start'"},
		{"unquoted star then slash", "reactor:\n  - */start:\n    - a.sls\n",
			"2:5: did not find expected alphabetic or numeric character: an unquoted * starts a YAML alias; quote the glob: '*/start'"},
		{"unquoted star at both ends", "reactor:\n  - 'a': x.sls\n  - *start*: a.sls\n",
			"3:5: did not find expected alphabetic or numeric character: an unquoted * starts a YAML alias; quote the glob: '*start*'"},
		{"unquoted star alone", "reactor:\n  - *:\n    - a.sls\n",
			"2:5: did not find expected alphabetic or numeric character: an unquoted * starts a YAML alias; quote the glob: '*'"},
		{"unclosed quote on line 4", "reactor:\n  - 'salt/minion/*/start':\n    - a.sls\n  - \"salt/auth:\n    - b.sls\n  - \"salt/x\":\n    - c.sls\n",
			"4:5: unclosed quote: the string this \" starts runs on to line 6 (mapping values are not allowed in this context); close it on line 4"},
		{"tab", "reactor:\n  - 'salt/minion/*/start':\n\t- a.sls\n",
			"3:1: found a tab character that cannot start any token: YAML does not allow tabs here; indent with spaces"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{"r.conf": c.src})
			path := filepath.Join(dir, "r.conf")
			_, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), path+":"+c.want; got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}
