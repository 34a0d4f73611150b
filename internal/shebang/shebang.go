// Package shebang reads the renderer pipeline a reaction file names on its
// first line, as Salt's renderer does (#!jinja|yaml, #!yaml, and reactord's
// #!gotmpl|yaml): one reading for the loader, the Jinja translator and the
// template compiler.
package shebang

import "strings"

// Pipeline returns the pipeline of src's first line without its blanks
// ("#!jinja | yaml" is "jinja|yaml"), and whether src has a shebang line.
func Pipeline(src string) (string, bool) {
	if !strings.HasPrefix(src, "#!") {
		return "", false
	}
	first, _, _ := strings.Cut(src, "\n")
	return strings.ReplaceAll(strings.TrimSpace(first[2:]), " ", ""), true
}
