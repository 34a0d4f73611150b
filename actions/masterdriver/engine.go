package masterdriver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions"
)

// msgEngineDown is the line saying the engine stopped answering.
const msgEngineDown = "the reactord Salt engine does not answer"

// Engine sizes: requests in flight to the engine at once.
const (
	// engineJobConns bounds runner and wheel requests in flight; past the
	// engine's worker threads they wait in the engine for a free thread.
	engineJobConns = 32
	// engineCallConns bounds render-time calls in flight, apart from the
	// job requests so that a storm of runners waiting for threads does not
	// hold up renders.
	engineCallConns = 8
)

// Engine is a client of reactord's Salt engine (salt-engine/reactord.py),
// which runs runner and wheel reactions and render-time calls inside the
// master, as Salt's reactor does. Each request goes over a Unix socket in
// Salt's IPC framing: a msgpack map {"head": {"id": N}, "body": {...}},
// answered by one with the same id. It remembers whether the engine
// answered last, and logs each change once.
type Engine struct {
	path  string
	log   *slog.Logger
	jobs  chan *engineConn
	calls chan *engineConn
	done  chan struct{} // closed by Close
	id    atomic.Uint64
	// master is the master's id, as the engine's manage-wait answers say.
	master atomic.Pointer[string]

	mu     sync.Mutex
	known  bool  // asked at least once
	up     bool  // answered last time
	reason error // why not, when !up
	closed bool
}

type engineConn struct {
	c   net.Conn
	dec *msgpack.Decoder
}

// errEngineDown marks a request that did not reach the engine: nothing
// was sent, so its work may go another way.
var errEngineDown = errors.New("the reactord Salt engine does not answer")

// NewEngine returns a client of the engine listening at path.
func NewEngine(path string, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{path: path, log: log, jobs: make(chan *engineConn, engineJobConns), calls: make(chan *engineConn, engineCallConns), done: make(chan struct{})}
	for range engineJobConns {
		e.jobs <- &engineConn{}
	}
	for range engineCallConns {
		e.calls <- &engineConn{}
	}
	return e
}

// Path is the engine's socket.
func (e *Engine) Path() string { return e.path }

// Status says whether the engine answered last time, for /healthz and
// check: "" before the first request.
func (e *Engine) Status() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case !e.known:
		return ""
	case e.up:
		return "the reactord Salt engine answers at " + e.path + ": runner and wheel reactions and render-time Salt calls run inside the master"
	}
	return fmt.Sprintf("the reactord Salt engine does not answer at %s (%s): runner reactions go through the master's request server, wheel reactions and render-time Salt calls through salt-run (salt-engine/reactord.py in the master's engines: runs them inside the master)", e.path, strings.TrimPrefix(e.reason.Error(), errEngineDown.Error()+": "))
}

// Up reports whether the engine answered last time.
func (e *Engine) Up() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.up
}

// Check connects to the engine and hangs up: whether it listens, without
// asking it anything. The outcome is remembered (Status) and a change
// logged, as a request's is.
func (e *Engine) Check(ctx context.Context) error {
	c, err := e.dial(ctx)
	if err != nil {
		e.mark(err)
		return err
	}
	_ = c.Close()
	e.mark(nil)
	return nil
}

func (e *Engine) dial(ctx context.Context) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", e.path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEngineDown, err)
	}
	return c, nil
}

// mark records whether the engine answered and logs a change once.
func (e *Engine) mark(err error) {
	up := err == nil
	e.mu.Lock()
	changed := !e.known || e.up != up
	e.known, e.up, e.reason = true, up, err
	e.mu.Unlock()
	if !changed {
		return
	}
	if up {
		e.log.Info("the reactord Salt engine answers", "socket", e.path,
			"effect", "runner and wheel reactions and render-time Salt calls run inside the master")
		return
	}
	e.log.Warn(msgEngineDown, "socket", e.path, "err", err.Error(),
		"effect", "runner reactions go through the master's request server, wheel reactions and render-time Salt calls through salt-run, until it does",
		"fix", "install and enable the reactord Salt engine on the master (docs/salt-engine.md)")
}

// Run asks the engine to run a runner or wheel reaction's low chunk and
// returns the job's jid once it started. A reaction waits in the engine
// for a free thread of its pool.
func (e *Engine) Run(ctx context.Context, kind string, low map[string]any) (string, error) {
	ans, err := e.request(ctx, e.jobs, map[string]any{"kind": kind, "low": low})
	if err != nil {
		return "", err
	}
	jid, _ := ans["jid"].(string)
	if jid == "" {
		return "", fmt.Errorf("the reactord Salt engine's answer holds no jid: %v", ans)
	}
	return jid, nil
}

// Call runs an execution function through the master's loader, for a
// render, and returns its return.
func (e *Engine) Call(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	if args == nil {
		args = []any{}
	}
	if kwargs == nil {
		kwargs = map[string]any{}
	}
	ans, err := e.request(ctx, e.calls, map[string]any{"kind": "call", "fun": fun, "arg": args, "kwarg": kwargs})
	if err != nil {
		return nil, err
	}
	return normalize(ans["return"]), nil
}

// take waits for a connection of pool, unless ctx ends or the driver is
// closed first.
func (e *Engine) take(ctx context.Context, pool chan *engineConn) (*engineConn, error) {
	select {
	case c := <-pool:
		if ctx.Err() != nil { // select picks at random when both were ready
			pool <- c
			return nil, ctx.Err()
		}
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.done:
		return nil, errors.New("the driver is closed")
	}
}

// request sends one request on a connection of pool and reads its answer.
// A connection the engine closed since (it restarted) is dialled again
// and the request sent once more: it had not gone out. errEngineDown
// says nothing was sent.
func (e *Engine) request(ctx context.Context, pool chan *engineConn, body map[string]any) (map[string]any, error) {
	id := e.id.Add(1)
	frame, err := msgpack.Marshal(map[string]any{"head": map[string]any{"id": id}, "body": body})
	if err != nil {
		return nil, fmt.Errorf("encoding the request to the reactord Salt engine: %w", err)
	}
	c, err := e.take(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer func() { pool <- c }()
	for attempt := 0; ; attempt++ {
		fresh := c.c == nil
		if fresh {
			conn, err := e.dial(ctx)
			if err != nil {
				if ctx.Err() != nil { // the caller's end, not the engine's
					return nil, ctx.Err()
				}
				e.mark(err)
				return nil, err
			}
			c.c, c.dec = conn, msgpack.NewDecoder(bufio.NewReader(conn))
		}
		// The context's end interrupts the write and the read; then its
		// error is the one returned.
		_ = c.c.SetDeadline(time.Time{})
		conn := c.c
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
		if _, err := c.c.Write(frame); err != nil {
			stop()
			c.reset()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !fresh && attempt == 0 {
				continue // a connection from before the engine restarted
			}
			err = fmt.Errorf("%w: sending: %w", errEngineDown, err)
			e.mark(err)
			return nil, err
		}
		actions.Sent(ctx) // written: the lane may begin its next call
		var ans map[string]any
		err := c.dec.Decode(&ans)
		if !stop() && err == nil {
			// The context ended as the answer came: the deadline it set
			// may land on the connection later; this one is done.
			defer c.reset()
		}
		if err != nil {
			c.reset()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w before the reactord Salt engine answered: outcome unknown (the request went out; not sent again)", ctx.Err())
			}
			return nil, fmt.Errorf("reading the reactord Salt engine's answer: %w: outcome unknown (the request went out; not sent again)", err)
		}
		e.mark(nil)
		head, _ := ans["head"].(map[string]any)
		if got, _ := toInt(normalize(head["id"])); uint64(got) != id {
			c.reset()
			return nil, fmt.Errorf("the reactord Salt engine answered request %v, not %d: outcome unknown", head["id"], id)
		}
		out, _ := ans["body"].(map[string]any)
		if msg, ok := out["error"]; ok {
			err := fmt.Errorf("the reactord Salt engine refused: %v", msg)
			if out["retry"] == true { // failed before anything started
				return nil, actions.Retryable(err)
			}
			return nil, err
		}
		return out, nil
	}
}

func (c *engineConn) reset() {
	if c.c != nil {
		_ = c.c.Close()
	}
	c.c, c.dec = nil, nil
}

// Close closes the engine's connections.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.done)
	e.mu.Unlock()
	for _, pool := range []chan *engineConn{e.jobs, e.calls} {
		for range cap(pool) {
			select {
			case c := <-pool:
				c.reset()
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// normalize turns what msgpack decoded into what a render sees of a JSON
// answer: int64 and float64 numbers, string keys, strings for bytes.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case []byte:
		return string(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= 1<<63-1 {
			return int64(x)
		}
		return float64(x)
	case uint:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}
