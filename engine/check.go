package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/yaml11"
	"github.com/reactord/reactord/reactions"
	"github.com/reactord/reactord/schemas"
)

// CheckReport is the result of a static check of a configuration.
type CheckReport struct {
	// Config is the loaded configuration, nil when it could not be read.
	Config *config.Config
	// Problems lists every error and every warning, positioned.
	Problems []error
	// Rules and Files count the rules and distinct reaction files checked.
	Rules, Files int
	// Loaded lists the reaction files that load, with how each is read;
	// the ones that do not are in Problems and Broken.
	Loaded []LoadedFile
	// Broken lists the errors of the reaction files that exist but cannot
	// load (a template or Jinja that does not parse, or a file no event
	// can render: reactions.File.FixedError): the daemon does not start
	// with them. They are in Problems too.
	Broken []error
	// Engine is the engine the check built (nil when the configuration
	// does not make one): events rendered with it are read as the check
	// read the files.
	Engine *Engine
}

// LoadedFile is one reaction file that loads.
type LoadedFile struct {
	Path string
	// Renderer is how it is read: "jinja (Salt's default)", "gotmpl
	// (detected)", "yaml (#!yaml)", ...
	Renderer string
	// SaltCalls counts its uses of Salt's render-time names (salt, pillar,
	// grains, opts): it loads, and each event whose rendering reaches one
	// fails.
	SaltCalls int
}

// Check validates a configuration without an event: the configuration and
// its schema, every SLS reference, every reaction file's template, and the
// full compilation of files that print nothing from the event. renderer,
// unless "", overrides the configuration's (--renderer): reaction files
// are read as the daemon would read them.
func Check(path string, renderer string) CheckReport {
	cfg, err := config.Load(path)
	if cfg == nil {
		return CheckReport{Problems: flatten(err)}
	}
	return checkLoaded(cfg, err, nil, Options{Renderer: renderer})
}

// CheckLoaded is Check of a configuration already loaded (a reload's),
// its files read as o says.
func CheckLoaded(cfg *config.Config, o Options) CheckReport { return checkLoaded(cfg, nil, nil, o) }

// CheckEngine is CheckLoaded of the configuration eng was made from, on
// eng's own reaction files: the daemon then reacts with the files the
// check compiled, each compiled once per load.
func CheckEngine(eng *Engine) CheckReport {
	// The sample events go through an engine of the check's own (its log
	// discarded, its counters apart) that shares eng's files.
	o := eng.opts
	o.Log = nil
	chk, err := build(eng.cfg, o, eng.lib)
	if err != nil {
		return checkLoaded(eng.cfg, nil, nil, o) // eng was made from cfg: not reached
	}
	return checkLoaded(eng.cfg, nil, chk, o)
}

// checkLoaded checks cfg; loadErr is what loading it reported; eng, when
// set, is the engine of cfg whose files are checked (else one is made
// with o).
func checkLoaded(cfg *config.Config, loadErr error, eng *Engine, o Options) CheckReport {
	rep := CheckReport{Config: cfg}
	if loadErr != nil {
		rep.Problems = flatten(loadErr)
	}
	rep.Problems = append(rep.Problems, cfg.Warnings...)
	if eng == nil {
		var err error
		if eng, err = New(cfg, o); err != nil {
			rep.Problems = append(rep.Problems, flatten(err)...)
			rep.Config = nil
		}
	}
	reported := map[string]bool{}
	for _, p := range rep.Problems {
		var ce *config.Error
		if errors.As(p, &ce) {
			reported[fmt.Sprintf("%s:%d", ce.Pos.File, ce.Pos.Line)] = true
		}
	}
	for _, f := range cfg.Files {
		for _, p := range schemaProblems(f) {
			if !reported[fmt.Sprintf("%s:%d", p.Pos.File, p.Pos.Line)] {
				rep.Problems = append(rep.Problems, p)
			}
		}
	}
	rep.Rules = len(cfg.Rules)
	if rep.Rules == 0 && len(cfg.Files) > 0 {
		rep.Problems = append(rep.Problems, &config.Error{Pos: config.Pos{File: cfg.Files[0], Line: 1, Col: 1},
			Msg: "no reactor rules: nothing will react (want a top-level reactor: list of {tag glob: SLS paths} entries)"})
	}
	// The engine's library: the sample events below render the files
	// loaded here, not a second copy of them.
	var lib *reactions.Library
	if eng != nil {
		lib = eng.lib
	} else {
		renderer := o.Renderer
		if renderer == "" {
			renderer = cfg.Settings.Renderer
		}
		lib = newLibrary(renderer, o.Limits)
	}
	seen := map[string]bool{}
	for _, r := range cfg.Rules {
		rep.Problems = append(rep.Problems, tagProblems(r)...)
		for _, sls := range r.SLS {
			var paths []string
			if sls.Pattern != "" {
				paths = lib.Glob(sls.Pattern)
			}
			if len(paths) == 0 {
				rep.Problems = append(rep.Problems, &config.Error{Pos: sls.Pos, Msg: fmt.Sprintf("SLS %s matches no file", sls.Ref)})
				continue
			}
			for _, p := range paths {
				if seen[p] {
					continue
				}
				seen[p] = true
				rep.Files++
				f, err := lib.File(p)
				if err != nil {
					errs := flatten(err)
					rep.Problems = append(rep.Problems, errs...)
					if !missing(err) {
						rep.Broken = append(rep.Broken, errs...)
					}
					continue
				}
				rep.Loaded = append(rep.Loaded, LoadedFile{Path: p, Renderer: f.Renderer, SaltCalls: f.SaltCalls})
				rep.Problems = append(rep.Problems, checkStatic(f)...)
			}
		}
	}
	if eng != nil {
		rep.Problems = append(rep.Problems, sampleProblems(context.Background(), eng, rep.Problems)...)
		rep.Engine = eng
	}
	return rep
}

// missing reports whether a file's load error is that it is not there
// (Salt renders nothing for it, and says so per event): a warning, not a
// broken file.
func missing(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// checkStatic compiles a file that does not depend on the event (it prints
// no value) exactly as an event would, and validates its chunks.
func checkStatic(f *reactions.File) []error {
	if !f.Static() {
		return nil
	}
	rs, err := f.Render("", map[string]any{})
	if err != nil {
		return []error{err}
	}
	var high reactions.High
	high.Add(rs)
	if errs := high.Verify(); len(errs) > 0 {
		return errs
	}
	var out []error
	for _, c := range high.Compile() {
		raw, _ := event.AppendJSON(nil, c)
		v, _ := decodePlain(raw)
		for _, viol := range schemas.Check(schemas.LowChunk, v) {
			out = append(out, &reactions.PosError{Pos: position.Pos{File: f.Path, Line: 1, Col: 1}, Msg: fmt.Sprintf("reaction %q: %s", c.Str("__id__"), viol)})
		}
	}
	return out
}

// schemaProblems validates one configuration file against the reactor
// configuration schema, positioning each violation at its node.
func schemaProblems(path string) []*config.Error {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil // already reported by the loader
	}
	root, err := yaml11.Parse(src)
	if err != nil || root == nil {
		return nil
	}
	v, err := root.Value()
	if err != nil {
		return nil
	}
	var out []*config.Error
	for _, viol := range schemas.Check(schemas.ReactorConfig, plainYAML(v)) {
		n := pointerNode(root, viol.Pointer)
		out = append(out, &config.Error{Pos: config.Pos{File: path, Line: max(n.Line, 1), Col: max(n.Column, 1)}, Msg: "schema: " + viol.String()})
	}
	return out
}

// pointerNode finds the node a JSON pointer designates, or the deepest
// ancestor found.
func pointerNode(root *yaml11.Node, pointer string) *yaml11.Node {
	n := root
	if pointer == "" {
		return n
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *yaml11.Node
		switch n.Kind {
		case yaml11.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Text == tok {
					next = n.Content[i+1]
					if i+2 <= len(n.Content) && strings.HasPrefix(pointer, "/") && tok != "" {
						// Point at the key for unknown or misplaced keys.
						next = pick(n.Content[i], n.Content[i+1])
					}
					break
				}
			}
		case yaml11.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// pick returns the value node for collections (so deeper tokens can
// descend) and the key node for scalars.
func pick(key, value *yaml11.Node) *yaml11.Node {
	if value.Kind == yaml11.ScalarNode {
		return key
	}
	return value
}

// plainYAML converts yaml11 values to JSON-like Go values.
func plainYAML(v any) any {
	switch x := v.(type) {
	case *yaml11.Map:
		m := make(map[string]any, x.Len())
		for i, k := range x.Keys {
			key := fmt.Sprint(k)
			if _, ok := k.(bool); ok && i < len(x.KeyNodes) && x.KeyNodes[i] != nil {
				// reactord reads its options' keys as written: YAML 1.1
				// makes `on:` (retry's) the boolean true.
				key = x.KeyNodes[i].Text
			}
			m[key] = plainYAML(x.Values[i])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainYAML(e)
		}
		return out
	}
	return v
}

func flatten(err error) []error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) && !strings.Contains(fmt.Sprintf("%T", err), "PosError") {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func decodePlain(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// CheckEvents renders every event of r (in any format replay reads: JSON
// {"tag","data"} or state.event TAG<tab>{json} lines, or the multi-line
// state.event pretty format) through
// eng and validates every reaction it produces against the low chunk
// schema: it finds what only an event shows (a templated file that does
// not parse once filled in, a reaction type or argument a driver would
// refuse). A problem repeated by many events is reported once, at its
// first line, with the number of other events that showed it.
func CheckEvents(ctx context.Context, eng *Engine, r io.Reader) (events int, problems []error) {
	type seen struct {
		line int
		tag  string
		n    int
	}
	first := map[string]*seen{}
	var order []string
	add := func(line int, tag, msg string) {
		if s, ok := first[msg]; ok {
			s.n++
			return
		}
		first[msg] = &seen{line: line, tag: tag}
		order = append(order, msg)
	}
	rr := event.NewRecordReader(r)
	for {
		text, line, err := rr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				problems = append(problems, fmt.Errorf("events line %d: %w", line, err))
			}
			break
		}
		events++
		res, perr := eng.ProcessLine(ctx, text)
		if perr != nil {
			add(line, "", perr.Error())
			continue
		}
		for _, fe := range res.Errors() {
			add(line, res.Tag, fe.Error())
		}
		for _, c := range res.Chunks {
			raw, _ := event.AppendJSON(nil, c)
			v, _ := decodePlain(raw)
			for _, viol := range schemas.Check(schemas.LowChunk, v) {
				add(line, res.Tag, fmt.Sprintf("%s: reaction %q: %s", c.Str("__sls__"), c.Str("__id__"), viol))
			}
		}
	}
	for _, msg := range order {
		s := first[msg]
		where := fmt.Sprintf("events line %d", s.line)
		if s.tag != "" {
			where += " (" + s.tag + ")"
		}
		if s.n > 0 {
			msg += fmt.Sprintf(" [and %d more event(s)]", s.n)
		}
		problems = append(problems, fmt.Errorf("%s: %s", where, msg))
	}
	return events, problems
}
