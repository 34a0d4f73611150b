//go:build !linux

package bridge

import (
	"context"
	"time"

	"github.com/reactord/reactord/internal/retry"
)

// sockWatch is Linux's inotify watch of the master's sock_dir; elsewhere
// the bridge retries on its timer alone.
type sockWatch struct{}

func newSockWatch(string) *sockWatch { return nil }

func (w *sockWatch) wait(ctx context.Context, d time.Duration) (ok, created bool) {
	return retry.Sleep(ctx, d), false
}

func (w *sockWatch) close() {}
