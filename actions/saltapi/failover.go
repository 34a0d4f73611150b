package saltapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/redact"
)

// notRunError marks a failure after which salt-api provably ran nothing of
// the request: it was not completely written, the login before it failed,
// or salt-api refused it before reading it.
type notRunError struct{ err error }

func (e notRunError) Error() string { return e.err.Error() }
func (e notRunError) Unwrap() error { return e.err }

// ranNothing marks err as a failure that ran nothing.
func ranNothing(err error) error {
	if err == nil {
		return nil
	}
	return notRunError{err}
}

// RanNothing reports whether err, or an error it wraps, is a failure after
// which salt-api provably started no job: the request was not completely
// written (a refused connection), the login before it failed, or salt-api
// answered before running anything (429, or for a lowstate sent alone 503
// "Salt Master is not available", which salt-api checks before it runs a
// lowstate). A timeout,
// a broken connection after the request was written, a 500 or 504 are not:
// the master may have published the job.
func RanNothing(err error) bool {
	var n notRunError
	return errors.As(err, &n)
}

// refusedUnrun reports whether an answer to a lone lowstate refused it
// before it ran: a proxy's 429, or salt-api's 503 for a master whose
// sockets are gone (SaltDaemonNotRunning, raised before the lowstate is
// looked at; in a batch, the lowstates before the refused one may have
// run).
func refusedUnrun(status int, raw []byte) bool {
	return status == http.StatusTooManyRequests ||
		status == http.StatusServiceUnavailable && bytes.Contains(raw, []byte("Salt Master is not available"))
}

// Failover runs reactions through one of several salt-api servers, one per
// master of a multi-master Salt, in order of preference: the master that
// last started a job, else the next in the list; the health probe (Probe)
// sets it to the first of the list that answers. It is safe for concurrent
// use.
//
// A wheel key reaction (key.accept, key.reject, key.delete and their _dict
// forms) runs on every master instead: each keeps its own minion keys.
//
// A reaction goes to the next master only after a failure that provably
// started no job (RanNothing: a refused connection, a failed login, a 503
// "Salt Master is not available"); once every master has failed so, the
// error is retryable and the retry starts over. Any other failure (a
// timeout or broken connection after the request was written, a 500 or a
// 504 — what salt-api answers when its master died or is too slow to
// answer a publish in time) leaves it unknown whether that master published
// the job: the reaction is never sent to another master, and its retries,
// if its error is retryable, go to that master alone, as with a single
// URL. New reactions move to the next master after a failure that shows
// the master down (RanNothing); after an unknown outcome they stay, as a
// live but slow master answers so too (and in a failover multi-master,
// only the minions' current master reaches them), until the health probe
// finds that master's salt-api not answering (a dead master's salt-api
// does not answer /login).
type Failover struct {
	drivers []*Driver
	urls    []string
	log     *slog.Logger

	mu  sync.Mutex
	cur int // where a new reaction starts
	// pinned are the reactions whose outcome is unknown at a master (by
	// their chunk, which the retry stage passes again), with that master.
	pinned map[*event.Chunk]pin
	probed string // the last probe's failures
}

// pin is a reaction's master and when it was pinned.
type pin struct {
	idx int
	at  time.Time
}

// pinTTL is how long a reaction stays pinned to a master after an unknown
// outcome: longer than any retry stage keeps a reaction.
const pinTTL = 30 * time.Minute

// FailoverConfig configures NewFailover.
type FailoverConfig struct {
	// Config is the configuration of each salt-api; its URL is ignored.
	Config Config
	// URLs are the salt-api base URLs, one per master, in order of
	// preference.
	URLs []string
	// Logger receives a line each time reactions move to another master;
	// nil means slog.Default().
	Logger *slog.Logger
}

// NewFailover validates cfg and returns a driver over cfg.URLs. Like New,
// it does not contact salt-api.
func NewFailover(cfg FailoverConfig) (*Failover, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("saltapi: url is required")
	}
	f := &Failover{urls: cfg.URLs, log: cfg.Logger, pinned: map[*event.Chunk]pin{}}
	if f.log == nil {
		f.log = slog.Default()
	}
	var errs []error
	seen := map[string]bool{}
	for _, u := range cfg.URLs {
		c := cfg.Config
		c.URL = u
		key := strings.TrimRight(u, "/")
		if seen[key] {
			errs = append(errs, fmt.Errorf("saltapi: url %q is listed twice", redact.URL(u)))
			continue
		}
		seen[key] = true
		d, err := New(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.drivers = append(f.drivers, d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// Name implements actions.Driver.
func (f *Failover) Name() string { return "saltapi" }

// Supports implements actions.Driver.
func (f *Failover) Supports(state string) bool { return f.drivers[0].Supports(state) }

// SaysSent implements the method of actions.SaysSent: once the POST to
// the master that runs the reaction is written (for a key reaction, to
// the last master: everyMaster).
func (f *Failover) SaysSent(state string) bool { return f.drivers[0].SaysSent(state) }

// Describe implements actions.Describer with the first salt-api.
func (f *Failover) Describe(a actions.Action) (string, error) { return f.drivers[0].Describe(a) }

// Do implements actions.Driver; see Failover for which failures move a
// reaction to the next master.
func (f *Failover) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	if a.Chunk != nil {
		if call, err := actions.CallFor(a.Chunk); err == nil && call.Client == "wheel" && everyMasterKeyFuns[call.Fun] {
			return f.everyMaster(ctx, a)
		}
	}
	f.mu.Lock()
	start, pinned := f.cur, false
	if p, ok := f.pinned[a.Chunk]; ok && a.Chunk != nil {
		start, pinned = p.idx, true
	}
	f.mu.Unlock()
	if pinned {
		res, err := f.drivers[start].Do(ctx, a)
		if err == nil || !actions.IsRetryable(err) {
			f.unpin(a.Chunk)
		}
		f.outcome(ctx, start, err)
		if err != nil {
			return res, fmt.Errorf("%s (its outcome was unknown there, so it is not sent to another master): %w", redact.URL(f.urls[start]), err)
		}
		return res, nil
	}
	var errs []error
	for i := range f.drivers {
		idx := (start + i) % len(f.drivers)
		res, err := f.drivers[idx].Do(ctx, a)
		f.outcome(ctx, idx, err)
		if err == nil {
			return res, nil
		}
		err = fmt.Errorf("%s: %w", redact.URL(f.urls[idx]), err)
		if ctx.Err() != nil || !RanNothing(err) {
			if actions.IsRetryable(err) && a.Chunk != nil {
				f.pin(a.Chunk, idx)
			}
			return res, err
		}
		errs = append(errs, err)
	}
	// No master started it: a retry may try them all again.
	return actions.Result{}, actions.Retryable(fmt.Errorf("no salt-api took the reaction: %w", errors.Join(errs...)))
}

// everyMasterKeyFuns are the wheel key functions run on every master:
// those that change a minion's key and change nothing when run again.
// key.gen_accept and key.gen make a new key pair on each run, and key.list
// or key.finger only read: they go to one master.
var everyMasterKeyFuns = map[string]bool{
	"key.accept": true, "key.accept_dict": true,
	"key.reject": true, "key.reject_dict": true,
	"key.delete": true, "key.delete_dict": true,
}

// masterDown reports whether err shows the master unreachable rather than
// refusing the request: no connection (refused, or the dial timed out), or
// salt-api's "Salt Master is not available".
func masterDown(err error) bool {
	if !RanNothing(err) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return strings.Contains(err.Error(), "Salt Master is not available")
}

// everyMaster runs a wheel key reaction on every master: each master of a
// multi-master Salt keeps its own minion keys, and a minion signs in to
// each, so its key is accepted (or rejected, or deleted) on each. The key
// functions are idempotent: running one again, on a master where it was
// done, changes nothing, so a failure on any master is retryable (unless
// one refused it for good, an eauth refusal after a fresh login say) and
// the retry runs it on all of them again, except when the failing masters
// are down (masterDown: a minion signing in to them when they are back
// fires its salt/auth again), which is logged. The result is
// the first master's job that started.
func (f *Failover) everyMaster(ctx context.Context, a actions.Action) (actions.Result, error) {
	var (
		first actions.Result
		errs  []error
	)
	for i, d := range f.drivers {
		dctx := ctx
		if i < len(f.drivers)-1 {
			// Written to the last master, the reaction is sent: a lane
			// that went on sooner could have its next reaction reach
			// this master before this one reaches the next.
			dctx = actions.WithSent(ctx, nil)
		}
		res, err := d.Do(dctx, a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", redact.URL(f.urls[i]), err))
			continue
		}
		if first.JID == "" {
			first = res
		}
	}
	if len(errs) == 0 {
		return first, nil
	}
	if first.JID != "" && !slices.ContainsFunc(errs, func(err error) bool { return !masterDown(err) }) {
		// The others are down: a minion signing in there when they
		// are back fires its salt/auth again.
		f.log.Warn("saltapi: a key reaction ran on the masters that answer only", "jid", first.JID, "err", errors.Join(errs...))
		return first, nil
	}
	err := fmt.Errorf("a key reaction runs on every master; %d of %d failed: %w", len(errs), len(f.drivers), errors.Join(errs...))
	if slices.ContainsFunc(errs, func(err error) bool { return !RanNothing(err) && !actions.IsRetryable(err) }) {
		return first, err // refused for good somewhere (eauth, a bad request): a retry would fail the same
	}
	return first, actions.Retryable(err)
}

// outcome moves new reactions away from master idx after a failure there
// that shows it down (RanNothing: refused, not logged in, "Salt Master is
// not available"), and to it after a success. A failure whose outcome is
// unknown (a 500, a timeout) does not move them: a live but slow master
// answers so too, and with failover minions only it reaches them; Probe
// moves them when the master stops answering its health check.
func (f *Failover) outcome(ctx context.Context, idx int, err error) {
	if err != nil && (errors.Is(err, ErrNoMinions) || ctx.Err() != nil || !RanNothing(err)) {
		return // salt-api answered; the caller gave up; or the master may be live
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil && f.cur != idx:
		f.log.Info("saltapi: reactions go to this salt-api now", "url", redact.URL(f.urls[idx]), "instead_of", redact.URL(f.urls[f.cur]))
		f.cur = idx
	case err != nil && f.cur == idx:
		f.cur = (idx + 1) % len(f.drivers)
		f.log.Warn("saltapi: a salt-api failed; new reactions go to the next", "failed", redact.URL(f.urls[idx]), "next", redact.URL(f.urls[f.cur]), "err", err)
	}
}

func (f *Failover) pin(c *event.Chunk, idx int) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, p := range f.pinned {
		if now.Sub(p.at) > pinTTL {
			delete(f.pinned, k)
		}
	}
	f.pinned[c] = pin{idx: idx, at: now}
}

func (f *Failover) unpin(c *event.Chunk) {
	f.mu.Lock()
	delete(f.pinned, c)
	f.mu.Unlock()
}

// Probe implements actions.Prober: it succeeds when one salt-api answers
// (and takes the credentials), and logs which do not each time that
// changes.
func (f *Failover) Probe(ctx context.Context) error {
	var errs []error
	first := -1
	for i, d := range f.drivers {
		if err := d.Probe(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if first < 0 {
			first = i
		}
	}
	err := errors.Join(errs...)
	if first < 0 {
		return fmt.Errorf("no salt-api answers: %w", err)
	}
	f.mu.Lock()
	changed := fmt.Sprint(err) != f.probed
	f.probed = fmt.Sprint(err)
	if f.cur != first {
		// The first in the list's order that answers: back to m1 once it
		// is back, away from a master that stopped answering.
		f.log.Info("saltapi: reactions go to this salt-api now", "why", "the first that answers its health check", "url", redact.URL(f.urls[first]), "instead_of", redact.URL(f.urls[f.cur]))
		f.cur = first
	}
	f.mu.Unlock()
	if changed && err != nil {
		f.log.Warn("saltapi: a salt-api does not answer; reactions go to the others", "err", err)
	}
	return nil
}

// SaltCall implements reactions.SaltCaller: the call is read-only, so it
// goes to the next salt-api after any failure.
func (f *Failover) SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	f.mu.Lock()
	start := f.cur
	f.mu.Unlock()
	var errs []error
	for i := range f.drivers {
		v, err := f.drivers[(start+i)%len(f.drivers)].SaltCall(ctx, fun, args, kwargs)
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Close implements actions.Driver: it closes every salt-api's driver.
func (f *Failover) Close(ctx context.Context) error {
	var errs []error
	for _, d := range f.drivers {
		errs = append(errs, d.Close(ctx))
	}
	return errors.Join(errs...)
}

var _ actions.Driver = (*Failover)(nil)
