package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/jinja"
	"github.com/reactord/reactord/reactions"
)

// frontend is the reaction files' front end for a configuration: with
// jinja on (--jinja, or jinja: true in the reactord: section) Salt's Jinja
// files are converted at load; without it a file that looks like Jinja is
// refused with one line that says so.
func frontend(jinjaOn bool) reactions.Frontend {
	if jinjaOn {
		return convertJinja
	}
	return refuseJinja
}

// renderer returns a file's renderer pipeline from its shebang line, with
// blanks removed ("" when it has none).
func renderer(src []byte) (string, bool) {
	if !bytes.HasPrefix(src, []byte("#!")) {
		return "", false
	}
	first, _, _ := bytes.Cut(src, []byte("\n"))
	return strings.ReplaceAll(strings.TrimSpace(string(first[2:])), " ", ""), true
}

// convertJinja converts a file in Salt's default renderer (no shebang,
// #!jinja|yaml) into a Go template; #!gotmpl|yaml and #!yaml files are
// left alone. A file without a shebang keeps its line numbers: the
// converted template's shebang is dropped, since a Go template is what
// reactord reads a file without one as.
func convertJinja(path string, src []byte) ([]byte, bool, error) {
	pipe, shebang := renderer(src)
	switch pipe {
	case "gotmpl|yaml", "gotmpl", "yaml":
		return src, false, nil
	}
	out, err := jinja.Convert(path, src)
	if errors.Is(err, jinja.ErrNotJinja) {
		return src, false, nil
	}
	if err != nil {
		var errs jinja.Errors
		if errors.As(err, &errs) {
			hint := ""
			if !shebang && looksGoTemplate(src) {
				hint = " (this file looks like a Go template: start it with #!gotmpl|yaml, which --jinja leaves as it is)"
			}
			list := make([]error, len(errs))
			for i, e := range errs {
				list[i] = &reactions.PosError{Pos: position.Pos{File: path, Line: e.Pos.Line, Col: e.Pos.Col},
					Msg: fmt.Sprintf("cannot convert from Jinja: %s: %s%s", e.Construct, e.Why, hint), Err: e}
			}
			return nil, false, errors.Join(list...)
		}
		return nil, false, err
	}
	if !shebang {
		_, out, _ = bytes.Cut(out, []byte("\n"))
	}
	return out, true, nil
}

// refuseJinja leaves every file as it is, except one in Salt's default
// renderer that uses Jinja: a statement or comment tag ({% %}, {# #}), or
// a {{ }} that reads data, tag, salt, pillar, grains or opts the Jinja way.
// That one is refused with an error naming --jinja and convert, rather than
// the Go template parser's puzzling one.
func refuseJinja(path string, src []byte) ([]byte, bool, error) {
	pipe, _ := renderer(src)
	switch pipe {
	case "", "jinja|yaml", "jinja", "yaml|jinja":
	default:
		return src, false, nil
	}
	line, col, what, ok := jinjaMark(src)
	if !ok {
		return src, false, nil
	}
	return nil, false, &reactions.PosError{Pos: position.Pos{File: path, Line: line, Col: col}, Msg: fmt.Sprintf(
		"this looks like a Salt Jinja reaction file (%s); reactord renders Go templates: run with --jinja (or jinja: true in the reactord: section) to load Jinja files as they are, or translate it once with `reactord convert -w %s` (a Go template that means it literally: start it with #!gotmpl|yaml)", what, path)}
}

// jinjaMark finds the first Jinja construct of a source: a statement or
// comment tag, or an expression tag that starts with a Jinja name.
func jinjaMark(src []byte) (line, col int, what string, ok bool) {
	s := string(src)
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		switch s[i+1] {
		case '%':
			if strings.Contains(s[i:], "%}") {
				what = "a {% " + firstWord(s[i+2:]) + " %} tag"
			}
		case '#':
			if strings.Contains(s[i:], "#}") {
				what = "a {# comment #}"
			}
		case '{':
			rest := strings.TrimLeft(strings.TrimPrefix(s[i+2:], "-"), " \t")
			for _, name := range []string{"data[", "data.", "data|", "data ", "data}", "tag ", "tag}", "tag|", "salt[", "salt.", "pillar", "grains", "opts"} {
				if strings.HasPrefix(rest, name) {
					what = "{{ " + strings.TrimRight(name, "[.| }") + "... }} reads the event the Jinja way (a Go template writes .data, .tag)"
					break
				}
			}
		}
		if what != "" {
			line = 1 + strings.Count(s[:i], "\n")
			col = 1 + len([]rune(s[strings.LastIndexByte(s[:i], '\n')+1:i]))
			return line, col, what, true
		}
	}
	return 0, 0, "", false
}

func firstWord(s string) string {
	s = strings.TrimLeft(strings.TrimPrefix(s, "-"), " \t")
	if i := strings.IndexAny(s, " \t\n%-"); i >= 0 {
		s = s[:i]
	}
	return s
}

// looksGoTemplate reports whether a source uses Go template syntax: an
// action that starts with a dot, a $variable or a Go keyword.
func looksGoTemplate(src []byte) bool {
	s := string(src)
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			return false
		}
		rest := strings.TrimLeft(strings.TrimPrefix(s[i+2:], "-"), " \t")
		for _, p := range []string{".", "$", "if ", "range ", "end", "with ", "else", "toJson ", "pyStr "} {
			if strings.HasPrefix(rest, p) {
				return true
			}
		}
		s = s[i+2:]
	}
}
