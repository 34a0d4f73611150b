package bridge

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reactord/reactord/internal/retry"
)

// sockWatch tells, through inotify, when a file is created in the master's
// sock_dir: the bridge dials again the moment the master binds its socket,
// instead of at its next retry. Set up when the connection is lost, it
// holds every creation from then on, so none falls between a failed dial
// and the wait.
type sockWatch struct{ fd int }

// newSockWatch watches dir; nil when inotify cannot (the bridge then
// retries on its timer alone).
func newSockWatch(dir string) *sockWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ATTRIB); err != nil {
		unix.Close(fd)
		return nil
	}
	return &sockWatch{fd: fd}
}

// wait returns once a file was created in the directory since the last
// wait (created), after d, or when ctx ends (ok false).
func (w *sockWatch) wait(ctx context.Context, d time.Duration) (ok, created bool) {
	if w == nil {
		return retry.Sleep(ctx, d), false
	}
	deadline := time.Now().Add(d)
	buf := make([]byte, 4096)
	for {
		if ctx.Err() != nil {
			return false, false
		}
		left := time.Until(deadline)
		if left <= 0 {
			return true, false
		}
		// Short polls keep ctx's end prompt.
		ms := int(min(left, 50*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}, max(ms, 1))
		if err != nil && err != unix.EINTR {
			return retry.Sleep(ctx, left), false
		}
		if n > 0 {
			for {
				if k, err := unix.Read(w.fd, buf); k <= 0 || err != nil {
					break
				}
			}
			return true, true
		}
	}
}

// close releases the watch.
func (w *sockWatch) close() {
	if w != nil {
		unix.Close(w.fd)
	}
}
