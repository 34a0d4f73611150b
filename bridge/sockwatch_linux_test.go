package bridge

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMasterBusDialsSoonAfterBind: a master binds its socket a moment
// before it listens, and a dial in between is refused. After an outage
// long enough for the retry delay to reach its longest, the bridge must
// still connect soon after the master listens, not one long delay later,
// and not a backoff step later either: from the creation it was told of it
// dials every millisecond for a while. Here the master listens a second
// after binding: dials backing off from 10ms after the bind (10, 30, 70,
// 150, 310, 630, 1270ms) would connect 270ms after it listens (the real-Salt
// restart test saw an event published in such a gap missed).
func TestMasterBusDialsSoonAfterBind(t *testing.T) {
	t.Parallel() // it mostly waits
	dir := t.TempDir()
	path := filepath.Join(dir, MasterEventSocket)
	log, _ := newLogger(t)
	runMasterBus(t, MasterConfig{SockDir: dir, Logger: log, MinBackoff: 10 * time.Millisecond, MaxBackoff: 3 * time.Second}, &blockingPublisher{open: true})
	time.Sleep(4 * time.Second) // no master: the delay grows to its longest

	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // bound, not yet listening: dials are refused
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}
	listening := time.Now()
	nfd, _, err := acceptWithin(fd, 2*time.Second)
	if err != nil {
		t.Fatalf("the bridge did not dial within 2s of the master listening (its longest delay is 3s): %v", err)
	}
	lag := time.Since(listening)
	unix.Close(nfd)
	t.Logf("connected %v after the master listened", lag.Round(time.Millisecond))
	if lag > 100*time.Millisecond {
		t.Fatalf("the bridge connected %v after the master listened: it waited out a backoff step", lag.Round(time.Millisecond))
	}
}

// acceptWithin accepts one connection on the listening socket fd, or fails
// after d.
func acceptWithin(fd int, d time.Duration) (int, unix.Sockaddr, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return -1, nil, unix.ETIMEDOUT
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, nil, err
		}
		if n > 0 {
			return unix.Accept(fd)
		}
	}
}
