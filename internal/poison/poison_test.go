package poison

import (
	"slices"
	"testing"
)

// crash leaves the journal as a killed process would: slots as they are,
// nothing saved, the lock released by the closed file.
func crash(t *testing.T, j *Journal) {
	t.Helper()
	if err := unmapFile(j.slots); err != nil {
		t.Fatal(err)
	}
	j.f.Close()
}

// TestPoisonAfterThreshold: the event in hand at three crashes is
// poisoned; an event in hand at one crash and handled afterwards is a
// suspect no more; a clean stop leaves nothing behind.
func TestPoisonAfterThreshold(t *testing.T) {
	dir := t.TempDir()
	for round := 1; round <= 3; round++ {
		j, left, err := Open(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		if round > 1 && !slices.Contains(left, 42) {
			t.Fatalf("round %d: left %v, want 42 among them", round, left)
		}
		if n, poisoned := j.Crashes(42); n != round-1 || poisoned {
			t.Fatalf("round %d: crashes(42) = %d, %v", round, n, poisoned)
		}
		if round == 2 {
			// Another lane's event, in hand at the first crash only,
			// handled now: cleared.
			if n, _ := j.Crashes(7); n != 1 {
				t.Fatalf("crashes(7) = %d after one crash", n)
			}
			j.Begin(1, 7)
			j.End(1, 7)
		}
		j.Begin(0, 42)
		if round == 1 {
			j.Begin(1, 7)
		}
		crash(t, j)
	}
	j, _, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n, poisoned := j.Crashes(42); n != 3 || !poisoned {
		t.Fatalf("crashes(42) = %d, %v after three crashes", n, poisoned)
	}
	if n, _ := j.Crashes(7); n != 0 {
		t.Fatalf("crashes(7) = %d: a handled suspect was kept", n)
	}
	j.Parked(42)
	j.Begin(3, 99)
	j.End(3, 99)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, left, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(left) != 0 || j.any.Load() {
		t.Fatalf("after a clean stop: left %v, suspects %v", left, j.suspects)
	}
}

// TestOneProcessAtATime: a second process (here a second open) cannot
// take a journal in use.
func TestOneProcessAtATime(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := Open(dir, 3); err == nil {
		t.Fatal("a journal in use was opened twice")
	}
}

// TestEndAfterClose: a lane that ends its event after the journal closed
// (a stop whose drain timed out) neither panics nor writes to the unmapped
// slots, also while Close runs; the event it held is a suspect at the next
// start.
func TestEndAfterClose(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(3, 99)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			j.Begin(5, uint64(1000+i))
			j.End(5, uint64(1000+i))
		}
	}()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	j.End(3, 99)
	j.Begin(4, 100)
	j2, left, err := Open(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if !slices.Contains(left, 99) || slices.Contains(left, 100) {
		t.Errorf("left after the close = %v, want 99 (in hand at the close) and not 100 (begun after it)", left)
	}
}
