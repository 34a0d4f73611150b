package tasks

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestCloseWaitsAndRefuses: Close returns once every counted task has
// returned, or when its context ends first; after it no task is counted.
func TestCloseWaitsAndRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Set
		release := make(chan struct{})
		if !s.Go(func() { <-release }) {
			t.Fatal("an open set refused a task")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Close(ctx); err == nil {
			t.Fatal("Close returned while a task ran")
		}
		if s.Go(func() {}) || s.Enter() {
			t.Fatal("a closed set took a task")
		}
		close(release)
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close after the task ended: %v", err)
		}
	})
}
