package shadow

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// Defaults of Options.
const (
	DefaultWindow     = 15 * time.Second
	DefaultSkew       = 2 * time.Second
	DefaultGrace      = 5 * time.Second
	DefaultMasterUser = "root"
	DefaultMaxPending = 100_000
)

// Options configure a Comparer.
type Options struct {
	// Window is how long after an event a job of Salt's reactor may start
	// and still pair with reactord's decision for it (DefaultWindow).
	Window time.Duration
	// Skew is how much earlier than its event a job may be stamped and
	// still pair (the master stamps both; DefaultSkew).
	Skew time.Duration
	// Grace is how long past Window a side waits on reactord's own clock
	// for the other (bridge and queue delays; DefaultGrace).
	Grace time.Duration
	// Hold is the longest a rule option holds an event before it reacts
	// (debounce, collect): a job waits that much longer for the decision.
	Hold time.Duration
	// MasterUser is the user the master runs as: the user of the local jobs
	// Salt's reactor publishes (DefaultMasterUser).
	MasterUser string
	// MaxPending bounds each side's unpaired items; past it the oldest is
	// decided early (DefaultMaxPending).
	MaxPending int
	// Adopt, when set, is called for each job paired at once with a
	// reaction reactord would run: reactord takes the job as its own (the
	// loop guard follows it, as it follows the jobs it starts).
	Adopt func(d *Decision, j *Job)
	// Verdict is called once per verdict, outside the Comparer's lock.
	Verdict func(v Verdict)
	// Child, when set, is called for each local job taken as started by a
	// runner of Salt's reactor (an orchestration's), which gets no
	// verdict; with the Comparer's lock held: it must not call back.
	Child func(j *Job)
	// Overflow, when set, is called when a bound is reached: what says
	// what was cut ("decisions", "jobs", "notes", "runners"); with the
	// Comparer's lock held: it must not call back.
	Overflow func(what string)
}

// Comparer pairs reactord's decisions with Salt's jobs (see the package
// doc for the rule). It is safe for concurrent use; Expire must be called
// now and then (each second) to decide what waited long enough.
type Comparer struct {
	o Options

	mu        sync.Mutex
	decisions queue[pendingDecision]
	jobs      queue[pendingJob]
	notes     []Note
	// runners are the runner jobs of Salt's reactor under way, by jid:
	// when each was seen, and when it returned (zero: not yet); returned
	// are the returns that came before their runner's job event (another
	// lane), by jid.
	runners  map[string]*runSpan
	returned map[string]time.Time
	// early, while the oldest item is decided because a bound was
	// reached, is what its reason says of it.
	early string
	// lagCur and lagPrev are the longest lags of Salt's reactor (from an
	// event to its job, exact pairs) in the current span, begun at lagAt,
	// and in the one before (window).
	lagCur, lagPrev time.Duration
	lagAt           time.Time
	// children counts the local jobs runners started (no verdict).
	children int
}

// runSpan is when a runner job of Salt's reactor ran, as reactord saw it.
type runSpan struct{ seen, done time.Time }

// MaxRunner is how long a runner job of Salt's reactor is taken to run
// when its return never comes.
const MaxRunner = 10 * time.Minute

type pendingDecision struct {
	d    *Decision
	c    call
	done bool
}

type pendingJob struct {
	j    *Job
	c    call
	done bool
}

// queue is the unpaired items of one side, oldest first, with an index
// by exact and by loose key; paired ones are marked done and dropped as
// the head passes them.
type queue[T any] struct {
	items []*T
	exact map[string][]*T
	loose map[string][]*T
	// n is the number of items not done.
	n int
}

func (q *queue[T]) add(it *T, exact, loose string) {
	if q.exact == nil {
		q.exact, q.loose = map[string][]*T{}, map[string][]*T{}
	}
	q.items = append(q.items, it)
	q.n++
	q.exact[exact] = append(q.exact[exact], it)
	q.loose[loose] = append(q.loose[loose], it)
}

// drop removes it from the indexes (it stays in items, done).
func (q *queue[T]) drop(it *T, exact, loose string) {
	q.n--
	q.exact[exact] = remove(q.exact[exact], it)
	if len(q.exact[exact]) == 0 {
		delete(q.exact, exact)
	}
	q.loose[loose] = remove(q.loose[loose], it)
	if len(q.loose[loose]) == 0 {
		delete(q.loose, loose)
	}
}

func remove[T any](s []*T, it *T) []*T {
	for i, x := range s {
		if x == it {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// New returns a Comparer.
func New(o Options) *Comparer {
	o.Window = cmpDur(o.Window, DefaultWindow)
	o.Skew = cmpDur(o.Skew, DefaultSkew)
	o.Grace = cmpDur(o.Grace, DefaultGrace)
	o.MasterUser = cmp.Or(o.MasterUser, DefaultMasterUser)
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	return &Comparer{o: o}
}

func cmpDur(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// SetHold sets Options.Hold (a reload changes the longest debounce or
// collect).
func (c *Comparer) SetHold(d time.Duration) {
	c.mu.Lock()
	c.o.Hold = d
	c.mu.Unlock()
}

// Window returns the pairing window in force (see window).
func (c *Comparer) Window() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.window()
}

// MaxWindow bounds how far the window stretches with Salt's reactor's
// lag.
const MaxWindow = 10 * time.Minute

// lagSpan is how long an observed lag of Salt's reactor keeps stretching
// the window: the lags of the last one to two spans count.
const lagSpan = 5 * time.Minute

// window is the pairing window in force: Options.Window, or, when Salt's
// reactor has been slower than that, 1.5 times the longest lag from an
// event to its job among the exact pairs of the last 5 to 10 minutes
// (Salt's reactor publishes a burst's local jobs one after the other,
// falling behind as it goes), at most MaxWindow; called with mu held.
func (c *Comparer) window() time.Duration {
	return min(max(c.o.Window, max(c.lagCur, c.lagPrev)*3/2), max(c.o.Window, MaxWindow))
}

// lagLocked records the lag of an exact pair: from the event to the job,
// by the master's stamps (else by when reactord saw them); called with mu
// held.
func (c *Comparer) lagLocked(d *Decision, j *Job) {
	lag, now := j.Seen.Sub(d.Seen), j.Seen
	if !d.Stamp.IsZero() && !j.Stamp.IsZero() {
		lag = j.Stamp.Sub(d.Stamp)
	}
	if d.Seen.After(now) {
		now = d.Seen
	}
	if since := now.Sub(c.lagAt); since > 2*lagSpan {
		c.lagPrev, c.lagCur, c.lagAt = 0, 0, now
	} else if since > lagSpan {
		c.lagPrev, c.lagCur, c.lagAt = c.lagCur, 0, now
	}
	c.lagCur = max(c.lagCur, lag)
}

// inWindow reports whether job j may pair with decision d's event: by
// the master's stamps when both have one, else by when reactord saw them.
func (c *Comparer) inWindow(d *Decision, j *Job) bool {
	w := c.window()
	if !d.Stamp.IsZero() && !j.Stamp.IsZero() {
		return !j.Stamp.Before(d.Stamp.Add(-c.o.Skew)) && !j.Stamp.After(d.Stamp.Add(w))
	}
	return !j.Seen.Before(d.Seen.Add(-w)) && !j.Seen.After(d.Seen.Add(w))
}

// Candidate reports whether a job may be Salt's reactor's: runner and
// wheel jobs of the user Reactor, local jobs of the master's user.
func (c *Comparer) Candidate(j *Job) bool {
	switch j.Kind {
	case "runner", "wheel":
		return j.User == "Reactor"
	case "local":
		return j.User == c.o.MasterUser && j.Fun != "saltutil.find_job"
	}
	return false
}

// Decided takes a decision of reactord's; one without a chunk is
// ignored.
func (c *Comparer) Decided(d Decision) {
	if d.Chunk == nil {
		return
	}
	cl, err := callOfChunk(d.Chunk)
	if err != nil {
		cl = call{kind: d.Chunk.Str("state"), fun: d.Chunk.Str("fun")}
	}
	p := &pendingDecision{d: &d, c: cl}
	var out []Verdict
	var adopt *pendingJob
	c.mu.Lock()
	for _, pj := range c.jobs.exact[cl.exact()] {
		if c.inWindow(p.d, pj.j) {
			adopt = pj
			p.done = true // never queued: nothing to take out
			out = append(out, c.pairLocked(p, pj, true))
			break
		}
	}
	if adopt == nil {
		c.decisions.add(p, cl.exact(), cl.loose())
		if c.decisions.n > c.o.MaxPending {
			out = c.earlyLocked("decisions", func() []Verdict { return c.expireLocked(time.Time{}, c.decisions.head().d.Seen, out) })
		}
	}
	c.mu.Unlock()
	c.emit(out, p, adopt)
}

// Job takes a job Salt's master published; one that cannot be Salt's
// reactor's (Candidate) is ignored, and reported false.
func (c *Comparer) Job(j Job) bool {
	if !c.Candidate(&j) {
		return false
	}
	cl := callOfJob(&j)
	p := &pendingJob{j: &j, c: cl}
	var out []Verdict
	var pd *pendingDecision
	c.mu.Lock()
	if j.Kind == "runner" {
		c.runnerLocked(&j)
	}
	for _, x := range c.decisions.exact[cl.exact()] {
		if c.inWindow(x.d, p.j) {
			pd = x
			p.done = true // never queued: nothing to take out
			out = append(out, c.pairLocked(x, p, true))
			break
		}
	}
	if pd == nil {
		c.jobs.add(p, cl.exact(), cl.loose())
		if c.jobs.n > c.o.MaxPending {
			out = c.earlyLocked("jobs", func() []Verdict { return c.expireLocked(c.jobs.head().j.Seen, time.Time{}, out) })
		}
	}
	c.mu.Unlock()
	if pd != nil {
		c.emit(out, pd, p)
	} else {
		c.emit(out, nil, nil)
	}
	return true
}

// RunnerDone takes the return of a runner job (salt/run/<jid>/ret): the
// local jobs of the master's user it started are its own, not reactions
// (an orchestration's jobs), until then.
func (c *Comparer) RunnerDone(jid string, seen time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.runners[jid]; r != nil {
		r.done = seen
		return
	}
	// Its job event is on another lane, and late.
	if len(c.returned) >= c.o.MaxPending {
		c.overflowLocked("runners")
		return
	}
	if c.returned == nil {
		c.returned = map[string]time.Time{}
	}
	c.returned[jid] = seen
}

// runnerLocked records a runner job of Salt's reactor under way; called
// with mu held.
func (c *Comparer) runnerLocked(j *Job) {
	if _, ok := c.runners[j.JID]; ok {
		return // its event again (a redelivery)
	}
	if len(c.runners) >= c.o.MaxPending {
		c.overflowLocked("runners")
		return
	}
	if c.runners == nil {
		c.runners = map[string]*runSpan{}
	}
	r := &runSpan{seen: j.Seen}
	if done, ok := c.returned[j.JID]; ok {
		r.done = done
		delete(c.returned, j.JID)
	}
	c.runners[j.JID] = r
}

// overflowLocked reports a bound reached; called with mu held.
func (c *Comparer) overflowLocked(what string) {
	if c.o.Overflow != nil {
		c.o.Overflow(what)
	}
}

// earlyLocked runs expire, which decides the oldest item of what early
// because a bound was reached, saying so in its reason; called with mu
// held.
func (c *Comparer) earlyLocked(what string, expire func() []Verdict) []Verdict {
	c.overflowLocked(what)
	c.early = fmt.Sprintf(" (decided early: more than %d unpaired %s)", c.o.MaxPending, what)
	defer func() { c.early = "" }()
	return expire()
}

// Children returns how many local jobs were taken as started by a runner
// of Salt's reactor (an orchestration's), which get no verdict.
func (c *Comparer) Children() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.children
}

// childLocked reports whether local job j started while a runner job of
// Salt's reactor ran (Expire forgets the runners long done); called with
// mu held.
func (c *Comparer) childLocked(j *Job) bool {
	for _, r := range c.runners {
		if !j.Seen.Before(r.seen) && !j.Seen.After(r.end()) {
			return true
		}
	}
	return false
}

// end is when the runner is taken to have ended: its return, or
// MaxRunner after it started.
func (r *runSpan) end() time.Time {
	if r.done.IsZero() {
		return r.seen.Add(MaxRunner)
	}
	return r.done
}

// pruneRunnersLocked forgets the runners that ended before t, and the
// early returns seen before t; called with mu held.
func (c *Comparer) pruneRunnersLocked(t time.Time) {
	for jid, r := range c.runners {
		if r.end().Before(t) {
			delete(c.runners, jid)
		}
	}
	for jid, at := range c.returned {
		if at.Before(t) {
			delete(c.returned, jid)
		}
	}
}

// Noted takes a note of a rule that did not react.
func (c *Comparer) Noted(n Note) {
	c.mu.Lock()
	c.notes = append(c.notes, n)
	if len(c.notes) > c.o.MaxPending {
		c.overflowLocked("notes")
		c.notes = c.notes[len(c.notes)-c.o.MaxPending:]
	}
	c.mu.Unlock()
}

// emit hands out the verdicts, and the adoption of an exact pair of a
// reaction reactord would run.
func (c *Comparer) emit(out []Verdict, pd *pendingDecision, pj *pendingJob) {
	if pd != nil && pj != nil && pd.d.Held == "" && c.o.Adopt != nil {
		c.o.Adopt(pd.d, pj.j)
	}
	if c.o.Verdict != nil {
		for _, v := range out {
			c.o.Verdict(v)
		}
	}
}

// pairLocked pairs a decision and a job, taking out of its queue each
// one not yet done (one that was never queued must come done), and
// returns the verdict; called with mu held.
func (c *Comparer) pairLocked(pd *pendingDecision, pj *pendingJob, exact bool) Verdict {
	if !pd.done {
		pd.done = true
		c.decisions.drop(pd, pd.c.exact(), pd.c.loose())
	}
	if !pj.done {
		pj.done = true
		c.jobs.drop(pj, pj.c.exact(), pj.c.loose())
	}
	d, j := pd.d, pj.j
	if exact {
		c.lagLocked(d, j)
	}
	v := Verdict{Decision: d, Job: j}
	switch {
	case d.Held != "" && exact:
		v.Verdict = d.Held
		v.Reason = fmt.Sprintf("%s; Salt's reactor ran it (job %s)", d.Reason, j.JID)
	case d.Held != "":
		// Salt ran the reaction with other arguments than reactord
		// rendered (and holds back): the files differ first.
		v.Verdict = Differ
		v.Reason = fmt.Sprintf("Salt's reactor ran %s (job %s); reactord would render %s, and hold it back: %s", describeJob(j), j.JID, describeChunk(pd), d.Reason)
	case exact:
		v.Verdict = Agree
	default:
		v.Verdict = Differ
		v.Reason = fmt.Sprintf("Salt's reactor ran %s (job %s); reactord would run %s", describeJob(j), j.JID, describeChunk(pd))
	}
	return v
}

// Expire decides what waited long enough at now: a decision Window+Grace
// after reactord made it, a job Window+Grace+Hold after reactord saw it.
func (c *Comparer) Expire(now time.Time) {
	c.mu.Lock()
	w := c.window() + c.o.Grace
	out := c.expireLocked(now.Add(-w-c.o.Hold), now.Add(-w), nil)
	c.dropNotesLocked(now.Add(-2*w - c.o.Hold))
	// A runner is kept while a job it started may still be waiting.
	c.pruneRunnersLocked(now.Add(-2*w - c.o.Hold))
	c.mu.Unlock()
	c.emit(out, nil, nil)
}

// Abandon forgets everything still unpaired and returns how much (a
// stop: deciding it now would call reactord-only what Salt's reactor may
// still start, so none of it gets a verdict).
func (c *Comparer) Abandon() (decisions, jobs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	decisions, jobs = c.decisions.n, c.jobs.n
	c.decisions, c.jobs, c.notes, c.runners, c.returned = queue[pendingDecision]{}, queue[pendingJob]{}, nil, nil, nil
	return decisions, jobs
}

// Pending returns the number of unpaired decisions and jobs.
func (c *Comparer) Pending() (decisions, jobs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decisions.n, c.jobs.n
}

// expireLocked decides the jobs seen up to jobsBefore and the decisions
// made up to decisionsBefore, oldest first; called with mu held.
func (c *Comparer) expireLocked(jobsBefore, decisionsBefore time.Time, out []Verdict) []Verdict {
	for {
		pd := c.decisions.head()
		pj := c.jobs.head()
		dOK := pd != nil && !pd.d.Seen.After(decisionsBefore)
		jOK := pj != nil && !pj.j.Seen.After(jobsBefore)
		switch {
		case dOK && (!jOK || !pj.j.Seen.Before(pd.d.Seen)):
			out = append(out, c.expireDecision(pd))
		case jOK:
			if v, ok := c.expireJob(pj); ok {
				out = append(out, v)
			}
		default:
			return out
		}
	}
}

// head returns the oldest item not yet done, dropping the done ones
// before it.
func (q *queue[T]) head() *T {
	for len(q.items) > 0 {
		it := q.items[0]
		if !isDone(it) {
			return it
		}
		q.items[0] = nil
		q.items = q.items[1:]
	}
	return nil
}

func isDone(it any) bool {
	switch x := it.(type) {
	case *pendingDecision:
		return x.done
	case *pendingJob:
		return x.done
	}
	return true
}

// expireDecision decides an unpaired decision: a job of the same
// function in its window differs; none: reactord-only, or, for one held
// back, an agreement (neither ran it).
func (c *Comparer) expireDecision(pd *pendingDecision) Verdict {
	for _, pj := range c.jobs.loose[pd.c.loose()] {
		if c.inWindow(pd.d, pj.j) {
			return c.pairLocked(pd, pj, false)
		}
	}
	pd.done = true
	c.decisions.drop(pd, pd.c.exact(), pd.c.loose())
	d := pd.d
	if d.Held != "" {
		return Verdict{Verdict: Agree, Decision: d, Reason: d.Reason + "; Salt's reactor did not run it either"}
	}
	return Verdict{Verdict: ReactordOnly, Decision: d,
		Reason: fmt.Sprintf("reactord would run %s (rule %q, file %s): Salt's reactor started no such job within %s of the event%s", describeChunk(pd), d.Rule, d.File, c.window(), c.early)}
}

// expireJob decides an unpaired job: a decision of the same function in
// its window differs; else a note in its window accounts for it, or
// nothing does.
func (c *Comparer) expireJob(pj *pendingJob) (Verdict, bool) {
	for _, pd := range c.decisions.loose[pj.c.loose()] {
		if c.inWindow(pd.d, pj.j) {
			return c.pairLocked(pd, pj, false), true
		}
	}
	pj.done = true
	c.jobs.drop(pj, pj.c.exact(), pj.c.loose())
	j := pj.j
	n := c.noteFor(j)
	// A note accounts for the job when it is about a minion the job runs
	// on, or when there is no minion to compare (a runner or wheel job, an
	// event of no minion).
	accounts := n != nil && (n.about(j) || n.Minion == "" || j.Kind != "local")
	// A runner's own job, unless a gate reactord applies on purpose
	// accounts for it (a note of a rule that did not react otherwise — a
	// when — is weaker evidence than the run it started in).
	if j.Kind == "local" && !(accounts && n.held() != "") && c.childLocked(j) {
		c.children++
		if c.o.Child != nil {
			c.o.Child(j)
		}
		return Verdict{}, false
	}
	v := Verdict{Job: j}
	if accounts {
		v.Note = n
	}
	why := fmt.Sprintf("no reaction of reactord's in the %s before it accounts for it, and no rule of reactord's that matched an event then refused it", c.window())
	if n != nil {
		why = fmt.Sprintf("rule %q did not react to %s (event %s): %s", n.Rule, n.Tag, n.EventID, n.Note)
		if h := n.held(); h != "" && accounts {
			v.Verdict = h
			v.Reason = fmt.Sprintf("Salt's reactor ran %s (job %s); reactord would not: %s%s", describeJob(j), j.JID, why, c.early)
			return v, true
		}
	}
	if j.Kind == "local" && !accounts {
		v.Verdict = Ambiguous
		v.Reason = fmt.Sprintf("local job %s (%s) of the master's user %q: Salt's reactor, or someone as %q, started it; %s%s",
			j.JID, describeJob(j), j.User, j.User, why, c.early)
		return v, true
	}
	v.Verdict = SaltOnly
	v.Reason = fmt.Sprintf("Salt's reactor ran %s (job %s); reactord would not: %s%s", describeJob(j), j.JID, why, c.early)
	return v, true
}

// noteFor returns the note that best accounts for job j: in its window,
// of an event of a minion it targets when there is one, the latest.
func (c *Comparer) noteFor(j *Job) *Note {
	var best *Note
	bestMinion := false
	// The notes kept are those of the last 2×(Window+Grace)+Hold: a scan
	// of them all (a job held up in the bridge's spool still pairs by its
	// stamp).
	for i := len(c.notes) - 1; i >= 0; i-- {
		n := &c.notes[i]
		d := Decision{Stamp: n.Stamp, Seen: n.Seen}
		if !c.inWindow(&d, j) {
			continue
		}
		m := n.about(j)
		if best == nil || (m && !bestMinion) {
			best, bestMinion = n, m
		}
		if bestMinion {
			break
		}
	}
	if best == nil {
		return nil
	}
	cp := *best
	return &cp
}

// about reports whether job j runs on the minion note n's event is
// about, or on the one that sent it.
func (n *Note) about(j *Job) bool {
	return (n.Minion != "" && targets(j, n.Minion)) || (n.Sender != "" && targets(j, n.Sender))
}

// dropNotesLocked forgets notes seen before t.
func (c *Comparer) dropNotesLocked(t time.Time) {
	i := 0
	for i < len(c.notes) && c.notes[i].Seen.Before(t) {
		i++
	}
	if i > 0 {
		c.notes = append(c.notes[:0], c.notes[i:]...)
	}
}

// targets reports whether job j ran on, or targets, minion.
func targets(j *Job, minion string) bool {
	for _, m := range j.Minions {
		if m == minion {
			return true
		}
	}
	switch t := j.Tgt.(type) {
	case string:
		return t == minion || strings.Contains(","+t+",", ","+minion+",")
	case []any:
		for _, x := range t {
			if x == minion {
				return true
			}
		}
	}
	return false
}

// describeJob says what a job ran: kind, function, target and arguments.
func describeJob(j *Job) string {
	if j.Kind == "local" {
		return fmt.Sprintf("local %s on %s %s with %s", j.Fun, cmp.Or(j.TgtType, "glob"), canonical(j.Tgt), canonical(j.Arg))
	}
	return fmt.Sprintf("%s %s with %s", j.Kind, j.Fun, canonical(j.Arg))
}

// describeChunk says what a decision would run, as describeJob does.
func describeChunk(pd *pendingDecision) string {
	ch := pd.d.Chunk
	if pd.c.kind == "local" {
		tgt, _ := ch.Get("tgt")
		return fmt.Sprintf("local %s on %s %s with %s", pd.c.fun, cmp.Or(ch.Str("tgt_type"), "glob"), canonical(tgt), argsOf(ch))
	}
	return fmt.Sprintf("%s %s with %s", pd.c.kind, pd.c.fun, argsOf(ch))
}

// argsOf is a chunk's arguments as Salt would publish them.
func argsOf(ch *event.Chunk) string {
	sc, err := actions.CallFor(ch)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	a := canonical(sc.Arg)
	if sc.Kwarg != nil && sc.Kwarg.Len() > 0 {
		a += " " + canonical(sc.Kwarg)
	}
	return a
}
