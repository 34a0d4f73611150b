package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertCLI checks reactord convert: stdout without -w; -w rewrites
// the file keeping FILE.orig; a refused file is not written and exits 1
// with its positioned problems; usage errors exit 2.
func TestConvertCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sls")
	bad := filepath.Join(dir, "bad.sls")
	goodSrc := "#!jinja|yaml\n{% if data['act'] == 'accept' %}\naccept:\n  wheel.key.accept:\n    - match: {{ data['id'] }}\n{% endif %}\n"
	badSrc := "{{ salt['pillar.get']('x') }}\n{{ grains.id }}\n"
	for p, s := range map[string]string{good: goodSrc, bad: badSrc} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := "#!gotmpl|yaml\n{{ if (pyEq .data.act \"accept\") }}\naccept:\n  wheel.key.accept:\n    - match: {{ pyStr .data.id }}\n{{ end }}\n"

	code, out, errOut := runCmd(t, "", "convert", good)
	if code != 0 || out != want || !strings.Contains(errOut, "good.sls: converted") {
		t.Errorf("convert FILE: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, _, errOut = runCmd(t, "", "convert", "-w", dir)
	if code != 1 {
		t.Errorf("convert -w DIR: code %d, want 1 (one file refused); stderr %s", code, errOut)
	}
	for _, w := range []string{"bad.sls: refused: 2 problem(s)", "bad.sls:1:4: salt['pillar.get'](...)", "bad.sls:2:4: grains.id", "good.sls: converted"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if b, _ := os.ReadFile(good); string(b) != want {
		t.Errorf("good.sls after -w:\n%s", b)
	}
	if b, _ := os.ReadFile(good + ".orig"); string(b) != goodSrc {
		t.Errorf("good.sls.orig:\n%s", b)
	}
	if b, _ := os.ReadFile(bad); string(b) != badSrc {
		t.Errorf("refused bad.sls was rewritten:\n%s", b)
	}
	if _, err := os.Stat(bad + ".orig"); err == nil {
		t.Error("refused bad.sls got a .orig")
	}

	if code, _, _ := runCmd(t, "", "convert"); code != 2 {
		t.Errorf("convert without files: code %d, want 2", code)
	}
	if code, _, _ := runCmd(t, "", "convert", filepath.Join(dir, "missing.sls")); code != 2 {
		t.Errorf("convert of a missing file: code %d, want 2", code)
	}
}
