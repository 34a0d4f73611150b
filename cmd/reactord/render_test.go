package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderShowText: render --show-text prints, on stderr, the text each
// matched file renders to, numbered by line as errors "in the rendered
// text" count them (issue 10 #15). Stdout stays the JSON array.
func TestRenderShowText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sls string
		code      int
		stderr    string // $DIR is the files' folder
		stdout    string // a part of it
	}{
		{"values printed as Salt sees them",
			"{{- if .data.id }}\nx:\n  local.test.arg:\n    - tgt: {{ .data.id }}\n    - arg: [{{ .data.n }}, {{ .data.ok }}]\n{{- end }}\n",
			exitOK,
			"--- $DIR/r.sls (rendered)\n   1  \n   2  x:\n   3    local.test.arg:\n   4      - tgt: web1\n   5      - arg: [3, True]\n",
			`"tgt": "web1"`},
		{"a YAML error: the text and the error with both lines",
			"{{- range list \"a\" \"b\" }}\nr_{{ . }}:\n  local.test.ping:\n    - tgt: {{ $.data.id }}\n{{- end }}\n   - arg: [x]\n",
			exitFound,
			"--- $DIR/r.sls (rendered)\n   1  \n   2  r_a:\n   3    local.test.ping:\n   4      - tgt: web1\n   5  r_b:\n   6    local.test.ping:\n   7      - tgt: web1\n   8     - arg: [x]\n" +
				"$DIR/r.sls:8:4: did not find expected key (in the rendered text, from line 6 of the template)\n",
			"[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"reactor.conf": "reactor:\n  - 'a/*':\n    - r.sls\n",
				"r.sls":        c.sls,
			})
			code, out, errOut := runCmd(t, "", "render", "-c", filepath.Join(dir, "reactor.conf"), "--show-text", "--tag", "a/b", "--data", `{"id": "web1", "n": 3, "ok": true}`)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			if want := strings.ReplaceAll(c.stderr, "$DIR", dir); errOut != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
			}
			if !strings.Contains(out, c.stdout) {
				t.Errorf("stdout %q lacks %q", out, c.stdout)
			}
		})
	}
}

// TestRenderSaysForged: render of a forged minion event prints no
// reaction and says why on stderr.
func TestRenderSaysForged(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, "", "render", "-c", "../../reactor.conf.example", "--tag", "salt/minion/web1/start",
		"--data", `{"id": "web2", "cmd": "_minion_event"}`)
	if code != exitOK || strings.TrimSpace(out) != "[]" ||
		!strings.Contains(errOut, "salt/minion/web1/start: forged event: minion web2 sent an event naming minion web1") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// The genuine event renders.
	code, out, _ = runCmd(t, "", "render", "-c", "../../reactor.conf.example", "--tag", "salt/minion/web1/start",
		"--data", `{"id": "web1", "cmd": "_minion_event"}`)
	if code != exitOK || !strings.Contains(out, `"tgt": "web1"`) {
		t.Errorf("genuine start: exit %d\n%s", code, out)
	}
}
