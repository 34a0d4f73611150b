package guard

import (
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// expectKeep is how long an expected event is waited for.
const expectKeep = time.Minute

// expectedEvent is an event a reaction will fire, with the hop count and
// cause it carries.
type expectedEvent struct {
	Fired
	until time.Time
	key   string // in the shared state, when there is one
}

// Fired is what the guard knows of an event a reaction fired: its hop
// count, the tag of the event whose reaction fired it, and that reaction.
type Fired struct {
	Hop   int
	Cause string
	By    Reaction
}

// hops remembers the events reactions will fire (a runner or local
// event.send), so such an event gets its hop count and cause though Salt
// carries no header for it.
type hops struct {
	sh *shared

	mu       sync.Mutex
	expected map[string][]expectedEvent // tag -> oldest first
	// byKey maps a shared expected event's key to its tag.
	byKey     map[string]string
	deadlines deadlines[string] // tags
}

func newHops(sh *shared) *hops {
	return &hops{sh: sh, expected: map[string][]expectedEvent{}, byKey: map[string]string{}}
}

// expectEvent is Guard.ExpectEvent.
func (h *hops) expectEvent(tag string, f Fired, now time.Time) {
	e := expectedEvent{Fired: f, until: now.Add(expectKeep)}
	if h.sh.on() {
		e.key = sharedKey(kindExpected, tag) + "." + h.sh.token()
	}
	h.mu.Lock()
	h.expect(tag, e)
	h.mu.Unlock()
	if e.key != "" {
		h.sh.put(e.key, expectedRecord{origin: origin{h.sh.origin}, Tag: tag, Hop: f.Hop, Cause: f.Cause, Rule: f.By.Rule, ID: f.By.ID,
			At: e.until.UnixNano()}, expectKeep)
	}
}

// expect adds an expected event; called with mu held.
func (h *hops) expect(tag string, e expectedEvent) {
	h.expected[tag] = append(h.expected[tag], e)
	if e.key != "" {
		h.byKey[e.key] = tag
	}
	h.deadlines.push(e.until, tag)
}

// hopOf is Guard.HopOf.
func (h *hops) hopOf(tag string, now time.Time) Fired {
	h.mu.Lock()
	var used []string
	var fired Fired
	for list := h.expected[tag]; len(list) > 0; list = h.expected[tag] {
		e := list[0] // one dispatch fires one event
		if len(list) == 1 {
			delete(h.expected, tag)
		} else {
			h.expected[tag] = list[1:]
		}
		if e.key != "" {
			delete(h.byKey, e.key)
			used = append(used, e.key)
		}
		if now.Before(e.until) {
			fired = e.Fired
			break
		}
	}
	h.mu.Unlock()
	if st := h.sh.st(); st != nil {
		for _, k := range used {
			st.Delete(k, expectKeep)
		}
	}
	return fired
}

// expire forgets the expected events that were not seen in time.
func (h *hops) expire(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, tag := range h.deadlines.due(now) {
		list := slices.DeleteFunc(h.expected[tag], func(e expectedEvent) bool {
			if now.Before(e.until) {
				return false
			}
			delete(h.byKey, e.key)
			return true
		})
		if len(list) == 0 {
			delete(h.expected, tag)
		} else {
			h.expected[tag] = list
		}
	}
}

// apply brings another replica's e record in.
func (h *hops) apply(key string, value []byte) {
	var rec expectedRecord
	if json.Unmarshal(value, &rec) != nil || rec.Origin == h.sh.origin {
		return
	}
	h.mu.Lock()
	if _, ok := h.byKey[key]; !ok {
		h.expect(rec.Tag, expectedEvent{Fired: Fired{Hop: rec.Hop, Cause: rec.Cause, By: Reaction{Rule: rec.Rule, ID: rec.ID}},
			until: time.Unix(0, rec.At), key: key})
	}
	h.mu.Unlock()
}

// used forgets an expected event another replica used (its key was
// deleted).
func (h *hops) used(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tag, ok := h.byKey[key]
	if !ok {
		return
	}
	delete(h.byKey, key)
	list := slices.DeleteFunc(h.expected[tag], func(e expectedEvent) bool { return e.key == key })
	if len(list) == 0 {
		delete(h.expected, tag)
	} else {
		h.expected[tag] = list
	}
}
