package saltapi

import (
	"fmt"
	"strings"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// reserved are top-level lowstate keys that salt-api reads as credentials,
// routing or the call itself. A chunk key with one of these names is never
// copied to the top level of a local_async lowstate.
var reserved = map[string]bool{
	"client": true, "token": true, "eauth": true, "username": true, "password": true,
	"user": true, "key": true, "fun": true, "tgt": true, "tgt_type": true,
	"arg": true, "kwarg": true, "ret": true, "state": true,
}

// lowstateBody encodes the one-element lowstate list for call; see
// lowstateJSON for the lowstate itself.
func lowstateBody(call actions.Call, c *event.Chunk) ([]byte, error) {
	low, err := lowstateJSON(call, c)
	if err != nil {
		return nil, err
	}
	return listBody([][]byte{low}), nil
}

// listBody joins encoded lowstates into the JSON list salt-api's POST /
// takes.
func listBody(lows [][]byte) []byte {
	n := 2
	for _, l := range lows {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, l := range lows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l...)
	}
	return append(b, ']')
}

// mergeable returns a local reaction's lowstate as a map, and the key that
// reactions merged into one lowstate share: the lowstate without its
// target.
func mergeable(call actions.Call, c *event.Chunk) (*event.Map, string, error) {
	low, err := lowstateMap(call, c)
	if err != nil {
		return nil, "", err
	}
	rest := low.Clone()
	rest.Delete("tgt")
	rest.Delete("tgt_type")
	key, err := event.AppendJSON(nil, rest)
	return low, string(key), err
}

// lowstateJSON encodes the lowstate object for call:
//
//   - local: {"client": "local_async", "tgt", "tgt_type", "fun", "arg",
//     "kwarg", "ret" (when set)} plus the chunk's other keys, which
//     LocalClient.run_job receives as keyword arguments, as Salt's reactor
//     passes them to cmd_async (timeout, metadata, ...).
//   - runner and wheel: {"client": "runner_async"/"wheel_async", "fun",
//     "arg", "kwarg"}. Both arg and kwarg are always sent: the master then
//     calls the function with exactly them, as Salt's reactor does, instead
//     of matching top-level keys against its signature. The legacy form,
//     keyword arguments written directly in the reaction body (Extra), is
//     folded into kwarg, below the explicit kwarg.
//
// The compiler's bookkeeping (order, __id__, __sls__ and every other
// __dunder__ key, and name when it only repeats the ID) is left out.
func lowstateJSON(call actions.Call, c *event.Chunk) ([]byte, error) {
	low, err := lowstateMap(call, c)
	if err != nil {
		return nil, err
	}
	return event.AppendJSON(nil, low)
}

// lowstateMap builds the lowstate lowstateJSON encodes.
func lowstateMap(call actions.Call, c *event.Chunk) (*event.Map, error) {
	low := event.NewMap(8)
	switch call.Client {
	case "local":
		low.Set("client", "local_async")
		low.Set("tgt", call.Tgt)
		low.Set("tgt_type", call.TgtType)
		low.Set("fun", call.Fun)
		low.Set("arg", argList(call.Arg))
		low.Set("kwarg", kwargMap(call.Kwarg))
		if ret := returners(call.Ret); ret != "" {
			low.Set("ret", ret)
		}
		for i := 0; i < call.Extra.Len(); i++ {
			k, v := call.Extra.At(i)
			if forwarded(k, c) && !reserved[k] {
				low.Set(k, v)
			}
		}
	case "runner", "wheel":
		low.Set("client", call.Client+"_async")
		low.Set("fun", call.Fun)
		low.Set("arg", argList(call.Arg))
		kw := kwargMap(call.Kwarg)
		if legacyBody(c) && call.Extra.Len() > 0 {
			merged := event.NewMap(call.Extra.Len() + kw.Len())
			for i := 0; i < call.Extra.Len(); i++ {
				if k, v := call.Extra.At(i); forwarded(k, c) {
					merged.Set(k, v)
				}
			}
			merged.Update(kw)
			kw = merged
		}
		low.Set("kwarg", kw)
	default:
		return nil, fmt.Errorf("no salt-api client for %s reactions", call.Client)
	}
	return low, nil
}

// legacyBody reports whether the keys of a runner or wheel reaction body
// are the function's keyword arguments: Salt's reactor reads them so unless
// the reaction gives `args`, or both `arg` and `kwarg`.
func legacyBody(c *event.Chunk) bool {
	return !c.Has("args") && !(c.Has("arg") && c.Has("kwarg"))
}

// forwarded reports whether chunk key k is a reaction setting rather than
// compiler bookkeeping.
func forwarded(k string, c *event.Chunk) bool {
	switch {
	case strings.HasPrefix(k, "__"), k == "order":
		return false
	case k == "name":
		return c.Str("name") != c.Str("__id__")
	}
	return true
}

func argList(a []any) []any {
	if a == nil {
		return []any{}
	}
	return a
}

func kwargMap(m *event.Map) *event.Map {
	if m == nil {
		return event.NewMap(0)
	}
	return m
}

// returners renders a `ret` value as the comma-separated string Salt's
// minion splits; a list of returner names is joined.
func returners(ret any) string {
	switch r := ret.(type) {
	case nil:
		return ""
	case string:
		return r
	case []any:
		names := make([]string, 0, len(r))
		for _, e := range r {
			names = append(names, fmt.Sprint(e))
		}
		return strings.Join(names, ",")
	}
	return fmt.Sprint(ret)
}

// Describe returns the lowstate request the driver would post for a, as
// `POST <url>/ <json>`.
func (d *Driver) Describe(a actions.Action) (string, error) {
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return "", err
	}
	body, err := lowstateBody(call, a.Chunk)
	if err != nil {
		return "", err
	}
	return "POST " + d.base + "/ " + string(body), nil
}

var _ actions.Describer = (*Driver)(nil)
