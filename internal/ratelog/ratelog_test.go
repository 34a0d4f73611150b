package ratelog

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestEvery runs in a bubble: its clock moves past the interval at once.
func TestEvery(t *testing.T) { synctest.Test(t, testEvery) }

func testEvery(t *testing.T) {
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

func TestKeyed(t *testing.T) {
	k := NewKeyed(time.Hour, 2)
	for _, key := range []string{"a", "b"} {
		if _, ok := k.Tick(key); !ok {
			t.Fatalf("first %q held back", key)
		}
		if _, ok := k.Tick(key); ok {
			t.Fatalf("second %q let through", key)
		}
	}
	// Past maxKeys the rest share one key: the first of them goes out,
	// the next (another key) is held.
	if _, ok := k.Tick("c"); !ok {
		t.Fatal("first key past the bound held back")
	}
	if _, ok := k.Tick("d"); ok {
		t.Fatal("second key past the bound let through")
	}
	if len(k.m) != 3 {
		t.Fatalf("%d keys tracked, want 3 (2 + the shared one)", len(k.m))
	}
}
