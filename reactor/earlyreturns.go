package reactor

import (
	"maps"
	"sync"
	"time"
)

// earlyReturns keeps, for a short while, the job returns that arrived
// before the dispatch that started their job told the rule options about
// it (another lane handled the return first): a concurrency slot or a
// retry that starts following the job takes them then. Bounded in age and
// size.
type earlyReturns struct {
	mu    sync.Mutex
	byJID map[string]map[string]bool // jid → minion → failed
	order []earlyEntry
}

type earlyEntry struct {
	jid string
	at  time.Time
}

const (
	earlyReturnsKeep = 2 * time.Minute
	earlyReturnsMax  = 100_000
)

// add records minion's return of jid.
func (e *earlyReturns) add(jid, minion string, failed bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byJID == nil {
		e.byJID = map[string]map[string]bool{}
	}
	m := e.byJID[jid]
	if m == nil {
		m = map[string]bool{}
		e.byJID[jid] = m
		e.order = append(e.order, earlyEntry{jid, now})
	}
	m[minion] = failed
	n := 0
	for n < len(e.order) && (len(e.order)-n > earlyReturnsMax || now.Sub(e.order[n].at) > earlyReturnsKeep) {
		delete(e.byJID, e.order[n].jid)
		n++
	}
	e.order = e.order[n:]
}

// of returns a copy of the returns recorded for jid (minion → failed).
func (e *earlyReturns) of(jid string) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.byJID[jid])
}

// filterJobs keeps in m[jid] the jobs of js keep reports true for (in
// place), deleting the key when none is left: how concurrency slots and
// retries drop the jobs a return or the timeout ended.
func filterJobs[J any](m map[string][]J, jid string, js []J, keep func(J) bool) {
	kept := js[:0]
	for _, j := range js {
		if keep(j) {
			kept = append(kept, j)
		}
	}
	if len(kept) == 0 {
		delete(m, jid)
	} else {
		m[jid] = kept
	}
}
