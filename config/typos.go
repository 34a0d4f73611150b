package config

import (
	"fmt"

	"github.com/reactord/reactord/internal/suggest"
	"github.com/reactord/reactord/internal/yaml11"
)

// typoTargets are the top-level keys reactord reads; a key a letter or two
// away from one of them is most likely a typo (`reactors:` loads no rule).
var typoTargets = []string{"reactor", "reactord", "file_roots", "include", "default_include"}

// typos warns about top-level keys of one file that are not keys reactord
// reads but are within two edits of one. A master configuration holds
// hundreds of other Salt keys, which are left alone.
func (l *loader) typos(d *doc) {
	if d.root == nil || d.root.Kind != yaml11.MappingNode {
		return
	}
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		k := d.root.Content[i]
		key, ok := scalarString(k)
		if !ok || contains(typoTargets, key) {
			continue
		}
		best, dist := "", 3
		for _, t := range typoTargets {
			if d := editDistance(key, t, 2); d < dist {
				best, dist = t, d
			}
		}
		if best != "" {
			l.warnf(d.path, k, "top-level key %q is not read; did you mean %q? (as written, it is ignored)", key, best)
		}
	}
}

// editDistance is the edit distance of a and b (insertions, deletions,
// substitutions and swaps of neighbours each count 1), or limit+1 once it
// is known to exceed limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		rowMin := rows[i][0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
			rowMin = min(rowMin, d)
		}
		if rowMin > limit {
			return limit + 1
		}
	}
	return min(rows[len(a)][len(b)], limit+1)
}

// unknownSetting is the error of a reactord: key that is no setting: the
// setting it is near, else where the settings are listed (not all ~70
// of them in one line).
func unknownSetting(key string) string {
	if near := suggest.Closest(key, SettingKeys()); near != "" {
		return fmt.Sprintf("unknown reactord setting %q; did you mean %q?", key, near)
	}
	return fmt.Sprintf("unknown reactord setting %q (docs/configuration.md lists the settings)", key)
}
