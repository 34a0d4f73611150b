package saltapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// maxBatchBytes bounds the body of a batched request. rest_cherrypy refuses
// bodies over its max_request_body_size (1 MiB by default) with 413; a
// lowstate over the bound is still sent, alone.
const maxBatchBytes = 512 << 10

// ErrOutcomeUnknown is wrapped by the error of a reaction whose lowstate was
// sent in a batch that salt-api failed in a way that may have run part of
// it. Such an error is never retryable; see Driver.Do.
var ErrOutcomeUnknown = errors.New("outcome unknown, not retried: salt-api runs a lowstate list in order and stops at the first lowstate that fails without saying which, so the lowstates before it may have started jobs")

// batchError is the error of one reaction of a batch with an unknown
// outcome. It unwraps to ErrOutcomeUnknown only: the cause may be marked
// retryable, and retrying is exactly what must not happen.
type batchError struct {
	pos, n int
	cause  error
}

func (e *batchError) Error() string {
	return fmt.Sprintf("%v (this reaction was lowstate %d of %d in one request): %v", ErrOutcomeUnknown, e.pos, e.n, e.cause)
}

func (e *batchError) Unwrap() error { return ErrOutcomeUnknown }

// request is one reaction waiting for, or in, a lowstate POST.
type request struct {
	ctx    context.Context
	client string // local, runner or wheel
	low    []byte // the lowstate object, JSON
	done   chan reply
	taken  bool // guarded by Driver.qmu: it left the queue for a POST

	// A local reaction whose target is literal minion ids can share one
	// lowstate with others that differ only in that target (see merge):
	// ids are its minions, mergeKey its lowstate without the target, and
	// lowMap the lowstate to build the shared one from.
	ids      []string
	mergeKey string
	lowMap   *event.Map
}

// group is one lowstate of a POST: a request alone, or several local
// reactions merged into one job with a list target.
type group struct {
	reqs []*request
	ids  map[string]bool
}

// merge groups the requests of a batch into lowstates, in order: a local
// reaction for literal minion ids joins the first earlier group with the
// same mergeKey that holds none of its minions (so each reaction still gets
// a job on each of its minions of its own), else starts a group. Salt runs
// one job for a group; every reaction of it gets that jid, with its own
// minions.
func merge(batch []*request, maxMerge int) []*group {
	var groups []*group
	open := map[string][]*group{}
	for _, r := range batch {
		if r.mergeKey != "" && maxMerge > 1 {
			joined := false
			for _, g := range open[r.mergeKey] {
				if len(g.reqs) >= maxMerge || slices.ContainsFunc(r.ids, func(id string) bool { return g.ids[id] }) {
					continue
				}
				g.reqs = append(g.reqs, r)
				for _, id := range r.ids {
					g.ids[id] = true
				}
				joined = true
				break
			}
			if joined {
				continue
			}
		}
		g := &group{reqs: []*request{r}, ids: map[string]bool{}}
		for _, id := range r.ids {
			g.ids[id] = true
		}
		groups = append(groups, g)
		if r.mergeKey != "" {
			open[r.mergeKey] = append(open[r.mergeKey], g)
		}
	}
	return groups
}

// lowstate is the group's lowstate JSON.
func (g *group) lowstate() ([]byte, error) {
	if len(g.reqs) == 1 {
		return g.reqs[0].low, nil
	}
	low := g.reqs[0].lowMap.Clone()
	var tgt []any
	for _, r := range g.reqs {
		for _, id := range r.ids {
			tgt = append(tgt, id)
		}
	}
	low.Set("tgt", tgt)
	low.Set("tgt_type", "list")
	return event.AppendJSON(nil, low)
}

// replies turns the group's return into one reply per request.
func (g *group) replies(ret json.RawMessage) []reply {
	res, err := parseReturn(g.reqs[0].client, ret)
	reps := make([]reply, len(g.reqs))
	if len(g.reqs) == 1 || (err != nil && !errors.Is(err, ErrNoMinions)) {
		for i := range reps {
			reps[i] = reply{res: res, err: err}
		}
		return reps
	}
	for i, r := range g.reqs {
		var own []string
		for _, id := range r.ids {
			if slices.Contains(res.Minions, id) {
				own = append(own, id)
			}
		}
		if len(own) == 0 {
			reps[i].err = ErrNoMinions
			continue
		}
		reps[i].res = actions.Result{JID: res.JID, Minions: own}
	}
	return reps
}

// reply is the outcome of one request.
type reply struct {
	res actions.Result
	err error
}

// dispatch queues r and waits for its reply or the end of ctx.
func (d *Driver) dispatch(ctx context.Context, r *request) (actions.Result, error) {
	d.enqueue(r)
	select {
	case rep := <-r.done:
		return rep.res, rep.err
	case <-ctx.Done():
	}
	if d.withdraw(r) {
		return actions.Result{}, ctx.Err()
	}
	select {
	case rep := <-r.done:
		return rep.res, rep.err
	default:
	}
	return actions.Result{}, fmt.Errorf("%w (its request was under way; the job may still start)", ctx.Err())
}

// enqueue adds r to the queue and, when fewer than maxInFlight requests
// run, starts a sender. When other requests run, the sender posts r with
// whatever arrives within gatherWindow; when none does, it posts r at
// once.
func (d *Driver) enqueue(r *request) {
	d.qmu.Lock()
	d.queue = append(d.queue, r)
	if d.inFlight >= d.maxInFlight {
		d.qmu.Unlock()
		return
	}
	gather := d.inFlight > 0
	d.inFlight++
	d.qmu.Unlock()
	go d.sender(gather)
}

// gatherWindow is how long a free request slot waits for other reactions
// before it posts, while another request is running. Reactions come in
// waves (the lanes whose request just ended all send their next one at
// once); a couple of milliseconds let a wave go out as one POST, merged
// where it can be, instead of one lowstate taking the slot alone. A
// reaction that finds salt-api idle does not wait: one minion's reactions
// come one at a time (its lane waits for each job before the next event),
// and waiting before each would add the window to every round trip, about
// 5% of salt-api's (see docs/speed.md).
const gatherWindow = 2 * time.Millisecond

// withdraw removes r from the queue; it reports false when r was already
// taken for a POST.
func (d *Driver) withdraw(r *request) bool {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if r.taken {
		return false
	}
	if i := slices.Index(d.queue, r); i >= 0 {
		d.queue = slices.Delete(d.queue, i, i+1)
	}
	r.taken = true
	return true
}

// takeLocked takes the next batch from the front of the queue: up to
// maxBatch requests and maxBatchBytes of body, or a single request while
// salt-api is failing. Requests whose caller has gone are answered and
// dropped. d.qmu is held.
func (d *Driver) takeLocked() []*request {
	limit := d.maxBatch
	if d.unhealthy {
		limit = 1
	}
	var batch []*request
	size := 2
	i := 0
	for i < len(d.queue) && len(batch) < limit {
		r := d.queue[i]
		if err := r.ctx.Err(); err != nil {
			r.taken = true
			r.done <- reply{err: err}
			i++
			continue
		}
		size += len(r.low) + 1
		if len(batch) > 0 && size > maxBatchBytes {
			break
		}
		r.taken = true
		batch = append(batch, r)
		i++
	}
	d.queue = slices.Delete(d.queue, 0, i)
	return batch
}

// sender waits gatherWindow when asked to gather, then posts batches from
// the queue until it is empty and gives its slot back.
func (d *Driver) sender(gather bool) {
	if gather {
		time.Sleep(gatherWindow)
	}
	for {
		d.qmu.Lock()
		batch := d.takeLocked()
		if len(batch) == 0 {
			d.inFlight--
			d.qmu.Unlock()
			return
		}
		d.qmu.Unlock()
		d.send(batch)
	}
}

// send POSTs one batch and hands each request its reply. A lone request
// runs under its caller's context, as it always did; a batch under a
// context that ends when all of its callers have gone.
func (d *Driver) send(batch []*request) {
	var reps []reply
	if len(batch) == 1 {
		reps = []reply{d.runOne(batch[0].ctx, batch[0])}
	} else {
		ctx, cancel := batchContext(batch)
		reps = d.runBatch(ctx, batch)
		cancel()
	}
	for i, r := range batch {
		r.done <- reps[i]
	}
}

// batchContext returns a context that is canceled once every request's
// context has ended.
func batchContext(batch []*request) (context.Context, context.CancelFunc) {
	ctxs := make([]context.Context, len(batch))
	for i, r := range batch {
		ctxs[i] = r.ctx
	}
	return actions.AllDone(ctxs)
}

// runOne POSTs a lowstate alone (see run) and reads its job.
func (d *Driver) runOne(ctx context.Context, r *request) reply {
	raw, err := d.run(ctx, listBody([][]byte{r.low}))
	if err != nil {
		return reply{err: err}
	}
	res, err := parseRun(r.client, raw)
	return reply{res: res, err: err}
}

// runBatch POSTs the lowstates of batch as one list and returns one reply
// per request, in order. Driver.Do documents which failures are sent again
// and which leave the outcome unknown.
func (d *Driver) runBatch(ctx context.Context, batch []*request) []reply {
	if len(batch) == 1 {
		return []reply{d.runOne(ctx, batch[0])}
	}
	groups := merge(batch, d.maxMerge)
	lows := make([][]byte, len(groups))
	for i, g := range groups {
		low, err := g.lowstate()
		if err != nil {
			return same(len(batch), fmt.Errorf("encoding a merged lowstate: %w", err))
		}
		lows[i] = low
	}
	body := listBody(lows)
	tok, err := d.token(ctx)
	if err != nil {
		return same(len(batch), ranNothing(err))
	}
	wrote := func() {
		for _, r := range batch {
			actions.Sent(r.ctx) // each caller's lane may go on
		}
	}
	for attempt := 1; ; attempt++ {
		status, raw, sent, err := d.post(ctx, "/", tok, body, wrote)
		if err != nil {
			d.setHealthy(false)
			if !sent {
				return same(len(batch), ranNothing(err))
			}
			return unknown(batch, err)
		}
		d.setHealthy(status >= 200 && status < 300)
		switch {
		case status >= 200 && status < 300:
			return parseBatch(batch, groups, raw)
		case status == http.StatusUnauthorized:
			valid, perr := d.sessionValid(ctx, tok)
			d.retire(tok)
			switch {
			case perr != nil:
				return unknown(batch, fmt.Errorf("%s, and checking the session failed: %w", statusText(status, raw), perr))
			case valid:
				// The session was accepted: a lowstate of the batch
				// was refused (AuthorizationError), possibly after
				// others had run.
				return unknown(batch, errors.New(statusText(status, raw)))
			case !d.canLogin():
				return same(len(batch), fmt.Errorf("salt-api rejected the token (%s) and no credentials are configured to log in again", statusText(status, raw)))
			case attempt > 1:
				return same(len(batch), fmt.Errorf("salt-api refused the session of a new login (%s)", statusText(status, raw)))
			}
			// The session was refused before the body was read:
			// nothing ran, so the batch goes again with a new token.
			if tok, err = d.token(ctx); err != nil {
				return same(len(batch), ranNothing(err))
			}
		case status == http.StatusRequestEntityTooLarge:
			// Refused before the body was read: nothing ran.
			half := len(batch) / 2
			return append(d.runBatch(ctx, batch[:half]), d.runBatch(ctx, batch[half:])...)
		case status == http.StatusTooManyRequests, status >= 300 && status < 400,
			status == http.StatusNotFound, status == http.StatusMethodNotAllowed, status == http.StatusNotAcceptable:
			// Answered before any lowstate ran (by a proxy, or by
			// cherrypy's dispatch and content negotiation).
			return same(len(batch), ranNothing(checkStatus(status, raw)))
		default:
			return unknown(batch, errors.New(statusText(status, raw)))
		}
	}
}

// sessionValid asks salt-api whether it accepts tok by POSTing an empty
// lowstate list: rest_cherrypy checks the session first, then runs the
// (no) lowstates and answers {"return": []}.
func (d *Driver) sessionValid(ctx context.Context, tok string) (bool, error) {
	status, raw, _, err := d.post(ctx, "/", tok, []byte("[]"), nil)
	switch {
	case err != nil:
		return false, err
	case status == http.StatusUnauthorized:
		return false, nil
	case status >= 200 && status < 300:
		return true, nil
	}
	return false, errors.New(statusText(status, raw))
}

// parseBatch reads one return per lowstate (group) from a 2xx answer and
// gives each request of batch its reply.
func parseBatch(batch []*request, groups []*group, raw []byte) []reply {
	var ans runAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return unknown(batch, fmt.Errorf("decoding the answer: %w", err))
	}
	if len(ans.Return) != len(groups) {
		return unknown(batch, fmt.Errorf("the answer holds %d returns for %d lowstates", len(ans.Return), len(groups)))
	}
	byReq := map[*request]reply{}
	for i, g := range groups {
		for j, rep := range g.replies(ans.Return[i]) {
			byReq[g.reqs[j]] = rep
		}
	}
	reps := make([]reply, len(batch))
	for i, r := range batch {
		reps[i] = byReq[r]
	}
	return reps
}

// same gives every request of a batch the same error.
func same(n int, err error) []reply {
	reps := make([]reply, n)
	for i := range reps {
		reps[i].err = err
	}
	return reps
}

// unknown gives every request of a batch an error wrapping
// ErrOutcomeUnknown.
func unknown(batch []*request, cause error) []reply {
	reps := make([]reply, len(batch))
	for i := range reps {
		reps[i].err = &batchError{pos: i + 1, n: len(batch), cause: cause}
	}
	return reps
}

// setHealthy records whether the last lowstate POST succeeded.
func (d *Driver) setHealthy(ok bool) {
	d.qmu.Lock()
	d.unhealthy = !ok
	d.qmu.Unlock()
}
