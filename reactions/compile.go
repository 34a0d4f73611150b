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
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/jinja/py"
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
				h.Overwritten = append(h.Overwritten, Overwrite{ID: py.Str(r.ID), Old: h.Reactions[i], New: r})
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
			errs = append(errs, &PosError{Pos: position.Pos{File: r.File, Line: r.Line, Col: r.Col}, Msg: fmt.Sprintf(format, args...)})
		}
		sls := r.Body.Str("__sls__")
		if !isStr {
			pe("ID '%s' in SLS '%s' is not formed as a string, but is a %s. It may need to be quoted", py.Str(r.ID), sls, pyType(r.ID))
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
								pe("Requisite declaration %s in SLS %s is not formed as a single key dictionary", py.Str(req), sls)
								continue
							}
							if i := strings.Index(rk, "."); i >= 0 {
								pe("Invalid requisite type '%s' in state '%s', in SLS '%s'. Requisite types must not contain dots, did you mean '%s'?", rk, name, sls, rk[:i])
							}
							switch rv.(type) {
							case []any, *event.Map:
								pe("Illegal requisite \"%s\", is SLS %s", py.Str(rv), sls)
								continue
							}
							target := py.Str(rv)
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
	case py.Bytes:
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
			if py.Str(e) == py.Str(v) {
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

// orderChunks is what Salt's reactor does to order chunks: Compiler.order_chunks
// twice (compile_high_data ends with it, and the reactor calls it again on
// the result). Orders are Python numbers: exact integers beyond int64 (cap =
// order + 100 stays exact), floats where Salt's arithmetic makes them
// (name_order / 10000.0).
func orderChunks(chunks []*event.Chunk) []*event.Chunk {
	return orderPass(orderPass(chunks, true), false)
}

// orderPass is one Compiler.order_chunks.
func orderPass(chunks []*event.Chunk, first bool) []*event.Chunk {
	capv := py.Num{I: smallOrders[1]}
	for _, c := range chunks {
		o, ok := c.Get("order")
		if !ok {
			continue
		}
		n, isInt := orderInt(o)
		if !isInt || n.I.Sign() <= 0 {
			continue
		}
		if n.I.Cmp(capv.I) >= 0 { // order > cap - 1
			capv = py.Num{I: new(big.Int).Add(n.I, big.NewInt(100))}
		}
	}
	type keyed struct {
		c     *event.Chunk
		order py.Num
		text  string
	}
	var ks []keyed
	if !first {
		ks = make([]keyed, len(chunks))
	}
	hasNaN := false
	for i, c := range chunks {
		o, ok := c.Get("order")
		var n py.Num
		switch {
		case !ok:
			n = capv
			c.Set("order", numValue(n))
		default:
			var num bool
			n, num = orderNumber(o)
			if !num {
				switch o {
				case "last":
					n = py.Num{I: new(big.Int).Add(capv.I, big.NewInt(1000000))}
				case "first":
					n = py.Num{I: bigZero}
				default:
					n = capv
				}
				c.Set("order", numValue(n))
			}
			if no, ok := c.Get("name_order"); ok {
				c.Delete("name_order")
				f, _ := n.Float()
				m, _ := orderNumber(no)
				mf, _ := m.Float()
				n = py.Num{IsFloat: true, F: f + mf/10000.0}
				c.Set("order", n.F)
			}
			if cmp, ok := n.Cmp(py.Num{I: bigZero}); ok && cmp < 0 {
				base := new(big.Int).Add(capv.I, big.NewInt(1000000))
				if n.IsFloat {
					f, _ := py.Num{I: base}.Float()
					n = py.Num{IsFloat: true, F: f + n.F}
				} else {
					n = py.Num{I: base.Add(base, n.I)}
				}
				c.Set("order", numValue(n))
			}
		}
		if n.IsFloat && math.IsNaN(n.F) {
			hasNaN = true
		}
		if !first {
			name, _ := c.Get("name")
			state, _ := c.Get("state")
			fun, _ := c.Get("fun")
			ks[i] = keyed{c: c, order: n, text: py.Str(state) + py.Str(name) + py.Str(fun)}
		}
	}
	if first {
		if !hasNaN {
			// The second pass sorts again with the final orders: without
			// NaN (a total order), one stable sort at the end gives the
			// same.
			return chunks
		}
		ks = make([]keyed, len(chunks))
		for i, c := range chunks {
			o, _ := c.Get("order")
			n, _ := orderNumber(o)
			ks[i] = keyed{c: c, order: n}
		}
	}
	less := func(a, b *keyed) bool {
		if c, ok := a.order.Cmp(b.order); ok {
			if c != 0 {
				return c < 0
			}
			return a.text < b.text
		}
		return false // NaN: neither equal nor less, as in Python
	}
	if first {
		for i := range ks {
			c := ks[i].c
			name, _ := c.Get("name")
			state, _ := c.Get("state")
			fun, _ := c.Get("fun")
			ks[i].text = py.Str(state) + py.Str(name) + py.Str(fun)
		}
	}
	if hasNaN {
		// Python's comparisons with NaN are no order: only CPython's own
		// algorithm puts such a chunk where Salt does.
		cpythonSort(len(ks), func(i, j int) bool { return less(&ks[i], &ks[j]) }, func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	} else {
		sort.SliceStable(ks, func(i, j int) bool { return less(&ks[i], &ks[j]) })
	}
	out := chunks[:0]
	for _, k := range ks {
		out = append(out, k.c)
	}
	return out
}

var bigZero = new(big.Int)

// smallOrders are the integers 0-1023 as read-only big.Ints, so that usual
// orders cost no allocation.
var smallOrders = func() []*big.Int {
	out := make([]*big.Int, 1024)
	for i := range out {
		out[i] = big.NewInt(int64(i))
	}
	return out
}()

// numValue is a number in the forms chunks hold: int64, *big.Int, float64.
func numValue(n py.Num) any {
	if n.IsFloat {
		return n.F
	}
	if n.I.IsInt64() {
		return n.I.Int64()
	}
	return n.I
}

// orderInt is v as a Python int (bool included). The big.Int is not to be
// modified.
func orderInt(v any) (py.Num, bool) {
	switch x := v.(type) {
	case int64:
		if x >= 0 && x < int64(len(smallOrders)) {
			return py.Num{I: smallOrders[x]}, true
		}
		return py.ToNum(v)
	case bool:
		if x {
			return py.Num{I: smallOrders[1]}, true
		}
		return py.Num{I: smallOrders[0]}, true
	case int, *big.Int:
		return py.ToNum(v)
	case json.Number:
		if n, ok := py.ToNum(v); ok && !n.IsFloat {
			return n, true
		}
	}
	return py.Num{}, false
}

// orderNumber is v as a Python int or float (a big.Int not to be
// modified).
func orderNumber(v any) (py.Num, bool) {
	switch v.(type) {
	case bool, int64:
		return orderInt(v)
	case int, *big.Int, float64, json.Number:
		return py.ToNum(v)
	}
	return py.Num{}, false
}

// cpythonSort is CPython 3.11's list.sort for fewer than 64 items (one natural
// run, then binary insertion), which decides where incomparable items (NaN)
// land; longer lists get a stable insertion sort.
func cpythonSort(n int, less func(i, j int) bool, swap func(i, j int)) {
	if n < 2 {
		return
	}
	if n >= 64 {
		insertionSortStable(n, less, swap)
		return
	}
	run := 2 // count_run
	if less(1, 0) {
		for run < n && less(run, run-1) {
			run++
		}
		for i, j := 0, run-1; i < j; i, j = i+1, j-1 {
			swap(i, j)
		}
	} else {
		for run < n && !less(run, run-1) {
			run++
		}
	}
	for start := run; start < n; start++ { // binarysort
		l, r := 0, start
		for l < r {
			p := l + (r-l)/2
			if less(start, p) {
				r = p
			} else {
				l = p + 1
			}
		}
		for k := start; k > l; k-- {
			swap(k, k-1)
		}
	}
}

// insertionSortStable is a stable insertion sort by less.
func insertionSortStable(n int, less func(i, j int) bool, swap func(i, j int)) {
	for i := 1; i < n; i++ {
		for j := i; j > 0 && less(j, j-1); j-- {
			swap(j, j-1)
		}
	}
}
