package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	errDown := errors.New("down")
	for _, tc := range []struct {
		name     string
		failures int           // tries that fail before one succeeds
		limit    time.Duration // ctx's deadline
		stop     bool          // stop on the first error
		tries    [2]int        // at least, at most
		err      error
	}{
		{name: "succeeds at once", failures: 0, limit: time.Second, tries: [2]int{1, 1}},
		{name: "succeeds after failures", failures: 3, limit: 5 * time.Second, tries: [2]int{4, 4}},
		{name: "gives up when ctx ends", failures: 1000, limit: 200 * time.Millisecond, tries: [2]int{2, 4}, err: errDown},
		{name: "stop ends at once", failures: 1000, limit: 5 * time.Second, stop: true, tries: [2]int{1, 1}, err: errDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.limit)
			defer cancel()
			tries := 0
			var stop func(error) bool
			if tc.stop {
				stop = func(err error) bool { return errors.Is(err, errDown) }
			}
			err := Until(ctx, func() error {
				tries++
				if tries <= tc.failures {
					return errDown
				}
				return nil
			}, stop)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("err %v, want %v", err, tc.err)
			}
			// 50, 100, 200ms pauses: a 200ms deadline allows about 3
			// tries, fewer on a loaded machine.
			if tries < tc.tries[0] || tries > tc.tries[1] {
				t.Errorf("%d tries, want %d to %d", tries, tc.tries[0], tc.tries[1])
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != 100*time.Millisecond {
		t.Fatalf("after Reset: %v, want the first delay again", d)
	}
	if d := (Backoff{Min: time.Second, Max: 30 * time.Second}).After(1 << 40); d != 30*time.Second {
		t.Fatalf("After(huge) = %v, want the cap", d)
	}
	j := Backoff{Min: time.Second, Max: time.Second, Jitter: 0.5}
	for range 100 {
		if d := j.Delay(1); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jittered delay %v outside [0.5s, 1s]", d)
		}
	}
}
