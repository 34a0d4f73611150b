package guard

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// progress keeps the records a reaction leaves for whichever replica
// handles its event next (a redelivery after a stop or crash, on this
// replica or another): the retry option's pending retries. Each is kept
// until it is cleared or its time runs out.
type progress struct {
	sh *shared
	mu sync.Mutex
	m  map[string]progressRecord // by shared key
}

// progressRecord is a y record: Value, kept until Until (unix ns).
type progressRecord struct {
	origin
	Until int64           `json:"until"`
	Value json.RawMessage `json:"v"`
}

func newProgress(sh *shared) *progress {
	return &progress{sh: sh, m: map[string]progressRecord{}}
}

// get returns the value recorded under name, if it is still due. A
// record this replica has not seen is asked of the shared state's server:
// the watch that brings in the other replicas' records may lag behind the
// event they left it for (a stopping replica writes, then lets the event
// go, and the redelivery can come first).
func (p *progress) get(ctx context.Context, name string, now time.Time) ([]byte, bool, error) {
	k := sharedKey(kindProgress, name)
	p.mu.Lock()
	r, ok := p.m[k]
	if ok && now.UnixNano() >= r.Until {
		delete(p.m, k)
		ok = false
	}
	p.mu.Unlock()
	if ok {
		return r.Value, true, nil
	}
	st := p.sh.st()
	if st == nil {
		return nil, false, nil
	}
	b, found, err := st.Get(ctx, k)
	if err != nil || !found {
		return nil, false, err
	}
	if json.Unmarshal(b, &r) != nil || now.UnixNano() >= r.Until {
		return nil, false, nil
	}
	return r.Value, true, nil
}

// set records value under name for ttl, here and in the shared state.
// The records do not expire here on their own: those not cleared go when
// the shared state's copy expires, or with the process.
func (p *progress) set(name string, value []byte, ttl time.Duration, now time.Time) {
	k := sharedKey(kindProgress, name)
	r := progressRecord{origin: origin{p.sh.origin}, Until: now.Add(ttl).UnixNano(), Value: value}
	p.mu.Lock()
	p.m[k] = r
	p.mu.Unlock()
	p.sh.put(k, r, ttl)
}

// clear removes name's record, here and in the shared state.
func (p *progress) clear(name string) {
	k := sharedKey(kindProgress, name)
	p.mu.Lock()
	_, ok := p.m[k]
	delete(p.m, k)
	p.mu.Unlock()
	if st := p.sh.st(); st != nil && ok {
		st.Delete(k, time.Minute)
	}
}

// apply brings a change of a y record in.
func (p *progress) apply(key string, value []byte, deleted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if deleted {
		delete(p.m, key)
		return
	}
	var r progressRecord
	if json.Unmarshal(value, &r) != nil || r.Origin == p.sh.origin {
		// This replica's own records are here since it wrote them (and
		// one cleared since must not come back).
		return
	}
	p.m[key] = r
}
