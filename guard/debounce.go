package guard

import (
	"encoding/json"
	"sync"
	"time"
)

// debounceState is the event a debounce holds for one rule and key.
type debounceState struct {
	last  []byte // body of the last event
	timer *time.Timer
	hop   int
	gen   int // bumped on every event; a timer fires only for its own
	// let releases the held event (see Guard.Debounce); nil when nothing
	// holds its acknowledgement.
	let func(abandon bool)
	// tok names the last event in the shared state; seen is set once the
	// shared state handed it back: a later one is another replica's newer
	// event.
	tok  string
	seen bool
}

// debounces holds each rule's last event per key until a quiet period
// passed; with shared state the last event across the replicas fires,
// once.
type debounces struct {
	sh *shared

	mu     sync.Mutex
	states map[ruleKey]*debounceState
}

func newDebounces(sh *shared) *debounces {
	return &debounces{sh: sh, states: map[ruleKey]*debounceState{}}
}

// hold is Guard.Debounce.
func (d *debounces) hold(rule, key string, body []byte, hop int, quiet time.Duration, let func(abandon bool), fire func(body []byte, hop int, let func(abandon bool))) {
	d.mu.Lock()
	k := ruleKey{rule, key}
	st := d.states[k]
	if st == nil {
		st = &debounceState{}
		d.states[k] = st
	}
	replaced := st.let
	st.last, st.hop, st.let = body, hop, let
	st.gen++
	gen := st.gen
	if d.sh.on() {
		st.tok, st.seen = d.sh.token(), false
	}
	tok := st.tok
	if st.timer != nil {
		st.timer.Stop()
	}
	st.timer = time.AfterFunc(quiet, func() {
		d.mu.Lock()
		if d.states[k] != st || st.gen != gen {
			d.mu.Unlock()
			return
		}
		delete(d.states, k)
		last, h, l := st.last, st.hop, st.let
		d.mu.Unlock()
		if l == nil {
			l = func(bool) {}
		}
		fire(last, h, l)
	})
	d.mu.Unlock()
	if d.sh.on() {
		d.sh.put(sharedKey(kindDebounce, rule, key), debounceRecord{origin: origin{d.sh.origin}, Rule: rule, Key: key, Tok: tok}, quiet+time.Minute)
	}
	if replaced != nil {
		replaced(false)
	}
}

// stop cancels pending debounces, releasing each held event as abandoned
// (let(true)); it returns how many it cancelled.
func (d *debounces) stop() int {
	d.mu.Lock()
	var lets []func(bool)
	n := 0
	for k, st := range d.states {
		// A timer that already fired finds its entry gone and does
		// nothing: the entry is released here either way.
		if st.timer != nil {
			st.timer.Stop()
		}
		if st.let != nil {
			lets = append(lets, st.let)
		}
		n++
		delete(d.states, k)
	}
	d.mu.Unlock()
	for _, l := range lets {
		l(true)
	}
	return n
}

// apply brings a d record in: when another replica holds a newer event
// of the key, that one fires and this replica's event is released as
// replaced.
func (d *debounces) apply(value []byte) {
	var rec debounceRecord
	if json.Unmarshal(value, &rec) != nil {
		return
	}
	k := ruleKey{rec.Rule, rec.Key}
	d.mu.Lock()
	st := d.states[k]
	if st == nil || st.tok == "" {
		d.mu.Unlock()
		return
	}
	if rec.Tok == st.tok {
		st.seen = true
		d.mu.Unlock()
		return
	}
	if !st.seen {
		// Written before this replica's own event, which is newer.
		d.mu.Unlock()
		return
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	delete(d.states, k)
	l := st.let
	d.mu.Unlock()
	if l != nil {
		l(false)
	}
}
