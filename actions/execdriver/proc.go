package execdriver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// outputLimit bounds how much of a child's stdout and stderr is kept: the
// last bytes, which hold the job ID line and the end of any traceback.
const outputLimit = 64 << 10

// waitDelay bounds how long Wait waits for the output pipes to close after
// the child exits: a grandchild that inherited them (salt-run --async forks
// its runner) must not hold the dispatch.
const waitDelay = time.Second

// stop says why a run ended before the child exited by itself.
type stop int

const (
	stopNone     stop = iota
	stopTimeout       // Config.Timeout passed
	stopCanceled      // the context ended
)

// outcome is what one run of a child produced.
type outcome struct {
	stdout, stderr []byte
	// err is the error of Start or Wait (an *exec.ExitError for a non-zero
	// exit or a death by signal).
	err error
	// started is false when the child never ran.
	started bool
	// stop and ctxErr say why the child was stopped; killed is true when
	// SIGTERM was not enough and SIGKILL followed after the grace period.
	stop   stop
	ctxErr error
	killed bool
}

// run starts path with args in its own process group, with the driver's
// environment, no stdin and bounded output capture, and waits for it. When
// the timeout passes or ctx ends first, it sends SIGTERM to the group and,
// if the child has not exited after the kill grace, SIGKILL.
func (d *Driver) run(ctx context.Context, path string, args []string) (o outcome) {
	if err := ctx.Err(); err != nil {
		o.stop, o.ctxErr = stopCanceled, err
		return o
	}
	stdout, stderr := &tailBuffer{max: outputLimit}, &tailBuffer{max: outputLimit}
	cmd := exec.Command(path, args...)
	cmd.Env = d.env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	defer func() { o.stdout, o.stderr = stdout.Bytes(), stderr.Bytes() }()

	if err := cmd.Start(); err != nil {
		o.err = err
		return o
	}
	o.started = true
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	timer := time.NewTimer(d.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		o.err = waitErr(err)
		return o
	case <-timer.C:
		o.stop = stopTimeout
	case <-ctx.Done():
		o.stop, o.ctxErr = stopCanceled, ctx.Err()
	}
	// The child may have exited just as the timer fired: prefer its own end
	// over signalling a group that may no longer exist.
	select {
	case err := <-done:
		o.stop, o.ctxErr = stopNone, nil
		o.err = waitErr(err)
		return o
	default:
	}

	_ = signalGroup(cmd.Process, false)
	grace := time.NewTimer(d.killGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		o.err = waitErr(err)
		return o
	case <-grace.C:
	}
	o.killed = true
	_ = signalGroup(cmd.Process, true)
	o.err = waitErr(<-done)
	return o
}

// waitErr drops exec.ErrWaitDelay: the child exited successfully and only
// a descendant kept the output pipes open.
func waitErr(err error) error {
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return err
}

// tailBuffer is an io.Writer keeping the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

// Write implements io.Writer; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns the kept bytes.
func (t *tailBuffer) Bytes() []byte { return t.buf }

// lastLines returns the last n non-blank lines of b, trimmed and joined
// with " | " so an error message stays on one line.
func lastLines(b []byte, n int) string {
	var lines []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// lookPath finds name the way execvp would in the child: a name holding a
// '/' is used as it is, any other is searched in pathList (the PATH of the
// child's environment, not reactord's). Relative PATH entries are skipped.
func lookPath(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return &os.PathError{Op: "exec", Path: path, Err: os.ErrPermission}
	}
	return nil
}
