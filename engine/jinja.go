package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/shebang"
	"github.com/reactord/reactord/jinja"
	"github.com/reactord/reactord/reactions"
)

// frontend is the reaction files' front end for a renderer mode
// (config.Settings.Renderer; "" is config.RendererAuto).
func frontend(mode string) reactions.Frontend {
	return func(path string, src []byte) (reactions.Loaded, error) { return load(mode, path, src) }
}

// load chooses a file's renderer and converts it from Jinja when that is
// what it is.
func load(mode, path string, src []byte) (reactions.Loaded, error) {
	pipe, hasShebang := shebang.Pipeline(string(src))
	switch pipe {
	case "yaml":
		return reactions.Loaded{Src: src, Renderer: "yaml (#!yaml)"}, nil
	case "gotmpl|yaml", "gotmpl":
		return reactions.Loaded{Src: src, Renderer: "gotmpl (#!" + pipe + ")"}, nil
	case "", "jinja|yaml", "jinja", "yaml|jinja":
	default:
		return reactions.Loaded{Src: src, Renderer: pipe}, nil // ParseFile refuses it
	}
	var how string
	switch {
	case mode == config.RendererGotmpl:
		return refuseJinja(path, src)
	case mode == config.RendererJinja:
		how = "jinja (renderer: jinja)"
	case hasShebang:
		how = "jinja (#!" + pipe + ")"
	default:
		if _, _, _, isJinja := jinjaMark(src); !isJinja && looksGoTemplate(src) {
			return reactions.Loaded{Src: src, Renderer: "gotmpl (detected)"}, nil
		}
		how = "jinja (Salt's default)"
	}
	return convertJinja(path, src, how)
}

// convertJinja converts a file in Salt's Jinja into a Go template, keeping
// its line numbers: the converted template's shebang is dropped for a file
// without one, since a Go template is what reactord compiles. A use of
// Salt's render-time names (salt, pillar, grains, opts) does not refuse
// the file: rendering fails where it reaches one.
func convertJinja(path string, src []byte, how string) (reactions.Loaded, error) {
	_, hasShebang := shebang.Pipeline(string(src))
	out, calls, err := jinja.ConvertWith(path, src, jinja.Options{DeferSalt: true, KeepLines: true})
	if err != nil {
		var errs jinja.Errors
		if errors.As(err, &errs) {
			hint := ""
			if looksGoTemplate(src) {
				hint = " (this file looks like a Go template: start it with #!gotmpl|yaml)"
			}
			list := make([]error, len(errs))
			for i, e := range errs {
				list[i] = &reactions.PosError{Pos: position.Pos{File: path, Line: e.Pos.Line, Col: e.Pos.Col},
					Msg: fmt.Sprintf("cannot load as Jinja (%s): %s: %s%s", how, e.Construct, e.Why, hint), Err: e}
			}
			return reactions.Loaded{}, errors.Join(list...)
		}
		return reactions.Loaded{}, err
	}
	if !hasShebang {
		_, out, _ = bytes.Cut(out, []byte("\n"))
	}
	return reactions.Loaded{Src: out, Translated: true, Renderer: how, SaltCalls: calls}, nil
}

// refuseJinja (renderer: gotmpl) leaves every file as it is, except one
// that uses Jinja: a statement or comment tag ({% %}, {# #}), or a {{ }}
// that reads data, tag, salt, pillar, grains or opts the Jinja way. That
// one is refused with an error that says so, rather than the Go template
// parser's puzzling one.
func refuseJinja(path string, src []byte) (reactions.Loaded, error) {
	line, col, what, ok := jinjaMark(src)
	if !ok {
		return reactions.Loaded{Src: src, Renderer: "gotmpl (renderer: gotmpl)"}, nil
	}
	return reactions.Loaded{}, &reactions.PosError{Pos: position.Pos{File: path, Line: line, Col: col}, Msg: fmt.Sprintf(
		"this looks like a Salt Jinja reaction file (%s), and renderer: gotmpl reads it as a Go template: remove that setting (or --renderer gotmpl) to load Jinja files as Salt does, or translate it once with `reactord convert -w %s`", what, path)}
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
// action that starts with a dot, a $variable, a Go keyword or a comment,
// or that reads .data or .tag as an argument ({{ dig "id" "" .data }},
// {{ index .data "id" }}): none of them is Jinja.
func looksGoTemplate(src []byte) bool {
	s := string(src)
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			return false
		}
		rest := strings.TrimLeft(strings.TrimPrefix(s[i+2:], "-"), " \t")
		for _, p := range []string{".", "$", "/*", "if ", "range ", "end", "with ", "else", "toJson ", "pyStr "} {
			if strings.HasPrefix(rest, p) {
				return true
			}
		}
		action := rest
		if j := strings.Index(action, "}}"); j >= 0 {
			action = action[:j]
		}
		for _, p := range []string{" .data", "(.data", " .tag", "(.tag", " $"} {
			if strings.Contains(action, p) {
				return true
			}
		}
		s = s[i+2:]
	}
}
