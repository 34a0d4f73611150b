package daemon

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactord/reactord/internal/syncbuf"
)

// TestStopWaitsForBackgroundWork: the stop cancels the parts' goroutines
// and returns once they have; one that does not end is given up after
// --drain-timeout, logged; once stopping, no new one starts. Its clock is
// a bubble's.
func TestStopWaitsForBackgroundWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &syncbuf.Buffer{}
		d := &Daemon{opts: Options{DrainTimeout: time.Minute}, log: slog.New(slog.NewTextHandler(logs, nil))}
		d.runCtx, d.cancel = context.WithCancel(context.Background())
		var finished atomic.Bool
		d.background(func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(time.Second) // winding down after the cancel
			finished.Store(true)
		})
		release := make(chan struct{})
		d.background(func(ctx context.Context) { <-release }) // ignores the cancel
		start := time.Now()
		d.stopBackground(context.Background())
		if !finished.Load() {
			t.Error("the stop returned before a background task that was winding down")
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("the stop waited %v for a task that does not end, want the drain timeout (1m)", waited)
		}
		if !strings.Contains(logs.String(), "background work did not stop") {
			t.Errorf("a task that did not end was not logged:\n%s", logs)
		}
		ran := false
		d.background(func(context.Context) { ran = true })
		close(release)
		synctest.Wait()
		if ran {
			t.Error("a background task started after the stop")
		}
	})
}
