package reactions

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLibraryReloadsChangedFiles checks that a template is compiled once and
// recompiled when its file changes on disk, and that a broken edit is
// reported with its position until it is fixed.
func TestLibraryReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.sls")
	write := func(src string, mtime time.Time) { t.Helper(); writeAt(t, path, src, mtime) }
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

// TestLibrarySettlesInPlaceWrites: a file rewritten in place is first
// truncated (empty, a valid file that renders nothing) and then written. A
// change younger than Settle is not used yet: the version before serves,
// so no render sees the empty file; once the file has stayed unchanged for
// Settle, its new version serves.
func TestLibrarySettlesInPlaceWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sls")
	at := func(src string, mtime time.Time) { t.Helper(); writeAt(t, path, src, mtime) }
	ids := func(lib *Library) string {
		t.Helper()
		f, err := lib.File(path)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := f.Render("t", map[string]any{"id": "web1"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprint(r.ID))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name   string
		settle time.Duration
		want   []string // the ids rendered: first, just truncated, written a moment ago, written long enough ago
	}{
		{"settle", time.Minute, []string{"a", "a", "a", "b"}},
		{"no settle", 0, []string{"a", "", "b", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			at("a:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", now.Add(-time.Hour))
			lib := NewLibrary()
			lib.CheckEvery, lib.Settle = time.Nanosecond, tc.settle
			var got []string
			got = append(got, ids(lib))
			at("", now.Add(-2*time.Millisecond)) // truncated in place
			got = append(got, ids(lib))
			at("b:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", now.Add(-time.Millisecond))
			got = append(got, ids(lib))
			at("b:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n", now.Add(-2*time.Minute))
			got = append(got, ids(lib))
			if !slices.Equal(got, tc.want) {
				t.Errorf("rendered %q, want %q", got, tc.want)
			}
		})
	}
}

// writeAt writes src to path with the modification time mtime.
func writeAt(t *testing.T, path, src string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
