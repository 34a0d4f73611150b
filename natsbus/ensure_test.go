package natsbus_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/natsbus"
)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEnsure: what JetStream cannot create yet — a request's own
// deadline (not an API error: kv.Open stopped on it), a cluster electing
// (503), no peers to place copies on — is tried again until it works,
// with one line saying it waits and why and one saying it worked; what
// is refused for good stops at once; the caller's context bounds the
// wait.
func TestEnsure(t *testing.T) {
	t.Parallel()
	notReady := &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}
	noPeers := &jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}
	refused := &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}
	for _, tc := range []struct {
		name     string
		errs     []error // what the attempts return, in order; nil after
		ctx      time.Duration
		wantErr  error
		attempts int
		why      string
	}{
		{"own deadline", []error{context.DeadlineExceeded, context.DeadlineExceeded}, time.Minute, nil, 3, "no answer within"},
		{"electing", []error{notReady}, time.Minute, nil, 2, "JetStream is not ready"},
		{"no peers", []error{noPeers, noPeers}, time.Minute, nil, 3, "not enough nodes joined"},
		{"refused", []error{refused}, time.Minute, refused, 1, ""},
		{"caller's context ends", []error{notReady, notReady, notReady, notReady, notReady, notReady, notReady, notReady}, 600 * time.Millisecond, notReady, 0, "JetStream is not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs lockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			n := 0
			err := natsbus.Ensure(ctx, log, "stream X", func(actx context.Context) error {
				if _, ok := actx.Deadline(); !ok {
					t.Error("an attempt without a deadline of its own")
				}
				n++
				if n <= len(tc.errs) {
					return tc.errs[n-1]
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.attempts > 0 && n != tc.attempts {
				t.Fatalf("%d attempts, want %d", n, tc.attempts)
			}
			out := logs.String()
			waits := strings.Count(out, `msg="JetStream cannot create it yet; retrying" what="stream X"`)
			switch {
			case tc.why == "" && out != "":
				t.Fatalf("logged for an error that does not pass:\n%s", out)
			case tc.why != "" && (waits != 1 || !strings.Contains(out, tc.why)):
				t.Fatalf("want one line saying it waits (%q), got:\n%s", tc.why, out)
			case tc.wantErr == nil && tc.why != "" && !strings.Contains(out, `msg="JetStream: created after waiting" what="stream X"`):
				t.Fatalf("no line saying it worked:\n%s", out)
			case tc.wantErr != nil && tc.why != "" && !strings.Contains(err.Error(), "gave up waiting"):
				t.Fatalf("the error does not say it waited: %v", err)
			}
		})
	}
}

// TestEnsureStopped: a wait cut by the caller (a stop signal, a
// deadline) returns a *WaitError that errors.Is both the last attempt's
// error and the context's cause, naming what it waited for and how many
// attempts it made.
func TestEnsureStopped(t *testing.T) {
	t.Parallel()
	notReady := &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}
	stopSignal := errors.New("terminated")
	ctx, cancel := context.WithCancelCause(context.Background())
	n := 0
	err := natsbus.Ensure(ctx, nil, "stream X", func(context.Context) error {
		n++
		if n == 3 {
			cancel(stopSignal)
		}
		return notReady
	})
	var we *natsbus.WaitError
	if !errors.As(err, &we) || !errors.Is(err, stopSignal) || !errors.Is(err, notReady) {
		t.Fatalf("err %v (%T), want a *WaitError wrapping %v and %v", err, err, notReady, stopSignal)
	}
	if we.What != "stream X" || we.Attempts != 3 || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("WaitError %+v (%v), want stream X after 3 attempts", we, err)
	}
}
