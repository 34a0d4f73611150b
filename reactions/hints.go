package reactions

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/jinja/py"
)

// unclosedBlockError turns text/template's "unexpected EOF", which names
// the end of the file, into an error at the {{ if }}, {{ range }},
// {{ with }}, {{ define }} or {{ block }} that lacks its {{ end }}. Other
// errors are returned as they are.
func unclosedBlockError(src string, err error) error {
	var pe *PosError
	if !errors.As(err, &pe) || pe.Msg != "unexpected EOF" {
		return err
	}
	blocks := unclosedBlocks(src)
	if len(blocks) == 0 {
		return err
	}
	b := blocks[len(blocks)-1]
	msg := fmt.Sprintf("this {{ %s }} has no {{ end }} (the template ends at %d:%d); add {{ end }} where the block stops", b.kw, pe.Line, pe.Col)
	for i := len(blocks) - 2; i >= 0; i-- {
		msg += fmt.Sprintf("; the {{ %s }} at %d:%d has none either", blocks[i].kw, blocks[i].line, blocks[i].col)
	}
	return &PosError{Pos: position.Pos{File: pe.File, Line: b.line, Col: b.col}, Err: err, Msg: msg}
}

// openBlock is a block action of a template: its keyword and position.
type openBlock struct {
	kw        string
	line, col int
}

// unclosedBlocks scans the actions of a template source (default
// delimiters) and returns the blocks left open at its end, outermost
// first.
func unclosedBlocks(src string) []openBlock {
	type open struct {
		off int
		kw  string
	}
	var stack []open
	for i := 0; ; {
		j := strings.Index(src[i:], "{{")
		if j < 0 {
			break
		}
		start := i + j
		k := start + 2
		body := k
		if strings.HasPrefix(src[k:], "- ") || strings.HasPrefix(src[k:], "-\t") || strings.HasPrefix(src[k:], "-\n") {
			body = k + 1
		}
		end := actionEnd(src, body)
		if end < 0 {
			break
		}
		word := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(src[body:end]), "-"))
		if f := strings.Fields(word); len(f) > 0 {
			switch f[0] {
			case "if", "range", "with", "define", "block":
				stack = append(stack, open{start, f[0]})
			case "end":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		}
		i = end + 2
	}
	out := make([]openBlock, len(stack))
	for i, o := range stack {
		out[i] = openBlock{kw: o.kw, line: 1 + strings.Count(src[:o.off], "\n"),
			col: 1 + len([]rune(src[strings.LastIndexByte(src[:o.off], '\n')+1:o.off]))}
	}
	return out
}

// actionEnd returns the offset of the "}}" closing the action whose text
// starts at i, skipping strings, raw strings, characters and comments, or
// -1.
func actionEnd(src string, i int) int {
	for i < len(src) {
		switch c := src[i]; {
		case strings.HasPrefix(src[i:], "}}"):
			return i
		case strings.HasPrefix(src[i:], "/*"):
			e := strings.Index(src[i+2:], "*/")
			if e < 0 {
				return -1
			}
			i += e + 4
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '`':
			e := strings.IndexByte(src[i+1:], '`')
			if e < 0 {
				return -1
			}
			i += e + 2
		default:
			i++
		}
	}
	return -1
}

// missingKey matches text/template's error for a missing map key, after
// the position: `executing "NAME" at <.data.a.b>: map has no entry for
// key "a"`.
var missingKey = regexp.MustCompile(`at <(\.[A-Za-z0-9_.]+)>: map has no entry for key "([^"]*)"$`)

// missingKeyHint adds to a missing-key error how to read an optional key:
// dig with a default, or hasKey.
func missingKeyHint(msg string) string {
	m := missingKey.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	fields := strings.Split(strings.TrimPrefix(m[1], "."), ".")
	idx := -1
	for i, f := range fields {
		if f == m[2] {
			idx = i
		}
	}
	if idx < 0 {
		return msg
	}
	parent := "." + strings.Join(fields[:idx], ".")
	var keys []string
	for _, f := range fields[idx:] {
		keys = append(keys, fmt.Sprintf("%q", f))
	}
	return fmt.Sprintf(`%s; for a key an event may lack, use {{ dig %s "" %s }} (a default instead of the error) or test it with {{ if hasKey %s %q }}`,
		msg, strings.Join(keys, " "), parent, parent, m[2])
}

// RenderText renders the file for one event and returns the text Salt
// would load as YAML: the template's output with every printed value as
// it prints (Jinja's spelling). For a plain YAML file it is the file. An
// error of the template itself is returned as Render returns it.
func (f *File) RenderText(tag string, data map[string]any) ([]byte, error) {
	if f.tmpl == nil {
		return append([]byte(nil), f.static...), nil
	}
	var out []byte
	err := f.tmpl.execute(map[string]any{"tag": tag, "data": data}, f.limits, func(text []byte, vals []recorded) error {
		out = placeholderRe.ReplaceAllFunc(text, func(ph []byte) []byte {
			i, err := strconv.Atoi(string(ph[len(sentinel) : len(ph)-1]))
			if err != nil || i >= len(vals) {
				return ph
			}
			if vals[i].kind != rawValue {
				return []byte(vals[i].text)
			}
			return []byte(py.Text(vals[i].v))
		})
		return nil
	})
	return out, err
}

// placeholderRe matches the placeholders printed values stand as.
var placeholderRe = regexp.MustCompile(regexp.QuoteMeta(sentinel) + `[0-9]+_`)
