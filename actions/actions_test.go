package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

type flaky struct {
	fails int
	calls int
	err   error
}

func (f *flaky) Name() string              { return "flaky" }
func (f *flaky) Supports(string) bool      { return true }
func (*flaky) Close(context.Context) error { return nil }

func (f *flaky) Do(context.Context, Action) (Result, error) {
	f.calls++
	if f.calls <= f.fails {
		return Result{}, f.err
	}
	return Result{JID: "20261122000000000001"}, nil
}

func TestRetryStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{fails: 3, err: Retryable(errors.New("connection refused"))}
		start := time.Now()
		res, err := RetryStage{Driver: f, Initial: time.Second, Max: 3 * time.Second}.Do(context.Background(), Action{})
		if err != nil || res.JID == "" || f.calls != 4 {
			t.Fatalf("res %+v err %v calls %d", res, err, f.calls)
		}
		if waited := time.Since(start); waited != 1*time.Second+2*time.Second+3*time.Second {
			t.Fatalf("backoff waited %v, want 6s", waited)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{fails: 10, err: errors.New("bad request")}
		_, err := RetryStage{Driver: f}.Do(context.Background(), Action{})
		if err == nil || f.calls != 1 || !strings.Contains(err.Error(), "attempt 1 of 5") {
			t.Fatalf("non-retryable: err %v calls %d", err, f.calls)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{fails: 10, err: Retryable(errors.New("timeout"))}
		_, err := RetryStage{Driver: f, MaxAttempts: 3}.Do(context.Background(), Action{})
		if err == nil || f.calls != 3 || !strings.Contains(err.Error(), "attempt 3 of 3: timeout") {
			t.Fatalf("exhausted: err %v calls %d", err, f.calls)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		f := &flaky{fails: 10, err: Retryable(errors.New("timeout"))}
		_, err := RetryStage{Driver: f, Initial: 100 * time.Millisecond}.Do(ctx, Action{})
		if err == nil || f.calls != 2 || !strings.Contains(err.Error(), "giving up after 2 attempt(s): timeout") {
			t.Fatalf("cancelled: err %v calls %d", err, f.calls)
		}
	})
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
