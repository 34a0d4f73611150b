package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactord/reactord/event"
)

func chunk(kv ...any) *event.Chunk {
	c := event.NewMap(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i].(string), kv[i+1])
	}
	return c
}

func m(kv ...any) *event.Map { return chunk(kv...) }

// TestCallFor follows Salt's ReactWrap.run argument handling.
func TestCallFor(t *testing.T) {
	base := []any{"__id__", "r", "name", "r", "__sls__", "/srv/r.sls", "order", int64(1)}
	with := func(kv ...any) *event.Chunk { return chunk(append(append([]any{}, kv...), base...)...) }
	cases := []struct {
		name      string
		c         *event.Chunk
		client    string
		arg       []any
		kwarg     *event.Map
		tgtType   string
		err       error
		warnCount int
	}{
		{"new schema local", with("state", "local", "fun", "state.single", "tgt", "test", "args", []any{m("fun", "pkg.installed"), m("name", "zsh")}),
			"local", nil, m("fun", "pkg.installed", "name", "zsh"), "glob", nil, 0},
		{"old schema local", with("state", "local", "fun", "cmd.run", "tgt", "web1", "tgt_type", "list", "arg", []any{"uptime"}, "kwarg", m("runas", "root")),
			"local", []any{"uptime"}, m("runas", "root"), "list", nil, 0},
		{"local without args", with("state", "local", "fun", "test.ping", "tgt", "*"), "local", nil, m(), "glob", nil, 0},
		{"args mapping", with("state", "runner", "fun", "state.orchestrate", "args", m("mods", "orch")), "runner", nil, m("mods", "orch"), "glob", nil, 0},
		{"args ignores arg and kwarg", with("state", "wheel", "fun", "key.accept", "args", []any{m("match", "web1")}, "arg", []any{"x"}, "kwarg", m("y", int64(1))),
			"wheel", nil, m("match", "web1"), "glob", nil, 2},
		{"bare string in args", with("state", "runner", "fun", "x.y", "args", []any{"flag", m("k", "v")}), "runner", nil, m("flag", nil, "k", "v"), "glob", nil, 0},
		{"empty args refused", with("state", "runner", "fun", "x.y", "args", []any{}), "runner", nil, nil, "", ErrArgFormat, 0},
		{"multi-key item refused", with("state", "runner", "fun", "x.y", "args", []any{m("a", int64(1), "b", int64(2))}), "runner", nil, nil, "", ErrArgFormat, 0},
		{"legacy caller positional args", with("state", "caller", "fun", "file.touch", "args", []any{"/tmp/foo"}), "caller", []any{"/tmp/foo"}, m(), "glob", nil, 0},
		{"caller dictlist", with("state", "caller", "fun", "file.touch", "args", []any{m("name", "/tmp/foo")}), "caller", nil, m("name", "/tmp/foo"), "glob", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call, err := CallFor(c.c)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if call.Client != c.client || !reflect.DeepEqual(call.Arg, c.arg) || call.TgtType != c.tgtType {
				t.Fatalf("call = %+v", call)
			}
			gotKw, _ := call.Kwarg.MarshalJSON()
			wantKw, _ := c.kwarg.MarshalJSON()
			if string(gotKw) != string(wantKw) {
				t.Fatalf("kwarg = %s, want %s", gotKw, wantKw)
			}
			if len(call.Warnings) != c.warnCount {
				t.Fatalf("warnings = %q", call.Warnings)
			}
			if !call.Extra.Has("__id__") || call.Extra.Has("args") || call.Extra.Has("fun") {
				t.Fatalf("extra keys = %q", call.Extra.Keys())
			}
		})
	}
	if _, err := CallFor(with("state", "local", "fun", "test.ping")); err == nil || !strings.Contains(err.Error(), "without tgt") {
		t.Fatalf("local without tgt: %v", err)
	}
	if _, err := CallFor(with("state", "bogus", "fun", "x")); err == nil {
		t.Fatal("unknown type accepted")
	}
}

func TestDryRunWritesOneLinePerAction(t *testing.T) {
	var out bytes.Buffer
	d := NewDryRun(&out)
	c := chunk("state", "local", "__id__", "x", "fun", "test.ping", "tgt", "web1")
	if _, err := d.Do(context.Background(), Action{Tag: "salt/minion/web1/start", Chunk: c}); err != nil {
		t.Fatal(err)
	}
	want := `{"tag":"salt/minion/web1/start","chunk":{"state":"local","__id__":"x","fun":"test.ping","tgt":"web1"}}` + "\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// TestDispatchLevel: the dry run shows each reaction on its writer, so a
// dispatch through it is logged at debug level; through any other
// driver, at info.
func TestDispatchLevel(t *testing.T) {
	for _, c := range []struct {
		drv  Driver
		want slog.Level
	}{
		{NewDryRun(io.Discard), slog.LevelDebug},
		{Null{}, slog.LevelInfo},
		{Router{Primary: &scripted{name: "master"}, Fallback: &scripted{name: "exec"}}, slog.LevelInfo},
	} {
		if got := DispatchLevel(c.drv); got != c.want {
			t.Errorf("%s: %v, want %v", c.drv.Name(), got, c.want)
		}
	}
}

// scripted is a driver whose calls fail with errs in turn, then succeed.
type scripted struct {
	name  string
	errs  []error
	calls int
}

func (f *scripted) Name() string              { return f.name }
func (f *scripted) Supports(string) bool      { return true }
func (*scripted) Close(context.Context) error { return nil }

func (f *scripted) Do(context.Context, Action) (Result, error) {
	f.calls++
	if f.calls <= len(f.errs) {
		return Result{}, f.errs[f.calls-1]
	}
	return Result{JID: "20261122000000000001"}, nil
}

// TestRetryStage: the retry stage's final error, as the reactor reports
// it (the driver's name, once, then the error): "attempt N of M" only when
// a retry happened or was allowed, and the driver's error wrapped.
func TestRetryStage(t *testing.T) {
	refused := Retryable(errors.New("connection refused"))
	bad := errors.New("bad request")
	cases := []struct {
		name     string
		errs     []error
		attempts int
		timeout  time.Duration // of the context; 0: none, -1: ended before
		want     string        // the reactor's line; "" for success
		calls    int
		waited   time.Duration
	}{
		{name: "not retryable", errs: []error{bad}, want: "master+exec: bad request", calls: 1},
		{name: "retryable, succeeds on attempt 2", errs: []error{refused}, calls: 2, waited: time.Second},
		{name: "retryable, out of attempts", errs: []error{refused, refused, refused, refused}, attempts: 3,
			want: "master+exec: attempt 3 of 3: connection refused", calls: 3, waited: 3 * time.Second},
		{name: "retryable, then not", errs: []error{refused, bad}, want: "master+exec: attempt 2 of 5: bad request", calls: 2, waited: time.Second},
		{name: "retryable, no retry allowed", errs: []error{refused}, attempts: 1, want: "master+exec: connection refused", calls: 1},
		{name: "context ends while waiting", errs: []error{refused, refused, refused}, timeout: 2500 * time.Millisecond,
			want: "master+exec: giving up after 2 of 5 attempts (context deadline exceeded): connection refused", calls: 2, waited: 2500 * time.Millisecond},
		{name: "context ended before", errs: []error{bad}, timeout: -1, want: "master+exec: not attempted: context canceled"},
		{name: "succeeds after backing off", errs: []error{refused, refused, refused}, calls: 4, waited: 1*time.Second + 2*time.Second + 3*time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				master := &scripted{name: "master", errs: c.errs}
				drv := Router{Primary: master, Fallback: &scripted{name: "exec"}}
				ctx, cancel := context.WithCancel(context.Background())
				switch {
				case c.timeout < 0:
					cancel()
				case c.timeout > 0:
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
				}
				defer cancel()
				start := time.Now()
				res, err := RetryStage{Driver: drv, MaxAttempts: c.attempts, Initial: time.Second, Max: 3 * time.Second}.Do(ctx, Action{Chunk: chunk("state", "local")})
				if waited := time.Since(start); waited != c.waited {
					t.Errorf("waited %v, want %v", waited, c.waited)
				}
				if master.calls != c.calls {
					t.Errorf("%d calls, want %d", master.calls, c.calls)
				}
				if c.want == "" {
					if err != nil || res.JID == "" {
						t.Fatalf("res %+v, err %v; want a job", res, err)
					}
					return
				}
				// What the reactor logs and records: reactor.dispatch.
				if got := fmt.Sprintf("%s: %v", drv.Name(), err); got != c.want {
					t.Errorf("got  %q\nwant %q", got, c.want)
				}
				if last := c.errs[max(c.calls-1, 0)]; c.calls > 0 && (!errors.Is(err, last) || IsRetryable(err) != IsRetryable(last)) {
					t.Errorf("%v does not wrap the driver's last error %v", err, last)
				}
			})
		})
	}
}

func TestLiteralMinions(t *testing.T) {
	for _, tc := range []struct {
		tgt     any
		tgtType string
		want    []string
	}{
		{"web1", "glob", []string{"web1"}},
		{"web*", "glob", nil},
		{"web[12]", "glob", nil},
		{[]any{"web1", "web2", "web1"}, "list", []string{"web1", "web2"}},
		{"web1,web2", "list", []string{"web1", "web2"}},
		{[]any{"web1", 7}, "list", nil},
		{"web1 web2", "list", nil},
		{"G@os:Debian", "compound", nil},
		{"web1", "grain", nil},
	} {
		if got := LiteralMinions(tc.tgt, tc.tgtType); fmt.Sprint(got) != fmt.Sprint(tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("LiteralMinions(%v, %s) = %v, want %v", tc.tgt, tc.tgtType, got, tc.want)
		}
	}
}

func TestAllDone(t *testing.T) {
	a, cancelA := context.WithCancel(context.Background())
	b, cancelB := context.WithCancel(context.Background())
	ctx, stop := AllDone([]context.Context{a, b})
	defer stop()
	cancelA()
	select {
	case <-ctx.Done():
		t.Fatal("ended while one caller still waits")
	case <-time.After(20 * time.Millisecond):
	}
	cancelB()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("still running after every caller left")
	}
}
