package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestParseFlagsAnywhere: flags may follow the arguments, "--" ends them,
// "-" is an argument; a flag error prints the error and one line, asked-for
// help prints the flags.
func TestParseFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		ok       bool
		nats     string
		count    int
		rest     []string
		stderr   string // a fragment; "" for none
		stdoutIn string
	}{
		{"flags first", []string{"--nats", "u", "tag", "{}"}, true, "u", 0, []string{"tag", "{}"}, "", ""},
		{"flags after the arguments", []string{"tag", "{}", "--nats", "u", "--count", "3"}, true, "u", 3, []string{"tag", "{}"}, "", ""},
		{"flags between", []string{"tag", "--nats=u", "{}"}, true, "u", 0, []string{"tag", "{}"}, "", ""},
		{"after --, arguments", []string{"tag", "--", "--nats", "u"}, true, "", 0, []string{"tag", "--nats", "u"}, "", ""},
		{"- is an argument", []string{"-", "--count", "2"}, true, "", 2, []string{"-"}, "", ""},
		{"unknown flag after an argument", []string{"tag", "--natz", "u"}, false, "", 0, nil, "flag provided but not defined: -natz (did you mean --nats?)\nRun 'reactord help fire' for the flags.\n", ""},
		{"help", []string{"tag", "--help"}, false, "", 0, nil, "", "Usage: reactord fire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			fs := NewFlags("fire", "reactord fire [flags] TAG JSON", "Publishes one event.", &stderr)
			nats := fs.String("nats", "", "NATS URL")
			count := fs.Int("count", 0, "how many")
			ok, _ := ParseFlags(fs, tc.args, &stdout)
			if ok != tc.ok {
				t.Fatalf("ok = %v, stderr %q", ok, stderr.String())
			}
			if tc.stderr != "" && stderr.String() != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
			if tc.stdoutIn != "" && !strings.Contains(stdout.String(), tc.stdoutIn) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.stdoutIn)
			}
			if !ok {
				return
			}
			if *nats != tc.nats || *count != tc.count || !slices.Equal(fs.Args(), tc.rest) {
				t.Errorf("nats %q count %d args %q; want %q %d %q", *nats, *count, fs.Args(), tc.nats, tc.count, tc.rest)
			}
		})
	}
}
