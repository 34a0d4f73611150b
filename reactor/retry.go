package reactor

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/ratelog"
)

// retries applies the rules' retry option to local reactions: once every
// target of a job returned (or the job timeout passed), the minions where
// it failed get the job again, after the backoff, up to the attempts. The
// event stays unacknowledged until its jobs are through, so a stop or a
// crash leaves it to JetStream's redelivery.
type retries struct {
	re      *Reactor
	mu      sync.Mutex
	jobs    map[string][]*retryJob // by jid: reactions merged into one job share it
	timers  map[*retryJob]*time.Timer
	timeout time.Duration
	stopped bool
	early   *earlyReturns
	// readLog limits the lines of failed reads of pending retries (the
	// shared state down: every such event would log one).
	readLog *ratelog.Every
}

// maxRetryBackoff bounds the wait before a retry, however many attempts.
const maxRetryBackoff = time.Hour

// retryJob is one run (first or retry) of a reaction's job.
type retryJob struct {
	ev       *inflight
	hold     *eventHold
	chunk    *event.Chunk
	rule     chunkRule
	opts     config.Retry
	attempt  int // 0 for the reaction's own job
	jid      string
	waiting  map[string]bool
	failed   []string
	deadline time.Time
}

func newRetries(re *Reactor, timeout time.Duration, early *earlyReturns) *retries {
	return &retries{re: re, jobs: map[string][]*retryJob{}, timers: map[*retryJob]*time.Timer{}, timeout: timeout, early: early,
		readLog: ratelog.New(time.Minute)}
}

// track follows a job a reaction of a rule with the retry option started;
// returns that came before count.
func (r *retries) track(ctx context.Context, ev *inflight, c *event.Chunk, rule chunkRule, jid string, targets []string, attempt int, hold *eventHold, now time.Time) {
	j := &retryJob{ev: ev, hold: hold, chunk: c, rule: rule, opts: rule.retry, attempt: attempt, jid: jid,
		waiting: map[string]bool{}, deadline: now.Add(r.timeout)}
	r.mu.Lock()
	// Read under r.mu: a return handled meanwhile is either among these or
	// finds the job below (its lane adds it here before it asks retries).
	early := r.early.of(jid)
	for _, t := range targets {
		failed, came := early[t]
		switch {
		case !came:
			j.waiting[t] = true
		case failed && j.opts.OnFailed:
			j.failed = append(j.failed, t)
		}
	}
	if r.stopped {
		r.mu.Unlock()
		hold.let(true)
		return
	}
	// Read under r.mu: once j is in r.jobs, a return handled on another
	// lane (or another replica's, followed) changes j.waiting.
	done := len(j.waiting) == 0
	if !done {
		r.jobs[jid] = append(r.jobs[jid], j)
	}
	r.mu.Unlock()
	if done {
		r.resolve(ctx, j)
	}
}

// returned records a minion's return of jid, failed or not.
func (r *retries) returned(ctx context.Context, jid, minion string, failed bool) {
	r.mu.Lock()
	js := r.jobs[jid]
	var done []*retryJob
	filterJobs(r.jobs, jid, js, func(j *retryJob) bool {
		if j.waiting[minion] {
			delete(j.waiting, minion)
			if failed && j.opts.OnFailed {
				j.failed = append(j.failed, minion)
			}
		}
		if len(j.waiting) == 0 {
			done = append(done, j)
			return false
		}
		return true
	})
	r.mu.Unlock()
	for _, j := range done {
		r.resolve(ctx, j)
	}
}

// expire ends the jobs past the job timeout: the minions that did not
// return count as failed with on: [no_return].
func (r *retries) expire(ctx context.Context, now time.Time) {
	r.mu.Lock()
	var due []*retryJob
	for jid, js := range r.jobs {
		filterJobs(r.jobs, jid, js, func(j *retryJob) bool {
			if !now.After(j.deadline) {
				return true
			}
			if j.opts.OnNoReturn {
				for m := range j.waiting {
					j.failed = append(j.failed, m)
				}
			}
			due = append(due, j)
			return false
		})
	}
	r.mu.Unlock()
	for _, j := range due {
		r.resolve(ctx, j)
	}
}

// resolve retries the job's failed minions after the backoff, or lets the
// event go when none failed or the attempts are used up.
func (r *retries) resolve(ctx context.Context, j *retryJob) {
	re := r.re
	slices.Sort(j.failed)
	if len(j.failed) == 0 {
		if j.attempt > 0 {
			re.opts.Metrics.Retries.WithLabelValues("succeeded").Inc()
			re.opts.Log.Info(msgRetrySucceeded, "event_id", j.ev.id, "tag", j.ev.tag, "id", j.chunk.Str("__id__"), "jid", j.jid, "attempt", j.attempt)
		}
		r.through(j)
		return
	}
	if j.attempt >= j.opts.Attempts {
		re.record(j.ev, Decision{Reason: RetryGaveUp, Rule: j.rule.glob, RuleID: j.rule.reaction.Rule, Chunk: j.chunk, JID: j.jid, Minion: strings.Join(j.failed, ","),
			Detail: fmt.Sprintf("retry: still failed after %d attempts", j.opts.Attempts), Attrs: []any{"attempts", j.opts.Attempts}})
		r.through(j)
		return
	}
	wait := min(j.opts.Backoff<<min(j.attempt, 20), maxRetryBackoff)
	now := time.Now()
	if name := progressName(j.ev, j.rule); name != "" {
		// Whichever replica handles the event next (a stop, a crash)
		// runs this retry, not the whole reaction again.
		b, _ := json.Marshal(retryProgress{Attempt: j.attempt + 1, Minions: j.failed, At: now.Add(wait).UnixNano(), JID: j.jid})
		re.opts.Guard.SetProgress(name, b, wait+r.timeout+progressSlack, now)
	}
	re.opts.Log.Info(msgRetrying, "event_id", j.ev.id, "tag", j.ev.tag, "id", j.chunk.Str("__id__"),
		"jid", j.jid, "minions", j.failed, "attempt", j.attempt+1, "of", j.opts.Attempts, "in", wait.String())
	r.schedule(ctx, j, wait)
}

// progressSlack is how much longer than the retry and its job a pending
// retry's record is kept for the next delivery of its event.
const progressSlack = 10 * time.Minute

// retryProgress is what a reaction's retries leave for the next delivery
// of its event (guard.Guard.SetProgress): the attempt to run, on which
// minions, and when; JID is the job that failed there.
type retryProgress struct {
	Attempt int      `json:"attempt"`
	Minions []string `json:"minions"`
	At      int64    `json:"at"`
	JID     string   `json:"jid,omitempty"`
}

// progressName names the retries of one reaction (its rule's ID and its
// ID) for one event (its stream sequence, and a hash of its body: a
// stream made again numbers other events the same); "" for an event that
// has no sequence (core NATS: no redelivery either).
func progressName(ev *inflight, rule chunkRule) string {
	if ev.dl.Seq == 0 {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write(ev.dl.Body)
	return "retry/" + strconv.FormatUint(ev.dl.Seq, 10) + "/" + strconv.FormatUint(uint64(h.Sum32()), 16) + "/" + rule.reaction.Rule + "/" + rule.reaction.ID
}

// through ends a reaction's retries: its record goes, its event is let
// go.
func (r *retries) through(j *retryJob) {
	if name := progressName(j.ev, j.rule); name != "" {
		r.re.opts.Guard.ClearProgress(name)
	}
	j.hold.let(false)
}

// schedule runs the job again on its failed minions after wait, keeping
// the reaction's concurrency place meanwhile.
func (r *retries) schedule(ctx context.Context, j *retryJob, wait time.Duration) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		r.giveBack(j.hold)
		return
	}
	// The retry keeps the reaction's concurrency place until it is done.
	r.re.limits.hold(j.ev.id, j.rule.reaction.Rule)
	r.timers[j] = time.AfterFunc(wait, func() {
		r.re.runTask(func() {
			r.mu.Lock()
			_, pending := r.timers[j]
			delete(r.timers, j)
			r.mu.Unlock()
			if pending {
				r.again(ctx, j)
			}
		})
	})
	r.mu.Unlock()
}

// resume takes up the retries a reaction left for its event (recorded by
// resolve on this replica or another before a stop or a crash): the
// pending retry runs, at its time, on its minions, in place of the
// reaction. It reports whether there was one.
func (r *retries) resume(ctx context.Context, ev *inflight, c *event.Chunk, rule chunkRule) bool {
	re := r.re
	name := progressName(ev, rule)
	if name == "" {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, progressReadWait)
	b, ok, err := re.opts.Guard.Progress(rctx, name, time.Now())
	cancel()
	if err != nil {
		if n, logNow := r.readLog.Tick(); logNow {
			re.opts.Log.Warn(msgRetryReadFailed, "event_id", ev.id, "tag", ev.tag, "id", c.Str("__id__"), "err", err, "failures_since_last_line", n,
				"fix", fixShared)
		}
	}
	var p retryProgress
	if !ok || json.Unmarshal(b, &p) != nil || p.Attempt < 1 || len(p.Minions) == 0 {
		return false
	}
	j := &retryJob{ev: ev, hold: re.holdFor(ev), chunk: c, rule: rule, opts: rule.retry, attempt: p.Attempt - 1, jid: p.JID, failed: p.Minions}
	re.opts.Metrics.Retries.WithLabelValues("resumed").Inc()
	if j.attempt >= j.opts.Attempts {
		// The rule allows fewer attempts than when the retry was recorded.
		r.resolve(ctx, j)
		return true
	}
	wait := max(time.Until(time.Unix(0, p.At)), 0)
	re.opts.Log.Info(msgRetryResumed,
		"event_id", ev.id, "tag", ev.tag, "id", c.Str("__id__"), "jid", p.JID, "minions", p.Minions, "attempt", p.Attempt, "of", j.opts.Attempts, "in", wait.Round(time.Millisecond).String())
	r.schedule(ctx, j, wait) // the retry's dispatch is in the ledger
	return true
}

// progressReadWait bounds the read of a reaction's pending retries from
// the shared state's server.
const progressReadWait = 2 * time.Second

// handOverWait bounds how long a stop waits for the pending retries'
// records to reach the shared state before it lets their events go.
const handOverWait = 2 * time.Second

// giveBack lets events go for redelivery once the records of their
// pending retries are in the shared state (or handOverWait passed,
// logged): the replica that takes an event next must find them, or it
// runs the whole reaction again.
func (r *retries) giveBack(holds ...*eventHold) {
	if len(holds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOverWait)
	defer cancel()
	if err := r.re.opts.Guard.SyncShared(ctx); err != nil {
		r.re.opts.Log.Warn(msgRetryHandOver, "err", err, "fix", fixShared)
	}
	for _, h := range holds {
		h.let(true)
	}
}

// again runs the job once more on the minions where it failed.
func (r *retries) again(ctx context.Context, j *retryJob) {
	re := r.re
	c := j.chunk.Clone()
	c.Set("tgt", strings.Join(j.failed, ","))
	c.Set("tgt_type", "list")
	a := actions.Action{Tag: j.ev.tag, Chunk: c, Hop: j.ev.dl.Hop}
	if j.ev.dl.MsgID != "" {
		a.Key = fmt.Sprintf("%s/%s/%s/retry%d", j.ev.dl.MsgID, c.Str("__sls__"), c.Str("__id__"), j.attempt+1)
	}
	re.opts.Metrics.Retries.WithLabelValues("retried").Inc()
	// While the retry's call runs, its minions' events wait to be judged
	// until the guard knows its job, as a lane's own calls' do.
	if d := re.dispatching(j.ev, c, j.rule); d != nil {
		defer d.Done() // after Started, below
	}
	res, err := re.opts.Retry.Do(ctx, a)
	// Its place passes to the retry's job (or to the next retry).
	defer re.limits.unhold(j.ev.id, j.rule.reaction.Rule)
	next := &retryJob{ev: j.ev, hold: j.hold, chunk: j.chunk, rule: j.rule, opts: j.opts, attempt: j.attempt + 1}
	if err != nil {
		re.opts.Log.Error(msgRetryFailed, "event_id", j.ev.id, "tag", j.ev.tag, "id", c.Str("__id__"), "attempt", next.attempt, "err", err)
		next.jid, next.failed = j.jid, j.failed
		r.resolve(ctx, next)
		return
	}
	now := time.Now()
	re.opts.Guard.Started(j.ev.id, j.rule.reaction, res.JID, j.failed, now)
	re.limits.started(j.ev.id, j.rule.reaction.Rule, res.JID, j.failed, now)
	re.record(j.ev, Decision{Reason: Retried, Rule: j.rule.glob, RuleID: j.rule.reaction.Rule, Chunk: c, JID: res.JID, Minion: strings.Join(j.failed, ","), Detail: fmt.Sprintf("retry %d of %d (job %s failed there): %s %s %s", next.attempt, j.opts.Attempts, j.jid, re.opts.Driver.Name(), c.Str("state"), c.Str("fun"))})
	if res.JID == "" {
		// Nothing to follow: the retry is the last word.
		r.through(j)
		return
	}
	r.track(ctx, j.ev, j.chunk, j.rule, res.JID, j.failed, next.attempt, j.hold, now)
}

// stop cancels the retries waiting for their backoff and lets their
// events go for redelivery; jobs still running are let go too. It returns
// how many events it gave back.
func (r *retries) stop() int {
	r.mu.Lock()
	r.stopped = true
	var holds []*eventHold
	for j, t := range r.timers {
		t.Stop()
		holds = append(holds, j.hold)
	}
	clear(r.timers)
	for jid, js := range r.jobs {
		for _, j := range js {
			holds = append(holds, j.hold)
		}
		delete(r.jobs, jid)
	}
	r.mu.Unlock()
	r.giveBack(holds...)
	return len(holds)
}

// returnFailed reads a job return's data: whether the job failed there
// (success false, or a non-zero retcode; data that is not a JSON object
// counts as failed).
func returnFailed(raw []byte) bool {
	var v [2][]byte
	if !event.Members(raw, []string{"success", "retcode"}, v[:]) {
		return true
	}
	if string(v[0]) == "false" {
		return true
	}
	rc, err := strconv.ParseFloat(string(v[1]), 64)
	return err == nil && rc != 0
}
