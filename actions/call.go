package actions

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/reactord/reactord/event"
)

// Call is a low chunk mapped onto the Salt client call Salt's reactor makes
// for it (ReactWrap.run): LocalClient.cmd_async for local, RunnerClient.low
// and Wheel.low for runner and wheel, Caller.cmd for caller.
type Call struct {
	// Client is local, runner, wheel or caller.
	Client string
	// Fun is the function, e.g. state.apply.
	Fun string
	// Tgt and TgtType target a local call; TgtType defaults to glob.
	Tgt     any
	TgtType string
	// Arg are the positional arguments, Kwarg the keyword arguments of the
	// function itself.
	Arg   []any
	Kwarg *event.Map
	// Ret names returners for a local call.
	Ret any
	// Extra holds every other chunk key, which Salt passes on as keyword
	// arguments of the client call (timeout, metadata, __id__, ...).
	Extra *event.Map
	// Warnings are what Salt would log while building the call.
	Warnings []string
}

// ErrArgFormat is returned for an `args` value Salt refuses to run
// ("Incorrect argument format").
var ErrArgFormat = fmt.Errorf("incorrect argument format, check the Reactor System documentation for the correct format")

// structural chunk keys that never reach the client as keyword arguments.
var chunkKeys = map[string]bool{"state": true, "fun": true, "tgt": true, "tgt_type": true, "arg": true, "kwarg": true, "args": true, "ret": true}

// CallFor maps a chunk onto the call Salt would make, following
// ReactWrap.run: with `args` (the new schema) every item becomes a keyword
// argument (a caller reaction whose args is a plain list keeps them
// positional), and `arg`/`kwarg` are ignored with a warning; without `args`,
// `arg` and `kwarg` are used as given. An empty or malformed `args` is
// ErrArgFormat: Salt logs it and runs nothing.
//
// Salt's legacy runner/wheel form (keyword arguments written directly in the
// body, matched against the Python function's signature) cannot be
// reproduced without Salt's function table; those keys are passed on in
// Extra, and salt-api/salt-run accept them as keyword arguments.
func CallFor(c *event.Chunk) (Call, error) {
	call := Call{Client: c.Str("state"), Fun: c.Str("fun"), TgtType: "glob", Kwarg: event.NewMap(0), Extra: event.NewMap(4)}
	switch call.Client {
	case "local", "runner", "wheel", "caller":
	default:
		return call, fmt.Errorf("reaction %q: unknown reaction type %q (want local, runner, wheel or caller)", c.Str("__id__"), call.Client)
	}
	if call.Fun == "" {
		return call, fmt.Errorf("reaction %q: no function", c.Str("__id__"))
	}
	if call.Client == "local" {
		tgt, ok := c.Get("tgt")
		if !ok {
			return call, fmt.Errorf("reaction %q: local reaction without tgt", c.Str("__id__"))
		}
		call.Tgt = tgt
		if tt, ok := c.Get("tgt_type"); ok {
			if s, ok := tt.(string); ok && s != "" {
				call.TgtType = s
			}
		}
		call.Ret, _ = c.Get("ret")
	}
	for i := 0; i < c.Len(); i++ {
		k, v := c.At(i)
		if !chunkKeys[k] {
			call.Extra.Set(k, v)
		}
	}
	if args, ok := c.Get("args"); ok {
		for _, item := range []string{"arg", "kwarg"} {
			if v, ok := c.Get(item); ok {
				call.Warnings = append(call.Warnings, fmt.Sprintf("reactor %q is ignoring %q param %s due to presence of \"args\" param", c.Str("__id__"), item, jsonText(v)))
			}
		}
		list, isList := args.([]any)
		if call.Client == "caller" && isList && !isDictList(list) {
			call.Arg = list
			return call, nil
		}
		if m, ok := args.(*event.Map); ok {
			call.Kwarg = m
			return call, nil
		}
		kw := repackDictList(args)
		if kw == nil || kw.Len() == 0 {
			return call, fmt.Errorf("reactor %q failed to execute %s %q: %w", c.Str("__id__"), call.Client, call.Fun, ErrArgFormat)
		}
		call.Kwarg = kw
		return call, nil
	}
	if v, ok := c.Get("arg"); ok {
		switch a := v.(type) {
		case []any:
			call.Arg = a
		case nil:
		default:
			call.Arg = []any{a}
		}
	}
	if v, ok := c.Get("kwarg"); ok {
		if m, ok := v.(*event.Map); ok {
			call.Kwarg = m
		}
	}
	return call, nil
}

// isDictList is salt.utils.data.is_dictlist: a list of one-key mappings.
func isDictList(list []any) bool {
	for _, e := range list {
		m, ok := e.(*event.Map)
		if !ok || m.Len() != 1 {
			return false
		}
	}
	return true
}

// repackDictList is salt.utils.data.repack_dictlist: one-key mappings
// become key/value, bare strings and numbers become key: None; any other
// element makes the whole result empty.
func repackDictList(v any) *event.Map {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := event.NewMap(len(list))
	for _, e := range list {
		switch x := e.(type) {
		case *event.Map:
			if x.Len() != 1 {
				return nil
			}
			k, val := x.At(0)
			out.Set(k, val)
		case string:
			out.Set(x, nil)
		case int64, float64:
			out.Set(jsonText(x), nil)
		default:
			return nil
		}
	}
	return out
}

func jsonText(v any) string {
	b, err := event.AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// SortedExtra returns Extra's keys sorted, for stable output.
func (c Call) SortedExtra() []string {
	keys := append([]string(nil), c.Extra.Keys()...)
	sort.Strings(keys)
	return keys
}

// LiteralMinions returns the minion ids a glob without wildcards or a list
// target names, without repeats, or nil when the target is anything else or
// an id holds a comma or white space. Drivers use it to run several
// reactions that differ only in such a target as one job with a list
// target.
func LiteralMinions(tgt any, tgtType string) []string {
	var names []string
	switch tgtType {
	case "glob":
		s, ok := tgt.(string)
		if !ok || strings.ContainsAny(s, "*?[]") {
			return nil
		}
		names = []string{s}
	case "list":
		switch t := tgt.(type) {
		case string:
			names = strings.Split(t, ",")
		case []any:
			for _, e := range t {
				s, ok := e.(string)
				if !ok {
					return nil
				}
				names = append(names, s)
			}
		default:
			return nil
		}
	default:
		return nil
	}
	var ids []string
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, ", \t\r\n\v\f") {
			return nil
		}
		if !slices.Contains(ids, n) {
			ids = append(ids, n)
		}
	}
	return ids
}
