package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/wait"
)

// Most daemon tests run reactord in the test process: run (what main
// calls) on a goroutine with a context that plays SIGTERM, its stdout and
// stderr captured. Only the tests that kill a daemon, send it a signal or
// need an environment of its own run the binary (startProcess).

// startDaemon runs a reactord command line (the daemon, or the bridge) in
// the test process and waits for /healthz.
func startDaemon(t *testing.T, args ...string) *proc {
	t.Helper()
	p := launchDaemon(t, args...)
	waitHealthy(t, p)
	return p
}

// waitHealthy waits until p's /healthz answers 200.
func waitHealthy(t *testing.T, p *proc) {
	t.Helper()
	checkFor(t, 20*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != 200 {
			return fmt.Errorf("healthz %d", code)
		}
		return nil
	})
}

// launchDaemon runs a reactord command line in the test process (a data
// directory and --http added) without waiting for it to be healthy.
func launchDaemon(t *testing.T, args ...string) *proc {
	t.Helper()
	args = daemonArgs(t, args)
	p := goRun(t, args...)
	waitServing(t, p, args)
	return p
}

// goRun runs a reactord command line as given in the test process; the
// test's end stops it (cancels its context, as SIGTERM does) and waits for
// run to return.
func goRun(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &outPipe{}
	out.cond = sync.NewCond(&out.mu)
	p := &proc{stderr: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1), stop: cancel, stdout: bufio.NewReader(out), out: out}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		code := run(ctx, args, strings.NewReader(""), out, logWriter{p})
		out.Close()
		p.done <- exitError(code)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("reactord %v did not return within 30s of its stop", args)
		}
		if t.Failed() {
			t.Logf("reactord %v logs:\n%s", args, p.logs())
		}
	})
	return p
}

// daemonArgs adds a data directory (unless args has one) and --http on a
// port the system picks (read back from the log: a port picked here and
// freed could be taken by an embedded server's own random port meanwhile).
func daemonArgs(t *testing.T, args []string) []string {
	if !containsArg(args, "--data-dir") {
		args = append(args, "--data-dir", t.TempDir())
	}
	return append(args, "--http", "127.0.0.1:0")
}

var servingAt = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)

// waitServing sets p.http from p's log line saying where it serves
// /metrics; it returns early when p ends first (done keeps its result
// for the caller).
func waitServing(t *testing.T, p *proc, args []string) {
	t.Helper()
	wait.For(t, 60*time.Second, func() error {
		if m := servingAt.FindStringSubmatch(p.logs()); m != nil {
			p.http = m[1]
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return nil
		default:
		}
		return fmt.Errorf("reactord %v does not serve /metrics:\n%s", args, p.logs())
	})
}

// exitError is what exec reports for a process that exited with code.
func exitError(code int) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("exit status %d", code)
}

// outPipe is an in-process daemon's stdout: writes never block (as a
// process's would not while its pipe has room; a test may read no line of
// it), reads wait for data or Close.
type outPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer // not read yet
	all    bytes.Buffer // everything written
	closed bool
}

// String returns everything written so far, read or not.
func (o *outPipe) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all.String()
}

func (o *outPipe) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, io.ErrClosedPipe
	}
	n, _ := o.buf.Write(b)
	o.all.Write(b)
	o.cond.Broadcast()
	return n, nil
}

func (o *outPipe) Read(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.buf.Len() == 0 && !o.closed {
		o.cond.Wait()
	}
	if o.buf.Len() == 0 {
		return 0, io.EOF
	}
	return o.buf.Read(b)
}

// Close ends the reads once the data written is read.
func (o *outPipe) Close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}
