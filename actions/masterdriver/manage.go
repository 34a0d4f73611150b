package masterdriver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ManageRequest is a request of `salt-run reactor.list|add|delete|
// is_leader|set_leader` that the reactord Salt engine read on the
// master's bus and checked against the master's key.
type ManageRequest struct {
	// ID names the request in the engine (its answer carries it).
	ID string
	// Verb is list, add, delete, is_leader or set_leader.
	Verb string
	// Data is the request's data, without the key: event and reactors
	// for add, event for delete, id and value for set_leader.
	Data map[string]any
	// Master is the id of the master whose engine read it.
	Master string
}

// manageWait is how long one manage-wait request waits in the engine.
const manageWait = 20 * time.Second

// Manage waits on its own connection for the engine's salt-run reactor.*
// requests, hands each to handle and sends its answer (the data of the
// answer event, which the engine fires on the master's bus), until ctx
// ends. A connection that fails is dialled again after a pause.
func (e *Engine) Manage(ctx context.Context, handle func(context.Context, ManageRequest) map[string]any) {
	pool := make(chan *engineConn, 1)
	pool <- &engineConn{}
	defer func() { (<-pool).reset() }()
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, manageWait+10*time.Second)
		ans, err := e.request(wctx, pool, map[string]any{"kind": "manage-wait", "wait": int(manageWait / time.Second)})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Debug("salt-run reactor requests: waiting on the engine", "err", err.Error())
				pause(ctx, 2*time.Second)
			}
			continue
		}
		if m, _ := ans["master"].(string); m != "" {
			e.master.Store(&m)
		}
		reqs, _ := normalize(ans["requests"]).([]any)
		for _, r := range reqs {
			req, err := manageRequest(r)
			if err != nil {
				e.log.Warn("salt-run reactor request unreadable", "err", err.Error())
				continue
			}
			answer := handle(ctx, req)
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = e.request(actx, pool, map[string]any{"kind": "manage-answer", "id": req.ID, "answer": answer})
			cancel()
			if err != nil {
				e.log.Warn("salt-run reactor answer not delivered", "verb", req.Verb, "err", err.Error())
			}
		}
	}
}

// manageRequest reads one request of a manage-wait answer.
func manageRequest(v any) (ManageRequest, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return ManageRequest{}, fmt.Errorf("a request is a map, not %T", v)
	}
	r := ManageRequest{}
	r.ID, _ = m["id"].(string)
	r.Verb, _ = m["verb"].(string)
	r.Master, _ = m["master"].(string)
	r.Data, _ = m["data"].(map[string]any)
	if r.ID == "" || r.Verb == "" {
		return r, errors.New("a request names its id and verb")
	}
	if r.Data == nil {
		r.Data = map[string]any{}
	}
	return r, nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Hello asks the engine for its master's id (Master), before any
// request comes.
func (e *Engine) Hello(ctx context.Context) (string, error) {
	pool := make(chan *engineConn, 1)
	pool <- &engineConn{}
	defer func() { (<-pool).reset() }()
	ans, err := e.request(ctx, pool, map[string]any{"kind": "manage-hello"})
	if err != nil {
		return "", err
	}
	m, _ := ans["master"].(string)
	if m != "" {
		e.master.Store(&m)
	}
	return m, nil
}

// Master is the id of the master whose engine answered Manage's last
// wait ("" before the first).
func (e *Engine) Master() string {
	if p := e.master.Load(); p != nil {
		return *p
	}
	return ""
}
