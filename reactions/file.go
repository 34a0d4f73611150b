package reactions

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/shebang"
	"github.com/reactord/reactord/internal/yaml11"
	"github.com/reactord/reactord/jinja/py"
)

// maxSkeletons bounds the per-file cache of parsed skeletons. A template
// whose shape depends on data (a range over a list) has one skeleton per
// distinct shape; beyond the bound, shapes are parsed per event.
const maxSkeletons = 1024

// maxSkeletonText and maxSkeletonBytes bound what the skeleton cache keeps
// per file: shapes larger than the first are parsed per event, and the
// cache stops growing past the second.
const (
	maxSkeletonText  = 64 << 10
	maxSkeletonBytes = 8 << 20
)

// File is one reaction file: its template, compiled once, and the skeletons
// of the shapes it has rendered.
type File struct {
	// Path is the file's path, which becomes each reaction's __sls__.
	Path string
	// Translated is set when a front end (Library.Frontend) translated the
	// file's source before it was compiled: a Salt Jinja file loaded as it
	// is. Source is then the Go template it became.
	Translated bool
	Source     []byte
	// Renderer says how the file is read, as a front end named it (for
	// check): "jinja (Salt's default)", "gotmpl (detected)", ...
	Renderer string
	// SaltCalls counts the uses of Salt's render-time names (salt,
	// pillar, grains, opts) the file loaded with: rendering fails where
	// it reaches one.
	SaltCalls int
	tmpl      *Template
	static    []byte // a #!yaml file: no template
	// limits bound each render (ParseFileWith; defaults filled in).
	limits Limits

	mu        sync.RWMutex
	skels     map[string]skelResult
	skelBytes int
}

type skelResult struct {
	sk  *skeleton
	err error
}

// Reaction is one reaction ID from a rendered file, after Salt's pad_funcs
// and with __sls__ stamped.
type Reaction struct {
	// ID is the reaction ID as YAML typed it; Salt requires a string.
	ID any
	// Body maps each reaction type (local, runner, wheel, caller, cmd) to
	// its argument list, plus __sls__.
	Body *event.Map
	// File, Line and Col locate the ID in the rendered file.
	File      string
	Line, Col int
	// Warnings are parts of the reaction Salt drops silently.
	Warnings []error
	// targets are its tgt arguments that hold values printed by the
	// template (CheckLiteralTarget).
	targets []printedTarget
}

// ParseFile compiles a reaction file's source. A first line `#!yaml` marks a
// file as plain YAML; `#!jinja|yaml`, `#!gotmpl|yaml` or no shebang means a Go
// template; any other renderer is an error. Its renders are bounded by
// DefaultLimits.
func ParseFile(path string, src []byte) (*File, error) { return ParseFileWith(path, src, Limits{}) }

// ParseFileWith is ParseFile with the bounds of each render (zero fields:
// DefaultLimits).
func ParseFileWith(path string, src []byte, lim Limits) (*File, error) {
	lim = lim.withDefaults()
	text := string(src)
	if pipeline, ok := shebang.Pipeline(text); ok {
		switch pipeline {
		case "yaml":
			return &File{Path: path, static: src, skels: map[string]skelResult{}, limits: lim}, nil
		case "jinja|yaml", "gotmpl|yaml", "jinja", "gotmpl", "yaml|jinja", "":
		default:
			why := ""
			if strings.HasPrefix(pipeline, "py") || strings.HasPrefix(pipeline, "pyobjects") {
				why = " (a #!py file is Python run inside Salt's master; reactord runs no Python: rewrite it as Jinja, calling Salt with salt['mod.fun'](...))"
			}
			return nil, &PosError{Pos: position.Pos{File: path, Line: 1, Col: 1}, Msg: fmt.Sprintf("renderer pipeline %q is not supported: reactord renders Salt's Jinja (#!jinja|yaml, the default), Go templates (#!gotmpl|yaml) and plain YAML (#!yaml)%s", pipeline, why)}
		}
	}
	t, err := ParseTemplate(path, text)
	if err != nil {
		return nil, err
	}
	return &File{Path: path, tmpl: t, skels: map[string]skelResult{}, limits: lim}, nil
}

// Static reports whether the file's output cannot depend on the event: plain
// YAML, or a template with nothing but text.
func (f *File) Static() bool { return f.tmpl == nil || f.tmpl.actions == 0 }

// skeleton returns the parsed skeleton for rendered text, from the cache
// when this shape was seen before.
func (f *File) skeleton(text []byte) (*skeleton, error) {
	f.mu.RLock()
	r, ok := f.skels[string(text)]
	f.mu.RUnlock()
	if ok {
		return r.sk, r.err
	}
	sk, err := parseSkeleton(text)
	if err != nil {
		var ye *yaml11.Error
		if errors.As(err, &ye) {
			pe := &PosError{Pos: position.Pos{File: f.Path, Line: ye.Line, Col: max(ye.Column, 1)}, Msg: ye.Msg + " (in the rendered text)", Err: err}
			if f.tmpl != nil {
				pe.Err = inRendered{err}
			}
			err = pe
		} else {
			err = &PosError{Pos: position.Pos{File: f.Path, Line: 1, Col: 1}, Msg: err.Error(), Err: err}
		}
	}
	f.mu.Lock()
	if len(f.skels) < maxSkeletons && len(text) <= maxSkeletonText && f.skelBytes+len(text) <= maxSkeletonBytes {
		f.skels[string(text)] = skelResult{sk, err}
		f.skelBytes += len(text)
	}
	f.mu.Unlock()
	return sk, err
}

// Render renders the file for one event and returns its reactions after
// pad_funcs, in file order. Any error drops the whole file, as in Salt.
func (f *File) Render(tag string, data map[string]any) ([]Reaction, error) {
	return f.render(map[string]any{"tag": tag, "data": data})
}

// RenderOptions are what a render may see beyond its event.
type RenderOptions struct {
	// Events, when set, are the events a rule's collect option gathered
	// ({"tag", "data"} maps, in the order they came; tag and data are the
	// last one's): `.events` in a Go template, `events` in Jinja.
	Events []any
	// Salt, when set, serves the file's salt['mod.fun'](...) calls.
	Salt *SaltSession
}

// RenderWith renders the file for one event with o.
func (f *File) RenderWith(tag string, data map[string]any, o RenderOptions) ([]Reaction, error) {
	ctx := map[string]any{"tag": tag, "data": data}
	if o.Events != nil {
		ctx["events"] = o.Events
	}
	if o.Salt != nil {
		ctx[saltSessionKey] = o.Salt
	}
	return f.render(ctx)
}

func (f *File) render(ctx map[string]any) ([]Reaction, error) {
	lim := f.limits
	var out []Reaction
	use := func(text []byte, vals []recorded) error {
		if len(bytes.TrimSpace(text)) == 0 {
			return nil
		}
		sk, err := f.skeleton(text)
		if err != nil {
			return err
		}
		if sk.root == nil {
			return nil
		}
		out, err = f.reactions(sk.root, vals, lim.Bytes)
		return err
	}
	var err error
	if f.tmpl == nil {
		err = use(f.static, nil)
	} else {
		err = f.tmpl.execute(ctx, lim, use)
	}
	if err != nil {
		if f.Translated {
			err = jinjaExecError(jinjaMissingKey(err))
		}
		return nil, err
	}
	return out, nil
}

// goMissingKey matches a missing-key error of a template, with the hint
// missingKeyHint gives: `executing "NAME" at <.data.a.b>: map has no
// entry for key "b"; ...`.
var goMissingKey = regexp.MustCompile(`^executing "[^"]*" at <\$?\.([A-Za-z0-9_.]+)>: map has no entry for key "([^"]*)"`)

// jinjaMissingKey rewrites the missing-key error of a file converted from
// Jinja in the terms of the file its author wrote: Jinja's message under
// Salt's StrictUndefined, and the Jinja ways to read an optional key.
func jinjaMissingKey(err error) error {
	var pe *PosError
	if !errors.As(err, &pe) {
		return err
	}
	m := goMissingKey.FindStringSubmatch(pe.Msg)
	if m == nil {
		return err
	}
	fields := strings.Split(m[1], ".")
	idx := -1 // the key read, the last one of that name past the root (as missingKeyHint reads it)
	for i := len(fields) - 1; i >= 1; i-- {
		if fields[i] == m[2] {
			idx = i
			break
		}
	}
	if idx < 1 {
		return err
	}
	expr := jinjaPath(fields[:idx])
	msg := fmt.Sprintf("%s[%s] is undefined: 'dict object' has no attribute %s (Salt's StrictUndefined fails the file too); for a key an event may lack, use %s.get(%s, default) or test %s in %s",
		expr, pyQuote(m[2]), pyQuote(m[2]), expr, pyQuote(m[2]), pyQuote(m[2]), expr)
	return &PosError{Pos: position.Pos{File: pe.File, Line: pe.Line, Col: pe.Col}, Msg: msg, Err: pe.Err}
}

// jinjaPath spells a Go template field chain (data, x, y) as the Jinja
// expression that reads it: data['x']['y'].
func jinjaPath(fields []string) string {
	expr := fields[0]
	for _, f := range fields[1:] {
		expr += fmt.Sprintf("[%s]", pyQuote(f))
	}
	return expr
}

// goNoEntry is text/template's whole message for a key a map lacks.
var goNoEntry = regexp.MustCompile(`^map has no entry for key "([^"]*)"$`)

// goExec matches text/template's execution error, after the position:
// `executing "NAME" at <ACTION>: MSG`.
var goExec = regexp.MustCompile(`(?s)^executing "[^"]*" at <(.*?)>: (.*)$`)

// goNoField matches the error of a field read on a value that is not a
// map: `can't evaluate field y in type interface {}`.
var goNoField = regexp.MustCompile(`^can't evaluate field (\S+) in type (.*)$`)

// goTypes names Go's types in an error as Jinja names them.
var goTypes = map[string]string{"string": "str", "int64": "int", "int": "int", "float64": "float", "bool": "bool", "[]interface {}": "list"}

// jinjaExecError rewrites the other execution errors of a file converted
// from Jinja without what the conversion generated: the file's name again
// and the Go action are left out, and a helper's error ("error calling
// pyIndex: TypeError: ...") keeps only its Python message.
func jinjaExecError(err error) error {
	var pe *PosError
	if !errors.As(err, &pe) {
		return err
	}
	m := goExec.FindStringSubmatch(pe.Msg)
	if m == nil {
		return err
	}
	msg := m[2]
	if _, rest, ok := strings.Cut(msg, "error calling "); ok && strings.HasPrefix(msg, "error calling ") {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			msg = after
		}
	} else if k := goNoEntry.FindStringSubmatch(msg); k != nil {
		// A dict that is not the event's (a Salt call's answer: grains,
		// pillar, opts) read with a key it lacks: StrictUndefined's words.
		msg = fmt.Sprintf("'dict object' has no attribute %s", pyQuote(k[1]))
	} else if f := goNoField.FindStringSubmatch(msg); f != nil {
		if py, ok := goTypes[f[2]]; ok {
			msg = fmt.Sprintf("'%s object' has no attribute %s", py, pyQuote(f[1]))
		} else {
			fields := strings.Split(strings.TrimPrefix(strings.TrimPrefix(m[1], "$"), "."), ".")
			if i := slices.Index(fields, f[1]); i > 0 {
				fields = fields[:i]
			}
			expr := jinjaPath(fields)
			msg = fmt.Sprintf("%s has no attribute %s: it is not a dict", expr, pyQuote(f[1]))
		}
	}
	return &PosError{Pos: pe.Pos, Msg: msg, Err: pe.Err}
}

// pyQuote spells a string as Python's repr does for plain text.
func pyQuote(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func (f *File) errorf(n *pnode, format string, args ...any) error {
	return &PosError{Pos: position.Pos{File: f.Path, Line: n.line, Col: max(n.col, 1)}, Msg: fmt.Sprintf(format, args...)}
}

// reactions materializes the top level and applies pad_funcs. The values
// filled in may total at most budget bytes, however often YAML aliases
// repeat them.
func (f *File) reactions(root *pnode, vals []recorded, budget int) ([]Reaction, error) {
	if err := f.rootError(root); err != nil {
		return nil, err
	}
	m := &materializer{vals: vals, budget: budget, limit: budget, file: f.Path, reprStructs: f.Translated}
	out := make([]Reaction, 0, len(root.content)/2)
	var seen keySet
	for i := 0; i+1 < len(root.content); i += 2 {
		kn, vn := root.content[i], root.content[i+1]
		if kn.kind != pScalar {
			return nil, f.errorf(kn, "found unhashable key (a mapping or list used as a reaction ID, possible double curly-brace)")
		}
		id, err := m.scalar(kn)
		if err != nil {
			return nil, f.wrapYAML(err)
		}
		switch id.(type) {
		case []any, *event.Map:
			return nil, f.errorf(kn, "found unhashable key (a structure printed as a reaction ID, possible double curly-brace)")
		}
		if seen.add(id) {
			return nil, f.errorf(kn, "found conflicting ID '%s'", py.Str(id))
		}
		if s, ok := id.(string); ok && kn.fromData() && strings.HasPrefix(s, "__") {
			return nil, f.errorf(kn, "reaction ID %q printed from event data starts with \"__\", which would hide the reaction; refused", s)
		}
		m.targets = nil
		body, err := f.body(m, id, vn)
		if err != nil {
			return nil, err
		}
		body.Set("__sls__", f.Path)
		r := Reaction{ID: id, Body: body, File: f.Path, Line: kn.line, Col: max(kn.col, 1), targets: m.targets}
		warn := func(format string, args ...any) {
			r.Warnings = append(r.Warnings, &PosError{Pos: position.Pos{File: f.Path, Line: r.Line, Col: r.Col}, Msg: fmt.Sprintf(format, args...)})
		}
		if s, ok := id.(string); ok && strings.HasPrefix(s, "__") {
			warn("reaction ID %q starts with \"__\": Salt ignores it", s)
		}
		for _, k := range body.Keys() {
			v, _ := body.Get(k)
			if _, isList := v.([]any); isList && strings.Contains(k, ".") && !strings.HasPrefix(k, "_") {
				warn("reaction %q: %q shares its type with another function of the same reaction and yields no chunk (Salt drops it silently); use one function per reaction ID", py.Str(id), k)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// rootError refuses a rendered file that is not a mapping of reaction
// IDs: its kind is fixed by the skeleton, whatever the values printed.
func (f *File) rootError(root *pnode) error {
	if root.kind == pMap {
		return nil
	}
	kind := "a list"
	if root.kind == pScalar {
		kind = "a scalar"
	}
	return f.errorf(root, "the rendered file is %s, not a mapping of reaction IDs", kind)
}

// FixedError returns the error with which every render of the file fails,
// whatever the event, or nil when some event may render it. A file that
// prints nothing from the event (plain YAML, a template of text alone) is
// rendered in full. A template whose rendered text is the same for every
// event (text and actions, no if, range, with or template call) has its
// YAML structure checked with each printed value as its placeholder, as
// every render parses it: no value can add, move or remove a key, so a
// YAML error there, or a top level that is not a mapping, is every
// event's. Any other template may render for some event: nil. The
// library refuses such a file at load (Library.File), as one that does
// not compile.
func (f *File) FixedError() error {
	var err error
	if f.Static() {
		_, err = f.Render("", map[string]any{})
	} else {
		_, err = f.tmpl.executeFixed(f.limits, func(text []byte) error {
			if len(bytes.TrimSpace(text)) == 0 {
				return nil
			}
			sk, err := f.skeleton(text)
			if err != nil || sk.root == nil {
				return err
			}
			return f.rootError(sk.root)
		})
	}
	var pe *PosError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	return &PosError{Pos: pe.Pos, Msg: pe.Msg + "; no event can render this file, so it does not load", Err: err}
}

func (f *File) wrapYAML(err error) error {
	var ye *yaml11.Error
	if errors.As(err, &ye) {
		return &PosError{Pos: position.Pos{File: f.Path, Line: ye.Line, Col: max(ye.Column, 1)}, Msg: ye.Msg, Err: err}
	}
	return err
}

// body materializes one reaction body and pads it (Salt's pad_funcs).
func (f *File) body(m *materializer, id any, n *pnode) (*event.Map, error) {
	if n.kind == pScalar {
		v, err := m.scalar(n)
		if err != nil {
			return nil, f.wrapYAML(err)
		}
		s, ok := v.(string)
		if !ok {
			return nil, f.errorf(n, "reaction %q is %s, not a mapping of reaction types", py.Str(id), describe(v))
		}
		first, rest, ok := strings.Cut(s, ".")
		if !ok {
			return nil, f.errorf(n, "reaction %q is the string %q, which names no function (expected <type>.<function>)", py.Str(id), s)
		}
		if n.fromData() {
			return nil, f.errorf(n, "reaction %q: its whole function %q was printed from event data; refused", py.Str(id), s)
		}
		b := event.NewMap(2)
		b.Set(first, []any{rest})
		return b, nil
	}
	if n.kind != pMap {
		return nil, f.errorf(n, "reaction %q is a list, not a mapping of reaction types", py.Str(id))
	}
	entries, err := m.mapping(n)
	if err != nil {
		return nil, f.wrapYAML(err)
	}
	b := event.NewMap(len(entries) + 1)
	for i, e := range entries {
		k, ok := e.key.v.(string)
		if !ok {
			return nil, &PosError{Pos: position.Pos{File: f.Path, Line: e.key.line, Col: max(e.key.col, 1)}, Msg: fmt.Sprintf("reaction %q has a key %s that is not a string", py.Str(id), py.Str(e.key.v))}
		}
		if e.key.fromData && strings.HasPrefix(k, "_") {
			return nil, &PosError{Pos: position.Pos{File: f.Path, Line: e.key.line, Col: max(e.key.col, 1)}, Msg: fmt.Sprintf("reaction %q: key %q printed from event data starts with \"_\"; refused", py.Str(id), k)}
		}
		if err := f.checkArgKeys(m, id, n.content[2*i+1]); err != nil {
			return nil, err
		}
		m.noteTargets(n.content[2*i+1], e.value)
		b.Set(k, e.value)
	}
	padFuncs(b)
	return b, nil
}

// checkArgKeys refuses structure that event data would decide in a
// reaction's argument list: the list itself printed from data, an argument
// item that is a structure from data (toJson) — a mapping item is merged
// into the chunk and could set state, fun, tgt... — and argument keys
// printed from data. Values below an argument key may come from data.
func (f *File) checkArgKeys(m *materializer, id any, list *pnode) error {
	if list.kind == pScalar && list.fromData() {
		return f.errorf(list, "reaction %q: its argument list is printed from event data, which could choose what runs; refused (print values under argument keys instead)", py.Str(id))
	}
	if list.kind != pSeq {
		return nil
	}
	for _, item := range list.content {
		switch item.kind {
		case pScalar:
			if !item.fromData() {
				continue
			}
			v, err := m.scalar(item)
			if err != nil {
				return f.wrapYAML(err)
			}
			switch v.(type) {
			case *event.Map, []any:
				return f.errorf(item, "reaction %q: an argument printed from event data is a structure, which would be merged into the reaction; refused (put it under an argument key, e.g. - pillar: {{ toJson ... }})", py.Str(id))
			}
		case pMap:
			for j := 0; j+1 < len(item.content); j += 2 {
				kn := item.content[j]
				if kn.kind == pScalar && kn.fromData() {
					return f.errorf(kn, "reaction %q: an argument name printed by the template could come from event data and set what runs (state, fun, tgt, ...); refused: write argument names literally ({{ range }} over a literal list counts as printed)", py.Str(id))
				}
			}
		}
	}
	return nil
}

// padFuncs is Salt's Compiler.pad_funcs for one body: in sorted key order,
// a dotted key whose value is a list becomes its first part with the rest
// appended as the function; a second dotted key with the same first part is
// left as it is (and later yields no chunk, as in Salt).
func padFuncs(b *event.Map) {
	keys := append([]string(nil), b.Keys()...)
	sort.Strings(keys)
	skeys := map[string]bool{}
	for _, k := range keys {
		if strings.HasPrefix(k, "_") {
			continue
		}
		v, _ := b.Get(k)
		list, ok := v.([]any)
		if !ok {
			continue
		}
		first, rest, dotted := strings.Cut(k, ".")
		if !dotted {
			skeys[k] = true
			continue
		}
		if skeys[first] {
			continue
		}
		b.Delete(k)
		b.Set(first, append(list, rest))
		skeys[first] = true
	}
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "a list"
	case *event.Map:
		return "a mapping"
	case py.Bytes:
		return "bytes"
	case string:
		return "a string"
	}
	return "a value"
}

// DefaultSettle is the Settle of an engine's reaction files unless told
// otherwise: the daemon's --reload-settle default.
const DefaultSettle = time.Second

// Library loads reaction files and expands SLS path globs, caching both and
// noticing when a file changes on disk. It is safe for concurrent use.
type Library struct {
	// CheckEvery is how often a cached file or glob is checked against the
	// disk. Zero means every second.
	CheckEvery time.Duration
	// Frontend, when set, sees every file's source before it is compiled
	// (once per change on disk, not per event). Set it before the first
	// File call.
	Frontend Frontend
	// KeepLastGood keeps serving a file's last version that compiled when
	// a change to it does not compile (a file removed is not kept): a
	// broken edit never stops a rule that worked. OnStale, when set, is
	// told of each such change, once. Set both before the first File call.
	KeepLastGood bool
	OnStale      func(path string, err error)
	// Limits bound each render of the library's files (zero fields:
	// DefaultLimits). Set it before the first File call.
	Limits Limits
	// OnCompile, when set, is told of each file compiled (read from disk
	// and parsed): once, then once per change on disk. Set it before the
	// first File call.
	OnCompile func(path string)
	// Settle is how long a changed file must have stayed unchanged (by
	// its modification time) before it replaces the version in use: a
	// file rewritten in place (truncated, then written: an editor, `cat >
	// FILE`, configuration management) is never read half written or
	// empty, and the version before serves meanwhile. Zero uses a change
	// at once; a file's first load never waits. The daemon's engine
	// sets --reload-settle (DefaultSettle).
	Settle time.Duration

	mu    sync.RWMutex
	files map[string]*fileEntry
	globs map[string]*globEntry
}

type fileEntry struct {
	state    atomic.Pointer[fileState]
	checked  atomic.Int64 // UnixNano of the last check against the disk
	checking atomic.Bool  // one goroutine re-checks; the others keep the cached state
	mu       sync.Mutex   // serializes the first load
}

type fileState struct {
	mtime time.Time
	size  int64
	file  *File
	err   error
	// stale is the error of the file on disk when file is its last
	// version that compiled (KeepLastGood).
	stale error
}

type globEntry struct {
	checked  time.Time
	paths    []string
	checking atomic.Bool
}

// Frontend prepares a reaction file's source for ParseFile. It returns the
// source to compile and how it read it, or an error that refuses the file;
// the error should name the file and position its problem. The front end
// that chooses each file's renderer as Salt does and converts Salt's Jinja
// files at load is one.
type Frontend func(path string, src []byte) (Loaded, error)

// Loaded is what a Frontend made of a file's source.
type Loaded struct {
	// Src is the source to compile.
	Src []byte
	// Translated is set when Src is a translation (from Jinja), not the
	// file as written.
	Translated bool
	// Renderer and SaltCalls are copied to the File.
	Renderer  string
	SaltCalls int
}

// NewLibrary returns an empty library.
func NewLibrary() *Library {
	return &Library{files: map[string]*fileEntry{}, globs: map[string]*globEntry{}}
}

func (l *Library) every() time.Duration {
	if l.CheckEvery > 0 {
		return l.CheckEvery
	}
	return time.Second
}

// Glob expands an SLS path pattern with Python glob semantics, cached for
// CheckEvery.
func (l *Library) Glob(pattern string) []string {
	now := time.Now()
	l.mu.RLock()
	g := l.globs[pattern]
	l.mu.RUnlock()
	if g != nil && (now.Sub(g.checked) < l.every() || !g.checking.CompareAndSwap(false, true)) {
		return g.paths // fresh, or another caller is refreshing it
	}
	paths := PyGlob(pattern)
	l.mu.Lock()
	l.globs[pattern] = &globEntry{checked: time.Now(), paths: paths}
	l.mu.Unlock()
	return paths
}

// File returns the compiled reaction file at path, recompiling it when it
// changed on disk. A file that fails to compile returns its error until it
// changes. The disk is checked at most every CheckEvery, by one caller at a
// time; the others go on with the cached version meanwhile, so a slow file
// system never stalls rendering.
func (l *Library) File(path string) (*File, error) {
	l.mu.RLock()
	e := l.files[path]
	l.mu.RUnlock()
	if e == nil {
		l.mu.Lock()
		if e = l.files[path]; e == nil {
			e = &fileEntry{}
			l.files[path] = e
		}
		l.mu.Unlock()
	}
	st := e.state.Load()
	if st == nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if st = e.state.Load(); st == nil {
			st = l.load(path, nil)
			e.state.Store(st)
			e.checked.Store(time.Now().UnixNano())
		}
		return st.file, st.err
	}
	now := time.Now().UnixNano()
	if now-e.checked.Load() < int64(l.every()) || !e.checking.CompareAndSwap(false, true) {
		return st.file, st.err
	}
	defer e.checking.Store(false)
	nst := l.load(path, st)
	if l.KeepLastGood && nst.err != nil && st.file != nil && !nst.mtime.IsZero() {
		nst = &fileState{mtime: nst.mtime, size: nst.size, file: st.file, stale: nst.err}
		if l.OnStale != nil {
			l.OnStale(path, nst.stale)
		}
	}
	st = nst
	e.state.Store(st)
	e.checked.Store(time.Now().UnixNano())
	return st.file, st.err
}

// Stale lists the files served from their last version that compiled
// (KeepLastGood), with the error of the version on disk.
func (l *Library) Stale() map[string]error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[string]error{}
	for path, e := range l.files {
		if st := e.state.Load(); st != nil && st.stale != nil {
			out[path] = st.stale
		}
	}
	return out
}

// load stats path and compiles it unless it is unchanged from prev.
func (l *Library) load(path string, prev *fileState) *fileState {
	fi, err := os.Stat(path)
	if err != nil {
		st := &fileState{err: fmt.Errorf("%s: %w", path, err)}
		if errors.Is(err, fs.ErrNotExist) {
			st.err = &PosError{Pos: position.Pos{File: path, Line: 1, Col: 1}, Msg: "file missing or not found", Err: err}
		}
		return st
	}
	if prev != nil && prev.file != nil || prev != nil && prev.err != nil && !prev.mtime.IsZero() {
		if fi.ModTime().Equal(prev.mtime) && fi.Size() == prev.size {
			return prev
		}
	}
	if prev != nil && l.Settle > 0 {
		// Changed moments ago (or moments ahead: a clock a little off):
		// maybe still being written.
		if age := time.Since(fi.ModTime()); age > -l.Settle && age < l.Settle {
			return prev
		}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return &fileState{err: fmt.Errorf("reading %s: %w", path, err)}
	}
	ld := Loaded{Src: src}
	if l.Frontend != nil {
		if ld, err = l.Frontend(path, src); err != nil {
			return &fileState{mtime: fi.ModTime(), size: fi.Size(), err: err}
		}
	}
	if l.OnCompile != nil {
		l.OnCompile(path)
	}
	f, err := ParseFileWith(path, ld.Src, l.Limits)
	if f != nil {
		f.Renderer, f.SaltCalls = ld.Renderer, ld.SaltCalls
		if ld.Translated {
			f.Translated, f.Source = true, ld.Src
		}
		if err = f.FixedError(); err != nil {
			f = nil // no event could render it: refused as a syntax error is
		}
	}
	return &fileState{mtime: fi.ModTime(), size: fi.Size(), file: f, err: err}
}
