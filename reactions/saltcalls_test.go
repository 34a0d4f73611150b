package reactions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/jinja/py"
)

// countingCaller answers fun's name and its first argument, after delay,
// counting the calls (the real callers, salt-api and salt-run, are tested
// against a real master in test/salt).
type countingCaller struct {
	n     atomic.Int32
	delay time.Duration
}

func (c *countingCaller) SaltCall(ctx context.Context, fun string, args []any, _ map[string]any) (any, error) {
	c.n.Add(1)
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return fun + ":" + toString(args), nil
}

func toString(args []any) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(" ")
		b.WriteString(py.Str(a))
	}
	return b.String()
}

func TestSaltCalls(t *testing.T) {
	var logs bytes.Buffer
	caller := &countingCaller{}
	sc := &SaltCalls{Caller: caller, Allow: []string{"pillar.*", "test.echo"}, Budget: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	root := func(s *SaltSession) map[string]any { return map[string]any{saltSessionKey: s} }

	s := sc.Session(context.Background())
	v, err := saltFn(root(s), "pillar.get", []any{"roles"}, nil)
	if err != nil || v != "pillar.get: roles" {
		t.Fatalf("pillar.get: %v, %v", v, err)
	}
	// The same call again is answered from the cache.
	if _, err := saltFn(root(s), "pillar.get", []any{"roles"}, nil); err != nil || caller.n.Load() != 1 {
		t.Errorf("second call: %v, %d calls made", err, caller.n.Load())
	}
	if calls := s.Calls(); len(calls) != 2 || calls[0].Cached || !calls[1].Cached || calls[0].Result != "pillar.get: roles" {
		t.Errorf("records: %+v", calls)
	}
	// Not allowed: refused without a call, naming the flag.
	if _, err := saltFn(root(s), "cmd.run", []any{"id"}, nil); err == nil || !strings.Contains(err.Error(), "salt['cmd.run'](...): not allowed while rendering (--salt-calls") {
		t.Errorf("cmd.run: %v", err)
	}
	// salt.log goes to the log, needs no caller and no allow.
	if _, err := saltFn(root(s), "log.warning", []any{"hello", "there"}, nil); err != nil || !strings.Contains(logs.String(), `level=WARN msg="hello there"`) {
		t.Errorf("log.warning: %v\n%s", err, logs.String())
	}
	// The render's budget bounds the calls' time.
	caller.delay = 150 * time.Millisecond
	s = sc.Session(context.Background())
	if _, err := saltFn(root(s), "test.echo", []any{"a"}, nil); err != nil {
		t.Fatalf("first slow call: %v", err)
	}
	_, err = saltFn(root(s), "test.echo", []any{"b"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second slow call past the budget: %v", err)
	}
	if _, err := saltFn(root(s), "test.echo", []any{"c"}, nil); err == nil || !strings.Contains(err.Error(), "time budget for Salt calls (200ms) is used up") {
		t.Errorf("third call: %v", err)
	}
	// Without a caller (the dry-run printer), a call fails saying so.
	if _, err := saltFn(root((&SaltCalls{Allow: []string{"*"}}).Session(context.Background())), "test.echo", nil, nil); !errors.Is(err, errNoSaltCaller) {
		t.Errorf("no caller: %v", err)
	}
	if _, err := saltFn(map[string]any{}, "pillar.get", nil, nil); !errors.Is(err, errNoSaltCaller) {
		t.Errorf("no session: %v", err)
	}
}

// TestSaltCallsTogether: renders that make the same call at once share one
// request (a burst of events for one file), and each gets its own copy of
// the answer.
func TestSaltCallsTogether(t *testing.T) {
	caller := &countingCaller{delay: 100 * time.Millisecond}
	sc := &SaltCalls{Caller: caller, Allow: []string{"grains.get"}}
	const renders = 8
	var wg sync.WaitGroup
	errs := make(chan error, renders)
	for range renders {
		wg.Go(func() {
			s := sc.Session(context.Background())
			v, err := saltFn(map[string]any{saltSessionKey: s}, "grains.get", []any{"os"}, nil)
			if err == nil && v != "grains.get: os" {
				err = fmt.Errorf("answer %v", v)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := caller.n.Load(); n != 1 {
		t.Errorf("%d renders at once made %d calls, want 1", renders, n)
	}
}

// TestPyFilesRefused: a #!py file does not load, with a message that says
// why and what to write instead.
func TestPyFilesRefused(t *testing.T) {
	_, err := ParseFile("p.sls", []byte("#!py\ndef run():\n    return {}\n"))
	if err == nil || !strings.Contains(err.Error(), "p.sls:1:1: renderer pipeline \"py\" is not supported") ||
		!strings.Contains(err.Error(), "reactord runs no Python: rewrite it as Jinja, calling Salt with salt['mod.fun'](...)") {
		t.Errorf("ParseFile(#!py): %v", err)
	}
}

// TestSaltCallsRunnerAllowList: saltutil.runner and saltutil.wheel are
// allowed by the function they run.
func TestSaltCallsRunnerAllowList(t *testing.T) {
	c := &SaltCalls{Allow: ReadOnlySaltCalls}
	for _, tc := range []struct {
		fun    string
		args   []any
		kwargs map[string]any
		want   bool
	}{
		{"saltutil.runner", []any{"jobs.list_jobs"}, nil, true},
		{"saltutil.runner", nil, map[string]any{"name": "manage.up"}, true},
		{"saltutil.runner", []any{"state.orchestrate", "orch.x"}, nil, false},
		{"saltutil.runner", nil, nil, false},
		{"saltutil.wheel", []any{"key.list_all"}, nil, true},
		{"saltutil.wheel", []any{"key.delete", "web1"}, nil, false},
		{"environ.get", []any{"HOME"}, nil, true},
		{"cmd.run", []any{"id"}, nil, false},
	} {
		if got := c.AllowedCall(tc.fun, tc.args, tc.kwargs); got != tc.want {
			t.Errorf("AllowedCall(%s, %v, %v) = %v, want %v", tc.fun, tc.args, tc.kwargs, got, tc.want)
		}
	}
}
