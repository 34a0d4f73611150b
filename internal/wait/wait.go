// Package wait lets tests wait for a condition that another goroutine or
// process brings about, without a fixed sleep.
package wait

import (
	"testing"
	"time"
)

// For calls fn every 10ms until it returns nil, and fails the test with
// fn's last error when timeout passes first.
func For(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("condition not met after %v: %v", timeout, err)
}

// Until polls cond every millisecond until it holds, and fails the test
// saying what it waited for when timeout passes first: for conditions
// cheap to test, such as a counter in memory.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Poll calls fn every 10ms until it returns nil, and returns fn's last
// error when timeout passes first: for a goroutine of a test, which may
// not end the test itself, or a retry with a bound.
func Poll(timeout time.Duration, fn func() error) error {
	return PollEvery(timeout, 10*time.Millisecond, fn)
}

// PollEvery is Poll calling fn every interval: for a condition costly to
// test (a command to run, a server to ask).
func PollEvery(timeout, interval time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
