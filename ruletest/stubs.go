package ruletest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/yaml11"
	"github.com/reactord/reactord/reactions"
)

// Stubs answer the Salt calls reaction files make while rendering, in
// place of a master: a function's answer given as it is (Salt), or the
// pillar, grains and configuration the dict functions read (pillar.get,
// grains.items, config.get, ...). A call nothing answers fails, naming the
// function and its arguments. The zero Stubs answer nothing.
type Stubs struct {
	// Salt are, by function name, the answers given for it: the first
	// case whose args and kwargs match the call's answers it.
	Salt map[string][]Case
	// Pillar, Grains and Opts answer pillar.*, grains.* and config.*
	// (nil: not given, those calls are not answered).
	Pillar, Grains, Opts map[string]any
}

var _ reactions.SaltCaller = (*Stubs)(nil)

// Case is one answer of a function.
type Case struct {
	// Pos is where it is written.
	Pos position.Pos
	// Args and Kwargs, when not nil, are the arguments a call must give
	// exactly for this case to answer it; nil matches any.
	Args   []any
	Kwargs map[string]any
	// Return is the answer (plain: see Expected.Keys).
	Return any
}

var stubKeys = []string{"salt", "pillar", "grains", "opts"}

// LoadStubs reads stubs from a file: a test file (its stubs:) or a file
// holding only what a test file's stubs: holds (salt:, pillar:, grains:,
// opts:). Errors are at file:line:col.
func LoadStubs(path string) (*Stubs, error) {
	root, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	n := root
	if root.Kind == yaml11.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			switch root.Content[i].Text {
			case "stubs":
				n = root.Content[i+1]
			case "tests", "reactor":
				if n == root {
					n = nil
				}
			}
		}
	}
	if n == nil {
		return &Stubs{}, nil
	}
	var errs errList
	s := stubsFrom(path, n, &errs)
	if len(errs) > 0 {
		return nil, errs.join()
	}
	return s, nil
}

// stubsFrom reads a stubs: mapping.
func stubsFrom(path string, n *yaml11.Node, errs *errList) *Stubs {
	s := &Stubs{}
	fields := mapping(path, n, stubKeys, errs)
	for _, k := range []string{"pillar", "grains", "opts"} {
		dn, ok := fields[k]
		if !ok {
			continue
		}
		v, err := liveValue(path, dn)
		m, isMap := v.(map[string]any)
		switch {
		case err != nil:
			errs.add(err)
		case !isMap:
			errs.at(path, dn, k+": must be a mapping (the "+k+" the reaction files read)")
		case k == "pillar":
			s.Pillar = m
		case k == "grains":
			s.Grains = m
		default:
			s.Opts = m
		}
	}
	sn, ok := fields["salt"]
	if !ok {
		return s
	}
	if sn.Kind != yaml11.MappingNode {
		errs.at(path, sn, "salt: must map function names (mine.get) to an answer, or to a list of {args, kwargs, return}")
		return s
	}
	s.Salt = map[string][]Case{}
	for i := 0; i+1 < len(sn.Content); i += 2 {
		fun, vn := sn.Content[i].Text, sn.Content[i+1]
		if !strings.Contains(fun, ".") {
			errs.at(path, sn.Content[i], fmt.Sprintf("salt: %q is not a function name (mod.fun)", fun))
			continue
		}
		s.Salt[fun] = casesFrom(path, vn, errs)
	}
	return s
}

// casesFrom reads a function's answer: a list of mappings that each have
// return: is a list of cases; anything else is the one answer, whatever
// the arguments.
func casesFrom(path string, n *yaml11.Node, errs *errList) []Case {
	if !isCaseList(n) {
		v, err := plainValue(path, n)
		if err != nil {
			errs.add(err)
		}
		return []Case{{Pos: nodePos(path, n), Return: v}}
	}
	var out []Case
	for _, cn := range n.Content {
		c := Case{Pos: nodePos(path, cn)}
		fields := mapping(path, cn, []string{"args", "kwargs", "return"}, errs)
		if an, ok := fields["args"]; ok {
			v, err := plainValue(path, an)
			l, isList := v.([]any)
			if err != nil || !isList {
				errs.at(path, an, "args: must be a list (the call's positional arguments)")
			}
			c.Args = append([]any{}, l...)
		}
		if kn, ok := fields["kwargs"]; ok {
			v, err := plainValue(path, kn)
			m, isMap := v.(map[string]any)
			if err != nil || !isMap && v != nil {
				errs.at(path, kn, "kwargs: must be a mapping (the call's keyword arguments)")
			}
			c.Kwargs = map[string]any{}
			for k, e := range m {
				c.Kwargs[k] = e
			}
		}
		v, err := plainValue(path, fields["return"])
		if err != nil {
			errs.add(err)
		}
		c.Return = v
		out = append(out, c)
	}
	return out
}

// isCaseList reports whether n is a list of {args, kwargs, return}
// mappings, each with return:.
func isCaseList(n *yaml11.Node) bool {
	if n.Kind != yaml11.SequenceNode || len(n.Content) == 0 {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yaml11.MappingNode {
			return false
		}
		hasReturn := false
		for i := 0; i+1 < len(c.Content); i += 2 {
			k := c.Content[i].Text
			hasReturn = hasReturn || k == "return"
			if k != "args" && k != "kwargs" && k != "return" {
				return false
			}
		}
		if !hasReturn {
			return false
		}
	}
	return true
}

// SaltCall answers a call from the stubs: a case of Salt first, then the
// pillar, grains and opts for their functions. A call nothing answers
// fails, naming the function and arguments and where to give the answer.
func (s *Stubs) SaltCall(_ context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	pa, err := plainJSONOf(args)
	if err != nil {
		return nil, err
	}
	pk, err := plainJSONOf(kwargs)
	if err != nil {
		return nil, err
	}
	pargs, _ := pa.([]any)
	pkw, _ := pk.(map[string]any)
	if pargs == nil {
		pargs = []any{}
	}
	call := describeCall(fun, pargs, pkw)
	if cases, ok := s.Salt[fun]; ok {
		for _, c := range cases {
			if c.Args != nil && !equal(c.Args, pargs) || c.Kwargs != nil && !equal(c.Kwargs, orEmpty(pkw)) {
				continue
			}
			return live(c.Return)
		}
		at := make([]string, len(cases))
		for i, c := range cases {
			at[i] = c.Pos.String()
		}
		return nil, fmt.Errorf("no stub answers %s: its cases (%s) give other args or kwargs", call, strings.Join(at, ", "))
	}
	if v, ok, err := s.dictCall(fun, pargs, pkw); ok || err != nil {
		if err != nil {
			return nil, fmt.Errorf("stub %s: %w", call, err)
		}
		return live(v)
	}
	return nil, fmt.Errorf("no stub answers %s: give its answer under stubs: salt: %s: (or the pillar:, grains:, opts: it reads)", call, fun)
}

// describeCall spells a call as a file writes it: mod.fun(args, k=v).
func describeCall(fun string, args []any, kwargs map[string]any) string {
	parts := make([]string, 0, len(args)+len(kwargs))
	for _, a := range args {
		parts = append(parts, compact(a))
	}
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+compact(kwargs[k]))
	}
	return fun + "(" + strings.Join(parts, ", ") + ")"
}

// plainJSONOf is v as a plain value.
func plainJSONOf(v any) (any, error) {
	raw, err := jsonMarshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a call's arguments: %w", err)
	}
	return plainJSON(raw)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
