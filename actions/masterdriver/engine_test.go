package masterdriver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/reactions"
)

// engineStandIn answers on a Unix socket in the engine's framing, as
// salt-engine/reactord.py does (test/salt runs the real one in a master).
type engineStandIn struct {
	ln     net.Listener
	answer func(body map[string]any) map[string]any // nil answer: hang up without answering

	mu     sync.Mutex
	bodies []map[string]any
	conns  []net.Conn
}

func startEngineStandIn(t *testing.T, path string, answer func(body map[string]any) map[string]any) *engineStandIn {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &engineStandIn{ln: ln, answer: answer}
	t.Cleanup(s.stop)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go s.serve(c)
		}
	}()
	return s
}

func (s *engineStandIn) serve(c net.Conn) {
	defer c.Close()
	dec := msgpack.NewDecoder(bufio.NewReader(c))
	for {
		var msg struct {
			Head map[string]any `msgpack:"head"`
			Body map[string]any `msgpack:"body"`
		}
		if err := dec.Decode(&msg); err != nil {
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, msg.Body)
		s.mu.Unlock()
		ans := s.answer(msg.Body)
		if ans == nil {
			return
		}
		out, _ := msgpack.Marshal(map[string]any{"head": msg.Head, "body": ans})
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// restart closes every connection, as a restarted master's engine has.
func (s *engineStandIn) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

func (s *engineStandIn) stop() {
	_ = s.ln.Close()
	s.dropConns()
}

func (s *engineStandIn) requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// recordingFallback stands for the exec driver: it records what reaches it.
type recordingFallback struct {
	mu    sync.Mutex
	did   []string
	calls []string
}

func (f *recordingFallback) Name() string               { return "exec" }
func (f *recordingFallback) Supports(state string) bool { return state != "local" }
func (f *recordingFallback) Close(context.Context) error {
	return nil
}
func (f *recordingFallback) Do(_ context.Context, a actions.Action) (actions.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.did = append(f.did, a.Chunk.Str("state")+"."+a.Chunk.Str("fun"))
	return actions.Result{JID: "fallback"}, nil
}
func (f *recordingFallback) SaltCall(_ context.Context, fun string, _ []any, _ map[string]any) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fun)
	return "from salt-run", nil
}

// TestEngine: with the engine answering, runner and wheel reactions and
// render-time calls go to it (the chunk as compiled, the jid it answers);
// without it, runners go through the master's request server and wheel
// reactions and calls to the fallback, and each change is logged once; a
// restarted engine is dialled again; a refusal or a lost answer is an
// error, never sent another way (the job may have started).
func TestEngine(t *testing.T) {
	mc := keyDir(t, "ROOTKEY")
	master := startStandIn(t, func(load map[string]any) any {
		return map[string]any{"tag": "salt/run/20261126120000000001", "jid": "20261126120000000001"}
	})
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	fb := &recordingFallback{}
	d, err := New(Config{Master: mc, URI: master.uri, Fallback: fb, Log: log, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer d.Close(ctx)
	if d.Engine().Path() != filepath.Join(mc.SockDir, "reactord.ipc") {
		t.Fatalf("engine socket %s", d.Engine().Path())
	}
	if d.Status() != "" {
		t.Errorf("status before any request: %q", d.Status())
	}
	runner := actions.Action{Chunk: chunk(t, `{"state": "runner", "name": "o", "__sls__": "/srv/r.sls", "__id__": "o", "mods": "orch.x", "fun": "state.orchestrate", "order": 1}`)}
	wheel := actions.Action{Chunk: chunk(t, `{"state": "wheel", "name": "k", "__id__": "k", "match": "web1", "fun": "key.accept", "order": 1}`)}

	// No engine: the master's way, and the fallback's.
	for range 3 {
		if res, err := d.Do(ctx, runner); err != nil || res.JID != "20261126120000000001" {
			t.Fatalf("runner without the engine: %+v, %v", res, err)
		}
	}
	if res, err := d.Do(ctx, wheel); err != nil || res.JID != "fallback" {
		t.Fatalf("wheel without the engine: %+v, %v", res, err)
	}
	if v, err := d.SaltCall(ctx, "grains.get", []any{"id"}, nil); err != nil || v != "from salt-run" {
		t.Fatalf("call without the engine: %v, %v", v, err)
	}
	if n := len(master.requests()); n != 3 {
		t.Errorf("the master's request server got %d runner requests, want 3", n)
	}
	if !strings.Contains(d.Status(), "does not answer") {
		t.Errorf("status without the engine: %q", d.Status())
	}

	// The engine starts: everything goes to it.
	var mu sync.Mutex
	mode := "ok"
	eng := startEngineStandIn(t, d.Engine().Path(), func(body map[string]any) map[string]any {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case mode == "hangup":
			return nil
		case mode == "refuse":
			return map[string]any{"error": "runner function 'nope' is not available on this master"}
		case mode == "retry":
			return map[string]any{"error": "KeyError: 'runner'", "retry": true}
		case body["kind"] == "call":
			return map[string]any{"return": map[string]any{"cpus": 2, "id": "web1"}}
		}
		return map[string]any{"jid": "20261126120000000099"}
	})
	if res, err := d.Do(ctx, runner); err != nil || res.JID != "20261126120000000099" {
		t.Fatalf("runner through the engine: %+v, %v", res, err)
	}
	if res, err := d.Do(ctx, wheel); err != nil || res.JID != "20261126120000000099" {
		t.Fatalf("wheel through the engine: %+v, %v", res, err)
	}
	v, err := d.SaltCall(ctx, "grains.items", nil, nil)
	if want := map[string]any{"cpus": int64(2), "id": "web1"}; err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("call through the engine: %#v, %v; want %#v", v, err, want)
	}
	reqs := eng.requests()
	wantLow := map[string]any{"state": "runner", "name": "o", "__sls__": "/srv/r.sls", "__id__": "o", "mods": "orch.x", "fun": "state.orchestrate", "order": int64(1)}
	if len(reqs) != 3 || reqs[0]["kind"] != "runner" || reqs[1]["kind"] != "wheel" || reqs[2]["kind"] != "call" || reqs[2]["fun"] != "grains.items" {
		t.Fatalf("engine requests: %v", reqs)
	}
	if !reflect.DeepEqual(normalize(reqs[0]["low"]), wantLow) {
		t.Errorf("low chunk\n got %#v\nwant %#v", reqs[0]["low"], wantLow)
	}
	if len(master.requests()) != 3 || len(fb.did) != 1 || len(fb.calls) != 1 {
		t.Errorf("with the engine up, the master got %d requests (want 3 from before), the fallback %v %v", len(master.requests()), fb.did, fb.calls)
	}
	if !strings.Contains(d.Status(), "answers at") {
		t.Errorf("status with the engine: %q", d.Status())
	}

	// The engine restarts: the next request dials again, sent once.
	eng.dropConns()
	if res, err := d.Do(ctx, runner); err != nil || res.JID != "20261126120000000099" {
		t.Fatalf("runner after the engine's restart: %+v, %v", res, err)
	}
	if n := len(eng.requests()); n != 4 {
		t.Errorf("%d engine requests after its restart, want 4", n)
	}

	// A refusal is the reaction's error, not a reason to go another way.
	mu.Lock()
	mode = "refuse"
	mu.Unlock()
	if _, err := d.Do(ctx, runner); err == nil || !strings.Contains(err.Error(), "not available on this master") {
		t.Errorf("refused runner: %v", err)
	}
	// A failure before anything started may be tried again.
	mu.Lock()
	mode = "retry"
	mu.Unlock()
	if _, err := d.Do(ctx, runner); !actions.IsRetryable(err) {
		t.Errorf("an engine error before the start is not retryable: %v", err)
	}
	// An answer lost after the request went out: outcome unknown, not
	// sent again anywhere.
	mu.Lock()
	mode = "hangup"
	mu.Unlock()
	if _, err := d.Do(ctx, runner); err == nil || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("lost answer: %v", err)
	}
	if len(master.requests()) != 3 || len(fb.did) != 1 {
		t.Errorf("a refused or unanswered request went another way: master %d, fallback %v", len(master.requests()), fb.did)
	}

	// Down again: back to the master's way; each change logged once.
	eng.stop()
	if res, err := d.Do(ctx, runner); err != nil || res.JID != "20261126120000000001" {
		t.Fatalf("runner after the engine stopped: %+v, %v", res, err)
	}
	if _, err := d.Do(ctx, runner); err != nil {
		t.Fatal(err)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if down, up := strings.Count(out, "level=WARN"), strings.Count(out, "level=INFO"); down != 2 || up != 1 {
		t.Errorf("log: %d 'does not answer' lines (want 2), %d 'answers' (want 1):\n%s", down, up, out)
	}
}

// TestEngineCallNotResentOnCancel: a call whose context ends while the
// engine works is an error at once, the connection dropped.
func TestEngineCallNotResentOnCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reactord.ipc")
	release := make(chan struct{})
	startEngineStandIn(t, path, func(map[string]any) map[string]any {
		<-release
		return map[string]any{"return": true}
	})
	defer close(release)
	e := NewEngine(path, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Call(ctx, "test.ping", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("call past its deadline: %v after %v", err, time.Since(start))
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestEngineReadOnlyListMatches: the engine's default salt_calls
// (salt-engine/reactord.py's READ_ONLY) are --salt-calls' read-only
// functions, so that a call reactord allows by default the engine allows
// too.
func TestEngineReadOnlyListMatches(t *testing.T) {
	src, err := os.ReadFile("../../salt-engine/reactord.py")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(src), "# BEGIN read-only\n")
	block, _, ok2 := strings.Cut(block, "# END read-only\n")
	if !ok || !ok2 {
		t.Fatal("reactord.py has no read-only block")
	}
	var got []string
	for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(block, -1) {
		got = append(got, m[1])
	}
	if !reflect.DeepEqual(got, reactions.ReadOnlySaltCalls) {
		t.Errorf("the engine's read-only functions\n%v\ndiffer from --salt-calls'\n%v", got, reactions.ReadOnlySaltCalls)
	}
}
