package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/store"
)

// ev is the i-th test event.
func ev(i int) store.Event {
	return store.Event{ID: fmt.Sprintf("e%d", i), Tag: "t", Data: raw(`{}`)}
}

// waitFor waits up to 5s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.For(t, 5*time.Second, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("waiting for %s", what)
	})
}

// closeWriter closes w, failing the test when it cannot write everything
// within 5s.
func closeWriter(t *testing.T, w *store.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
