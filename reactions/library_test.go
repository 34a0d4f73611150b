package reactions

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLibraryReloadsChangedFiles checks that a template is compiled once and
// recompiled when its file changes on disk, and that a broken edit is
// reported with its position until it is fixed.
func TestLibraryReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.sls")
	write := func(src string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write("a:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", base)
	lib := NewLibrary()
	lib.CheckEvery = time.Nanosecond
	f1, err := lib.File(path)
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := lib.File(path)
	if f1 != f2 {
		t.Fatal("unchanged file was compiled again")
	}

	write("b:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", base.Add(time.Minute))
	f3, err := lib.File(path)
	if err != nil {
		t.Fatal(err)
	}
	if f3 == f1 {
		t.Fatal("changed file was not recompiled")
	}
	rs, err := f3.Render("t", map[string]any{"id": "web1"})
	if err != nil || len(rs) != 1 || rs[0].ID != "b" {
		t.Fatalf("render after reload: %+v %v", rs, err)
	}

	write("b:\n  local.test.ping:\n    - tgt: {{ .data.id \n", base.Add(2*time.Minute))
	if _, err := lib.File(path); err == nil {
		t.Fatal("broken edit not reported")
	} else if want := path + ":4:1: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("error %q lacks position %q", err, want)
	}

	os.Remove(path)
	if _, err := lib.File(path); err == nil {
		t.Fatal("deleted file not reported")
	}
}

func TestPyGlob(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.sls", "b.sls", ".hidden.sls", "sub/c.sls", "sub/deep/d.sls", "x.txt"} {
		p := filepath.Join(dir, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		pattern string
		want    []string
	}{
		{"*.sls", []string{"a.sls", "b.sls"}},
		{".*.sls", []string{".hidden.sls"}},
		{"?.sls", []string{"a.sls", "b.sls"}},
		{"[!a].sls", []string{"b.sls"}},
		{"**/*.sls", []string{"sub/c.sls"}},
		{"*/*.sls", []string{"sub/c.sls"}},
		{"sub/*/*.sls", []string{"sub/deep/d.sls"}},
		{"a.sls", []string{"a.sls"}},
		{"missing.sls", nil},
		{"*.nope", nil},
	}
	for _, c := range cases {
		got := PyGlob(filepath.Join(dir, c.pattern))
		var want []string
		for _, w := range c.want {
			want = append(want, filepath.Join(dir, w))
		}
		if len(got) != len(want) {
			t.Errorf("%s: got %q, want %q", c.pattern, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: got %q, want %q", c.pattern, got, want)
			}
		}
	}
}
