package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// SaltCaller runs a Salt execution function on the master, as Salt's
// reactor runs salt['mod.fun'](...) while rendering a reaction file (the
// drivers that reach the master implement it: runner salt.cmd).
type SaltCaller interface {
	SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error)
}

// ReadOnlySaltCalls are the functions a reaction file may call while
// rendering by default: they read and change nothing.
var ReadOnlySaltCalls = []string{
	"pillar.get", "pillar.item", "pillar.items", "pillar.raw", "pillar.keys",
	"grains.get", "grains.item", "grains.items", "grains.ls",
	"config.get", "config.option", "config.items",
	"file.file_exists", "file.directory_exists", "file.is_link", "file.stats", "file.get_hash",
	"mine.get", "test.ping", "test.echo", "test.version",
	"network.ip_addrs", "network.interfaces", "dnsutil.A", "dnsutil.AAAA",
	"match.glob", "match.compound", "match.list", "environ.get",
	// saltutil.runner and saltutil.wheel are allowed per runner or wheel
	// function: SALTUTIL_FUN:NAME.
	"saltutil.runner:jobs.list_jobs", "saltutil.runner:jobs.list_job", "saltutil.runner:jobs.lookup_jid",
	"saltutil.runner:jobs.print_job", "saltutil.runner:jobs.exit_success",
	"saltutil.runner:manage.up", "saltutil.runner:manage.down", "saltutil.runner:manage.status",
	"saltutil.runner:manage.present", "saltutil.runner:manage.not_present", "saltutil.runner:manage.alived",
	"saltutil.runner:manage.not_alived", "saltutil.runner:manage.list_state",
	"saltutil.runner:pillar.show_pillar", "saltutil.runner:cache.grains", "saltutil.runner:cache.pillar",
	"saltutil.runner:cache.mine", "saltutil.wheel:key.list_all", "saltutil.wheel:key.finger",
}

// Defaults of SaltCalls.
const (
	DefaultSaltCallBudget = 30 * time.Second
	DefaultSaltCallCache  = 10 * time.Second
)

// SaltCalls lets reaction files call Salt while rendering: the functions
// Allow names (path.Match globs, "pillar.*"), through Caller, within
// Budget for one file's render, answers kept for CacheFor. salt.log.*
// writes to Log. The zero Allow allows nothing.
type SaltCalls struct {
	Caller   SaltCaller
	Allow    []string
	Budget   time.Duration
	CacheFor time.Duration
	Log      *slog.Logger

	mu     sync.Mutex
	cache  map[string]cachedCall
	flight singleflight.Group
}

type cachedCall struct {
	v  any
	at time.Time
}

// SaltCallRecord is one call a render made, for explain and the log.
type SaltCallRecord struct {
	Fun    string         `json:"fun"`
	Args   []any          `json:"args,omitempty"`
	Kwargs map[string]any `json:"kwargs,omitempty"`
	Result any            `json:"result,omitempty"`
	Err    string         `json:"error,omitempty"`
	Cached bool           `json:"cached,omitempty"`
	Took   time.Duration  `json:"took"`
}

// SaltSession is one render's use of SaltCalls: its deadline and the calls
// it made.
type SaltSession struct {
	c        *SaltCalls
	ctx      context.Context
	deadline time.Time
	mu       sync.Mutex
	calls    []SaltCallRecord
}

// Session starts one render's calls; nil SaltCalls give a nil session
// (every call then fails, naming why).
func (c *SaltCalls) Session(ctx context.Context) *SaltSession {
	if c == nil {
		return nil
	}
	b := c.Budget
	if b <= 0 {
		b = DefaultSaltCallBudget
	}
	return &SaltSession{c: c, ctx: ctx, deadline: time.Now().Add(b)}
}

// Calls returns the calls the render made.
func (s *SaltSession) Calls() []SaltCallRecord {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SaltCallRecord(nil), s.calls...)
}

// AllowedCall reports whether fun may be called with args: saltutil.runner
// and saltutil.wheel by the function they run (SALTUTIL_FUN:NAME), the
// others by their name.
func (c *SaltCalls) AllowedCall(fun string, args []any, kwargs map[string]any) bool {
	if c.Allowed(fun) {
		return true
	}
	if fun != "saltutil.runner" && fun != "saltutil.wheel" {
		return false
	}
	name, _ := kwargs["name"].(string)
	if len(args) > 0 {
		name, _ = args[0].(string)
	}
	return name != "" && c.Allowed(fun+":"+name)
}

// Allowed reports whether fun may be called.
func (c *SaltCalls) Allowed(fun string) bool {
	for _, p := range c.Allow {
		if ok, _ := path.Match(p, fun); ok {
			return true
		}
	}
	return false
}

// saltSessionKey is where a render's SaltSession sits in the template's
// root data.
const saltSessionKey = "__salt_session__"

// errNoSaltCaller explains a Salt call without a caller.
var errNoSaltCaller = errors.New("calls Salt while rendering, and no driver that reaches the master is configured (--driver saltapi, exec or master; the dry-run printer and --salt-calls off call nothing)")

// saltFn is a reaction file's salt['fun'](args, kwargs): see SaltCalls.
func saltFn(root map[string]any, fun string, args []any, kwargs map[string]any) (any, error) {
	s, _ := root[saltSessionKey].(*SaltSession)
	what := fmt.Sprintf("salt['%s'](...)", fun)
	if lvl, ok := strings.CutPrefix(fun, "log."); ok {
		return "", saltLog(s, lvl, args)
	}
	if s == nil || s.c.Caller == nil {
		return nil, fmt.Errorf("%s: %w", what, errNoSaltCaller)
	}
	if !s.c.AllowedCall(fun, args, kwargs) {
		return nil, fmt.Errorf("%s: not allowed while rendering (--salt-calls: read-only functions by default; name it there to allow it)", what)
	}
	key, _ := json.Marshal([]any{fun, args, kwargs})
	rec := SaltCallRecord{Fun: fun, Args: args, Kwargs: kwargs}
	start := time.Now()
	v, cached := s.c.cached(string(key), start)
	var err error
	if !cached {
		left := time.Until(s.deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%s: the render's time budget for Salt calls (%s) is used up", what, s.c.budget())
		}
		// Renders that make the same call at once (a burst of events for
		// one file) share one request, not one after another.
		// The request is not cancelled with the render that started it;
		// each render waits within its own budget.
		ch := s.c.flight.DoChan(string(key), func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), left)
			defer cancel()
			v, err := s.c.Caller.SaltCall(ctx, fun, args, kwargs)
			if err == nil { // a failure is asked again next time
				s.c.keep(string(key), v, start)
			}
			return v, err
		})
		ctx, cancel := context.WithTimeout(s.ctx, left)
		select {
		case r := <-ch:
			v, err = r.Val, r.Err
		case <-ctx.Done():
			err = ctx.Err()
		}
		cancel()
	}
	v = deepCopy(v) // the cache keeps its own: a file may change its copy ({% do g.update(...) %})
	rec.Result, rec.Cached, rec.Took = v, cached, time.Since(start)
	if err != nil {
		rec.Err = err.Error()
	}
	s.mu.Lock()
	s.calls = append(s.calls, rec)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

func (c *SaltCalls) budget() time.Duration {
	if c.Budget <= 0 {
		return DefaultSaltCallBudget
	}
	return c.Budget
}

func (c *SaltCalls) cached(key string, now time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[key]
	ttl := c.CacheFor
	if ttl == 0 {
		ttl = DefaultSaltCallCache
	}
	if !ok || now.Sub(e.at) > ttl {
		return nil, false
	}
	return e.v, true
}

func (c *SaltCalls) keep(key string, v any, now time.Time) {
	if c.CacheFor < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil || len(c.cache) > 10000 {
		c.cache = map[string]cachedCall{}
	}
	c.cache[key] = cachedCall{v: v, at: now}
}

// saltLog is salt.log.<level>(msg, ...): a line in reactord's log.
func saltLog(s *SaltSession, level string, args []any) error {
	lv := map[string]slog.Level{"debug": slog.LevelDebug, "trace": slog.LevelDebug, "info": slog.LevelInfo,
		"warning": slog.LevelWarn, "warn": slog.LevelWarn, "error": slog.LevelError, "critical": slog.LevelError, "exception": slog.LevelError}
	l, ok := lv[level]
	if !ok {
		return fmt.Errorf("salt.log.%s: no such level (debug, info, warning, error, critical)", level)
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprint(a)
	}
	log := slog.Default()
	if s != nil && s.c.Log != nil {
		log = s.c.Log
	}
	ctx := context.Background()
	if s != nil {
		ctx = s.ctx
	}
	log.Log(ctx, l, strings.Join(parts, " "), "source", "reaction file (salt.log."+level+")")
	return nil
}

// deepCopy copies the maps and lists of a decoded answer.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
