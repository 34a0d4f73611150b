package ratelog

import (
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	e := New(50 * time.Millisecond)
	if n, ok := e.Tick(); !ok || n != 1 {
		t.Fatalf("first tick = %d, %v; want 1, true", n, ok)
	}
	for i := range 9 {
		if _, ok := e.Tick(); ok {
			t.Fatalf("tick %d inside the interval was let through", i+2)
		}
	}
	time.Sleep(60 * time.Millisecond)
	if n, ok := e.Tick(); !ok || n != 10 {
		t.Fatalf("tick after the interval = %d, %v; want 10 (9 held + this one), true", n, ok)
	}
	e.Tick()
	if n := e.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
	if n := e.Pending(); n != 0 {
		t.Fatalf("Pending after Pending = %d, want 0", n)
	}
}
