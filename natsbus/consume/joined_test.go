package consume

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/natsbus"
)

// running returns the stacks of the goroutines that execute code of this
// package's non-test files: a goroutine it started, or a client callback
// into it, that has not returned.
func running() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for line := range strings.SplitSeq(g, "\n") {
			// Frame lines name their file: /…/natsbus/consume/x.go:123.
			// "created by" lines are followed by the creator's file, so
			// only frames under way are looked at.
			if strings.HasPrefix(line, "created by ") {
				break
			}
			if strings.Contains(line, "/natsbus/consume/") && strings.Contains(line, ".go:") && !strings.Contains(line, "_test.go:") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// checkNoneRunning fails the test when a goroutine runs the package's
// code.
func checkNoneRunning(t *testing.T, when string) {
	t.Helper()
	if g := running(); len(g) > 0 {
		t.Fatalf("%s: %d goroutines run this package's code:\n%s", when, len(g), strings.Join(g, "\n\n"))
	}
}

// blockingHandler acknowledges every event but the first, which it holds
// until released is closed (or half a second has passed): a handler call
// under way when the consumption stops.
func blockingHandler(handled *atomic.Int64, held chan<- struct{}, released <-chan struct{}) func(*natsbus.Message) {
	var first atomic.Bool
	return func(m *natsbus.Message) {
		if first.CompareAndSwap(false, true) {
			close(held)
			select {
			case <-released: // the stop returned first: the goroutine check fails
			case <-time.After(500 * time.Millisecond):
			}
		}
		_ = m.Ack()
		handled.Add(1)
	}
}

// TestReleaseJoinsEveryGoroutine: once Release returns, no goroutine the
// partitioned consumption started (manage, each partition's start,
// acknowledgements and waits) and no client callback into it (a handler
// call under way) runs any more: they were waited for, not only told to
// stop.
func TestReleaseJoinsEveryGoroutine(t *testing.T) {
	_, c := natstest.Start(t)
	checkNoneRunning(t, "before the test")
	ctx := context.Background()
	var handled atomic.Int64
	held, released := make(chan struct{}), make(chan struct{})
	p, err := NewPartitioned(ctx, c, PartitionOptions{Partitions: 3, LeaseTTL: 2 * time.Second}, blockingHandler(&handled, held, released))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "myco/ev", Body: []byte(`{}`), Meta: natsbus.Meta{Key: fmt.Sprint("k", i)}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	<-held
	p.Stop()
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // not enough for the held event: Release gives up on it
	p.Release(rctx)
	cancel()
	checkNoneRunning(t, "after Release")
	close(released)
	if handled.Load() == 0 {
		t.Fatal("the held handler call had not returned when Release did")
	}
}

// TestCloseJoinsEveryGoroutine: once Close returns, no goroutine the
// shared consumer started (supervise, deliver, progress) and no client
// callback into it runs any more, a handler call under way included.
func TestCloseJoinsEveryGoroutine(t *testing.T) {
	_, c := natstest.Start(t)
	checkNoneRunning(t, "before the test")
	ctx := context.Background()
	var handled atomic.Int64
	held, released := make(chan struct{}), make(chan struct{})
	k, err := New(ctx, c, natsbus.StreamOptions{Progress: true, CheckEvery: 50 * time.Millisecond}, blockingHandler(&handled, held, released))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/test", Body: []byte(`{}`)}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	<-held
	k.Stop()
	k.Close()
	checkNoneRunning(t, "after Close")
	close(released)
	if handled.Load() == 0 {
		t.Fatal("the held handler call had not returned when Close did")
	}
}
