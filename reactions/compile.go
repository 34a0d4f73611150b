package reactions

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"unicode"

	"github.com/reactord/reactord/event"
)

// High is the merged high data of one event: every reaction of every file
// the event matched, keyed by ID, later files replacing earlier ones
// wholesale (Salt's `high.update`).
type High struct {
	index     map[string]int
	Reactions []Reaction
	// Overwritten lists each time a later file replaced a reaction ID.
	Overwritten []Overwrite
}

// Overwrite records that a reaction ID defined in one file was replaced by
// the same ID in a later file.
type Overwrite struct {
	ID       string
	Old, New Reaction
}

// Add merges one file's reactions into h: an ID already present keeps its
// position and takes the new body (Python's dict.update).
func (h *High) Add(rs []Reaction) {
	if h.index == nil {
		h.index = make(map[string]int, len(rs))
	}
	for _, r := range rs {
		id, ok := canonicalKey(r.ID)
		if !ok {
			h.Reactions = append(h.Reactions, r) // NaN: equal to nothing
			continue
		}
		if i, dup := h.index[id]; dup {
			if h.Reactions[i].File != r.File {
				h.Overwritten = append(h.Overwritten, Overwrite{ID: pyStr(r.ID), Old: h.Reactions[i], New: r})
			}
			h.Reactions[i] = r
			continue
		}
		h.index[id] = len(h.Reactions)
		h.Reactions = append(h.Reactions, r)
	}
}

// Len reports the number of reaction IDs.
func (h *High) Len() int { return len(h.Reactions) }

// Verify is Salt's Compiler.verify_high for reaction files: it returns every
// problem found. Salt discards all reactions of the event when there is any.
func (h *High) Verify() []error {
	var errs []error
	type reqInfo struct {
		state string
		reqs  map[string]string
	}
	reqs := map[string]*reqInfo{}
	for _, r := range h.Reactions {
		name, isStr := r.ID.(string)
		if isStr && strings.HasPrefix(name, "__") {
			continue
		}
		pe := func(format string, args ...any) {
			errs = append(errs, &PosError{File: r.File, Line: r.Line, Col: r.Col, Msg: fmt.Sprintf(format, args...)})
		}
		sls := r.Body.Str("__sls__")
		if !isStr {
			pe("ID '%s' in SLS '%s' is not formed as a string, but is a %s. It may need to be quoted", pyStr(r.ID), sls, pyType(r.ID))
			continue
		}
		for i := 0; i < r.Body.Len(); i++ {
			state, val := r.Body.At(i)
			if strings.HasPrefix(state, "__") {
				continue
			}
			args, ok := val.([]any)
			if !ok {
				pe("State '%s' in SLS '%s' is not formed as a list", name, sls)
				continue
			}
			fun := 0
			if strings.Contains(state, ".") {
				fun++
			}
			var funcs []string
			for _, arg := range args {
				switch a := arg.(type) {
				case string:
					fun++
					funcs = append(funcs, a)
					if strings.Contains(strings.TrimFunc(a, unicode.IsSpace), " ") {
						pe(`The function "%s" in state "%s" in SLS "%s" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a ":"`, a, name, sls)
					}
				case *event.Map:
					if a.Len() == 0 {
						pe("State '%s' in SLS '%s' has an empty mapping as an argument", name, sls)
						continue
					}
					argfirst, reqv := a.At(0)
					switch argfirst {
					case "require", "watch", "prereq", "onchanges":
					default:
						continue
					}
					list, ok := reqv.([]any)
					if !ok {
						pe("The %s statement in state '%s' in SLS '%s' needs to be formed as a list", argfirst, name, sls)
					} else {
						info := &reqInfo{state: state, reqs: map[string]string{}}
						reqs[name] = info
						for _, req := range list {
							var rk string
							var rv any
							switch q := req.(type) {
							case string:
								rk, rv = "id", q
							case *event.Map:
								if q.Len() == 0 {
									pe("Requisite declaration {} in SLS %s is not formed as a single key dictionary", sls)
									continue
								}
								rk, rv = q.At(0)
							default:
								pe("Requisite declaration %s in SLS %s is not formed as a single key dictionary", pyStr(req), sls)
								continue
							}
							if i := strings.Index(rk, "."); i >= 0 {
								pe("Invalid requisite type '%s' in state '%s', in SLS '%s'. Requisite types must not contain dots, did you mean '%s'?", rk, name, sls, rk[:i])
							}
							switch rv.(type) {
							case []any, *event.Map:
								pe("Illegal requisite \"%s\", is SLS %s", pyStr(rv), sls)
								continue
							}
							target := pyStr(rv)
							info.reqs[target] = rk
							if other, ok := reqs[target]; ok {
								if st, ok := other.reqs[name]; ok && st == state && other.state == info.reqs[target] {
									pe(`A recursive requisite was found, SLS "%s" ID "%s" ID "%s"`, sls, name, target)
								}
							}
						}
					}
					if a.Len() != 1 {
						pe("Multiple dictionaries defined in argument of state '%s' in SLS '%s'", name, sls)
					}
				}
			}
			if fun == 0 {
				if state == "require" || state == "watch" {
					continue
				}
				pe("No function declared in state '%s' in SLS '%s'", state, sls)
			} else if fun > 1 {
				pe("Too many functions declared in state '%s' in SLS '%s'. Please choose one of the following: %s", name, sls, strings.Join(funcs, ", "))
			}
		}
	}
	return errs
}

func pyType(v any) string {
	switch v.(type) {
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	case nil:
		return "NoneType"
	case pyBytes:
		return "bytes"
	}
	return "str"
}

// Compile is Salt's compile_high_data followed by order_chunks and
// resolve_aliases: one low chunk per (ID, reaction type), sorted by
// (order, state+name+fun), `cmd` renamed `local`.
func (h *High) Compile() []*event.Chunk {
	var chunks []*event.Chunk
	for _, r := range h.Reactions {
		name, ok := r.ID.(string)
		if !ok || strings.HasPrefix(name, "__") {
			continue
		}
		for i := 0; i < r.Body.Len(); i++ {
			state, val := r.Body.At(i)
			if strings.HasPrefix(state, "__") {
				continue
			}
			run, _ := val.([]any)
			chunk := event.NewMap(8)
			chunk.Set("state", state)
			chunk.Set("name", name)
			if sls, ok := r.Body.Get("__sls__"); ok {
				chunk.Set("__sls__", sls)
			}
			if env, ok := r.Body.Get("__env__"); ok {
				chunk.Set("__env__", env)
			}
			chunk.Set("__id__", name)
			var funcs []string
			var names []any
			for _, arg := range run {
				switch a := arg.(type) {
				case string:
					if !containsStr(funcs, a) {
						funcs = append(funcs, a)
					}
				case *event.Map:
					for j := 0; j < a.Len(); j++ {
						k, v := a.At(j)
						if k == "names" {
							if list, ok := v.([]any); ok {
								for _, n := range list {
									if !containsAny(names, n) {
										names = append(names, n)
									}
								}
							} else if s, ok := v.(string); ok {
								for _, c := range s { // Python iterates a string's characters
									if !containsAny(names, string(c)) {
										names = append(names, string(c))
									}
								}
							}
							continue
						}
						chunk.Update(a)
					}
				}
			}
			if len(names) > 0 {
				for n, entry := range names {
					live := chunk.Clone()
					if m, ok := entry.(*event.Map); ok && m.Len() > 0 {
						k, v := m.At(0)
						live.Set("name", k)
						if list, ok := v.([]any); ok {
							for _, u := range list {
								if um, ok := u.(*event.Map); ok {
									live.Update(um)
								}
							}
						}
					} else {
						live.Set("name", entry)
					}
					live.Set("name_order", int64(n+1))
					for _, fun := range funcs {
						live.Set("fun", fun)
						chunks = append(chunks, live)
					}
				}
				continue
			}
			live := chunk.Clone()
			for _, fun := range funcs {
				live.Set("fun", fun)
				chunks = append(chunks, live)
			}
		}
	}
	chunks = orderChunks(chunks)
	for _, c := range chunks {
		if c.Str("state") == "cmd" {
			c.Set("state", "local")
		}
	}
	return chunks
}

func containsStr(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func containsAny(list []any, v any) bool {
	for _, e := range list {
		switch v.(type) {
		case []any, *event.Map:
			if pyStr(e) == pyStr(v) {
				return true
			}
			continue
		}
		switch e.(type) {
		case []any, *event.Map:
			continue
		}
		if pyEqual(e, v) {
			return true
		}
	}
	return false
}

// orderChunks is Salt's Compiler.order_chunks.
func orderChunks(chunks []*event.Chunk) []*event.Chunk {
	capv := 1.0
	for _, c := range chunks {
		o, ok := c.Get("order")
		if !ok {
			continue
		}
		n, isInt := pyInt(o)
		if !isInt {
			continue
		}
		if n > capv-1 && n > 0 {
			capv = n + 100
		}
	}
	type keyed struct {
		c     *event.Chunk
		order float64
		text  string
	}
	ks := make([]keyed, len(chunks))
	for i, c := range chunks {
		o, ok := c.Get("order")
		if !ok {
			o = toNumber(capv)
			c.Set("order", o)
		} else if _, num := pyNumber(o); !num {
			switch o {
			case "last":
				o = toNumber(capv + 1000000)
			case "first":
				o = int64(0)
			default:
				o = toNumber(capv)
			}
			c.Set("order", o)
		}
		if no, ok := c.Get("name_order"); ok {
			c.Delete("name_order")
			f, _ := pyNumber(o)
			n, _ := pyNumber(no)
			o = f + n/10000.0
			c.Set("order", o)
		}
		f, _ := pyNumber(o)
		if f < 0 {
			o = toNumber(capv + 1000000 + f)
			c.Set("order", o)
			f, _ = pyNumber(o)
		}
		name, _ := c.Get("name")
		state, _ := c.Get("state")
		fun, _ := c.Get("fun")
		ks[i] = keyed{c: c, order: f, text: pyStr(state) + pyStr(name) + pyStr(fun)}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if ks[i].order != ks[j].order {
			return ks[i].order < ks[j].order
		}
		return ks[i].text < ks[j].text
	})
	out := chunks[:0]
	for _, k := range ks {
		out = append(out, k.c)
	}
	return out
}

// pyInt reports whether v is a Python int (bool included) and its value.
func pyInt(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			f, err := x.Float64()
			return f, err == nil
		}
	}
	return 0, false
}

// pyNumber reports whether v is a Python int or float and its value.
func pyNumber(v any) (float64, bool) {
	if f, ok := pyInt(v); ok {
		return f, true
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// toNumber returns an int64 for integral values, else the float.
func toNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		return int64(f)
	}
	return f
}
