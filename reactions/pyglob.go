package reactions

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/reactord/reactord/matchers"
)

// PyGlob expands pattern as Python's glob.glob does, which is how Salt finds
// reaction files: `*`, `?` and `[...]` apply per path component with fnmatch
// rules, names starting with a dot match only a pattern starting with a dot,
// `**` is an ordinary `*`, and a pattern without magic yields itself when the
// path exists. Unlike Python, results are sorted, so merging by ID is
// deterministic.
func PyGlob(pattern string) []string {
	out := pyGlob(pattern, false)
	sort.Strings(out)
	return out
}

func hasMagic(s string) bool { return strings.ContainsAny(s, "*?[") }

// pySplit is os.path.split.
func pySplit(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/') + 1
	head, tail := p[:i], p[i:]
	if head != "" && strings.Trim(head, "/") != "" {
		head = strings.TrimRight(head, "/")
	}
	return head, tail
}

func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func pyGlob(pattern string, dironly bool) []string {
	dir, base := pySplit(pattern)
	if !hasMagic(pattern) {
		if base != "" {
			if lexists(pattern) {
				return []string{pattern}
			}
		} else if isDir(dir) {
			return []string{pattern}
		}
		return nil
	}
	if dir == "" {
		return glob1("", base, dironly)
	}
	var dirs []string
	if dir != pattern && hasMagic(dir) {
		dirs = pyGlob(dir, true)
	} else {
		dirs = []string{dir}
	}
	var out []string
	for _, d := range dirs {
		var names []string
		if hasMagic(base) {
			names = glob1(d, base, dironly)
		} else {
			names = glob0(d, base)
		}
		for _, n := range names {
			out = append(out, pyJoin(d, n))
		}
	}
	return out
}

func pyJoin(dir, name string) string {
	if dir == "" || strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

func glob0(dir, base string) []string {
	if base != "" {
		if lexists(pyJoin(dir, base)) {
			return []string{base}
		}
	} else if isDir(dir) {
		return []string{base}
	}
	return nil
}

func glob1(dir, pattern string, dironly bool) []string {
	d := dir
	if d == "" {
		d = "."
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	g := matchers.Compile(pattern)
	hiddenOK := strings.HasPrefix(pattern, ".")
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !hiddenOK && strings.HasPrefix(name, ".") {
			continue
		}
		if dironly {
			isdir := e.IsDir()
			if !isdir && e.Type()&os.ModeSymlink != 0 {
				isdir = isDir(filepath.Join(d, name))
			}
			if !isdir {
				continue
			}
		}
		if g.Match(name) {
			out = append(out, name)
		}
	}
	return out
}
