package saltapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/saltapi"
)

// counting serves h and counts the lowstate POSTs that reach it.
type counting struct {
	h     http.Handler
	posts atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/" {
		c.posts.Add(1)
	}
	c.h.ServeHTTP(w, r)
}

// masterGone answers logins, and lowstates as salt-api does when its
// master's sockets are gone (SaltDaemonNotRunning, checked before the
// lowstate runs).
func masterGone(fake *fakeSalt) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodPost {
			httpError(w, http.StatusServiceUnavailable, "Salt Master is not available.")
			return
		}
		fake.ServeHTTP(w, r)
	})
}

// hanging takes logins and never answers a lowstate: a master too slow to
// answer, or one that died after salt-api sent it the job.
func hanging(t *testing.T, fake *fakeSalt) http.Handler {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodPost {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		fake.ServeHTTP(w, r)
	})
}

// loginFails answers every login with 500.
func loginFails() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusInternalServerError, "An unexpected error occurred")
	})
}

// TestFailover runs the driver over two real HTTP servers, the first of
// which fails in each way salt-api can, and checks which failures move a
// reaction to the second master (those that provably started no job) and
// newFailover returns a failover driver over urls, closed at the test's
// end.
func newFailover(t *testing.T, cfg saltapi.Config, urls ...string) *saltapi.Failover {
	t.Helper()
	d, err := saltapi.NewFailover(saltapi.FailoverConfig{Config: cfg, URLs: urls, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// which do not.
func TestFailover(t *testing.T) {
	cases := []struct {
		name  string
		first func(t *testing.T, fake *fakeSalt) http.Handler // the first master
		moved bool                                            // the reaction ran on the second master
		err   string                                          // else: the error
		retry bool                                            // the error is retryable
	}{
		{
			name: "refused connection",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				return fake // closed before the reaction: see below
			},
			moved: true,
		},
		{
			name: "503 Salt Master is not available",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				return masterGone(fake)
			},
			moved: true,
		},
		{
			name: "login fails",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				return loginFails()
			},
			moved: true,
		},
		{
			name: "500 after the request was read",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				fake.failNext(http.StatusInternalServerError)
				return fake
			},
			err:   "HTTP 500 Internal Server Error: An unexpected error occurred",
			retry: true,
		},
		{
			name: "504",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				fake.failNext(http.StatusGatewayTimeout)
				return fake
			},
			err:   "HTTP 504 Gateway Timeout",
			retry: true,
		},
		{
			name: "timeout after the request was written",
			first: func(t *testing.T, fake *fakeSalt) http.Handler {
				return hanging(t, fake)
			},
			err:   "context deadline exceeded",
			retry: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f1, f2 := newFakeSalt(), newFakeSalt()
			h1 := tc.first(t, f1)
			c1, c2 := &counting{h: h1}, &counting{h: f2}
			s1, s2 := httptest.NewServer(c1), httptest.NewServer(c2)
			t.Cleanup(s1.Close)
			t.Cleanup(s2.Close)
			if tc.name == "refused connection" {
				s1.Close()
			}
			cfg := credentials("")
			cfg.Timeout = 500 * time.Millisecond
			d := newFailover(t, cfg, s1.URL, s2.URL)
			a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "web1")}
			res, err := d.Do(t.Context(), a)
			ran1, ran2 := len(f1.stats().lows), len(f2.stats().lows)
			if tc.moved {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				if !jidRE.MatchString(res.JID) || ran1 != 0 || ran2 != 1 {
					t.Fatalf("jid %q; lowstates run: first %d, second %d; want 0 and 1", res.JID, ran1, ran2)
				}
				// The next reaction goes to the second master at once.
				before := c1.posts.Load()
				if _, err := d.Do(t.Context(), actions.Action{Chunk: reaction("local", "ping2", "test.ping", "tgt", "web2")}); err != nil {
					t.Fatalf("second Do: %v", err)
				}
				if c1.posts.Load() != before || len(f2.stats().lows) != 2 {
					t.Fatalf("the next reaction: %d posts to the first, %d lowstates on the second", c1.posts.Load()-before, len(f2.stats().lows))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Do: %v, want an error with %q", err, tc.err)
			}
			if actions.IsRetryable(err) != tc.retry || saltapi.RanNothing(err) {
				t.Fatalf("Do: %v: retryable %v (want %v), ran nothing %v", err, actions.IsRetryable(err), tc.retry, saltapi.RanNothing(err))
			}
			if c2.posts.Load() != 0 || ran2 != 0 {
				t.Fatalf("a reaction whose outcome was unknown at the first master went to the second (%d posts)", c2.posts.Load())
			}
			// A new reaction stays with the first master too: a live but
			// slow master answers so, and with failover minions only it
			// reaches them (the health probe moves reactions away from a
			// master that stops answering: TestFailoverProbe)...
			posts1 := c1.posts.Load()
			_, _ = d.Do(t.Context(), actions.Action{Chunk: reaction("local", "other", "test.ping", "tgt", "web2")})
			if c1.posts.Load() != posts1+1 || c2.posts.Load() != 0 {
				t.Fatalf("a new reaction after the failure: %d posts to the first master, %d to the second; want 1 and 0", c1.posts.Load()-posts1, c2.posts.Load())
			}
			// ...and the retry of the first one goes to the first master alone.
			posts1 = c1.posts.Load()
			_, err = d.Do(t.Context(), a)
			if c1.posts.Load() != posts1+1 || c2.posts.Load() != 0 {
				t.Fatalf("the retry (%v): %d posts to the first master, %d to the second; want 1 and 0", err, c1.posts.Load()-posts1, c2.posts.Load())
			}
			if err != nil && !strings.Contains(err.Error(), "not sent to another master") {
				t.Fatalf("the retry's error does not say it stayed: %v", err)
			}
		})
	}
}

// TestFailoverAllDown: when no master takes a reaction, the error names
// each and is retryable; a retry finds the first master back.
func TestFailoverAllDown(t *testing.T) {
	f1 := newFakeSalt()
	s1 := httptest.NewServer(masterGone(f1))
	s2 := httptest.NewServer(http.NotFoundHandler())
	s2.Close()
	t.Cleanup(s1.Close)
	d := newFailover(t, credentials(""), s1.URL, s2.URL)
	a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "web1")}
	_, err := d.Do(t.Context(), a)
	if err == nil || !actions.IsRetryable(err) || !strings.Contains(err.Error(), s1.URL) || !strings.Contains(err.Error(), s2.URL) ||
		!strings.Contains(err.Error(), "Salt Master is not available") {
		t.Fatalf("Do: %v; want a retryable error naming both masters", err)
	}
	s1.Config.Handler = f1 // the master is back
	if res, err := d.Do(t.Context(), a); err != nil || res.JID == "" {
		t.Fatalf("the retry: %v %v", res, err)
	}
}

func TestNewFailoverRefuses(t *testing.T) {
	cases := []struct {
		name string
		urls []string
		err  string
	}{
		{"none", nil, "url is required"},
		{"twice", []string{"http://a:8000", "http://a:8000/"}, `url "http://a:8000/" is listed twice`},
		{"bad scheme", []string{"http://a:8000", "ftp://b"}, "scheme must be http or https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := saltapi.NewFailover(saltapi.FailoverConfig{Config: credentials(""), URLs: tc.urls})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("NewFailover: %v, want %q", err, tc.err)
			}
		})
	}
}

// TestFailoverKeysOnEveryMaster: a wheel key reaction runs on each master,
// which keeps its own minion keys; a master that is down is skipped with a
// log line, one that fails after reading the request makes the reaction
// retryable (the key functions are idempotent).
func TestFailoverKeysOnEveryMaster(t *testing.T) {
	accept := func() actions.Action {
		return actions.Action{Chunk: reaction("wheel", "accept_key", "key.accept", "args", []any{m("match", "web1")})}
	}
	f1, f2 := newFakeSalt(), newFakeSalt()
	s1 := httptest.NewServer(f1)
	// No keep-alive on the second master: once it is closed, the next
	// request finds it refusing connections. (A pooled connection would
	// fail with EOF after the request was written, which is rightly not
	// taken for a master that is down; whether the client has noticed the
	// close by then is a race.)
	s2 := httptest.NewUnstartedServer(f2)
	s2.Config.SetKeepAlivesEnabled(false)
	s2.Start()
	t.Cleanup(s1.Close)
	t.Cleanup(s2.Close)
	d := newFailover(t, credentials(""), s1.URL, s2.URL)
	if _, err := d.Do(t.Context(), accept()); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n1, n2 := len(f1.stats().lows), len(f2.stats().lows); n1 != 1 || n2 != 1 {
		t.Fatalf("key.accept ran %d and %d times on the two masters, want once on each", n1, n2)
	}
	f2.failNext(http.StatusInternalServerError)
	if _, err := d.Do(t.Context(), accept()); err == nil || !actions.IsRetryable(err) || !strings.Contains(err.Error(), "1 of 2 failed") {
		t.Fatalf("Do with the second master failing: %v, want a retryable error", err)
	}
	s2.Close()
	if res, err := d.Do(t.Context(), accept()); err != nil || res.JID == "" {
		t.Fatalf("Do with the second master down: %v %v, want the first master's job", res, err)
	}
	if n1 := len(f1.stats().lows); n1 != 3 {
		t.Fatalf("key.accept ran %d times on the first master, want 3", n1)
	}
}

// TestFailoverProbe: the health probe sends new reactions to the first
// master of the list that answers it: away from one that stopped
// answering (its login fails), back to it once it answers again.
func TestFailoverProbe(t *testing.T) {
	f1, f2 := newFakeSalt(), newFakeSalt()
	var down atomic.Bool
	h1 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			loginFails().ServeHTTP(w, r)
			return
		}
		f1.ServeHTTP(w, r)
	})
	s1, s2 := httptest.NewServer(h1), httptest.NewServer(f2)
	t.Cleanup(s1.Close)
	t.Cleanup(s2.Close)
	d := newFailover(t, credentials(""), s1.URL, s2.URL)
	ping := func(id string) {
		t.Helper()
		if _, err := d.Do(t.Context(), actions.Action{Chunk: reaction("local", id, "test.ping", "tgt", "web1")}); err != nil {
			t.Fatalf("Do %s: %v", id, err)
		}
	}
	ping("a")
	down.Store(true)
	if err := d.Probe(t.Context()); err != nil {
		t.Fatalf("Probe with the second master up: %v", err)
	}
	down.Store(false) // answers again, but the probe has not seen it yet
	ping("b")
	if n1, n2 := len(f1.stats().lows), len(f2.stats().lows); n1 != 1 || n2 != 1 {
		t.Fatalf("after the first master failed its probe: %d and %d lowstates, want 1 and 1", n1, n2)
	}
	if err := d.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	ping("c")
	if n1, n2 := len(f1.stats().lows), len(f2.stats().lows); n1 != 2 || n2 != 1 {
		t.Fatalf("after the first master answered its probe again: %d and %d lowstates, want 2 and 1", n1, n2)
	}
}

// TestFailoverKeysRefused: a key reaction that a live master refuses (a
// failed login: wrong credentials, no eauth there) is an error, not a
// master skipped as down; key functions that are not idempotent, or only
// read, run on one master.
func TestFailoverKeysRefused(t *testing.T) {
	f1 := newFakeSalt()
	s1, s2 := httptest.NewServer(f1), httptest.NewServer(loginFails())
	t.Cleanup(s1.Close)
	t.Cleanup(s2.Close)
	d := newFailover(t, credentials(""), s1.URL, s2.URL)
	accept := actions.Action{Chunk: reaction("wheel", "accept_key", "key.accept", "args", []any{m("match", "web1")})}
	if _, err := d.Do(t.Context(), accept); err == nil || !strings.Contains(err.Error(), "1 of 2 failed") {
		t.Fatalf("key.accept with the second master refusing the login: %v, want an error", err)
	}
	before := len(f1.stats().lows)
	gen := actions.Action{Chunk: reaction("wheel", "gen", "key.gen_accept", "args", []any{m("id_", "web9")})}
	if _, err := d.Do(t.Context(), gen); err != nil {
		t.Fatalf("key.gen_accept: %v", err)
	}
	if n := len(f1.stats().lows) - before; n != 1 {
		t.Fatalf("key.gen_accept ran %d times on the first master, want 1", n)
	}
}

// TestFailoverKeysSaidSentAtTheLast: a key reaction, which runs on every
// master in turn, is said to be sent (actions.Sent) once its POST to the
// last master is written, not the first's: a lane that went on sooner
// could have its next reaction reach the first master again before this
// one reached the last.
func TestFailoverKeysSaidSentAtTheLast(t *testing.T) {
	f1, f2 := newFakeSalt(), newFakeSalt()
	sent := make(chan struct{})
	var once sync.Once
	s1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodPost {
			select {
			case <-sent:
				t.Error("said to be sent once written to the first master")
			case <-time.After(200 * time.Millisecond):
			}
		}
		f1.ServeHTTP(w, r)
	}))
	s2 := httptest.NewServer(f2)
	t.Cleanup(s1.Close)
	t.Cleanup(s2.Close)
	d := newFailover(t, credentials(""), s1.URL, s2.URL)
	if !d.SaysSent("wheel") || !actions.SaysSent(d, "local") {
		t.Fatal("the failover driver does not say it tells when a request was written")
	}
	ctx := actions.WithSent(t.Context(), func() { once.Do(func() { close(sent) }) })
	if _, err := d.Do(ctx, actions.Action{Chunk: reaction("wheel", "accept_key", "key.accept", "args", []any{m("match", "web1")})}); err != nil {
		t.Fatalf("Do: %v", err)
	}
	select {
	case <-sent:
	default:
		t.Error("never said to be sent")
	}
	if n1, n2 := len(f1.stats().lows), len(f2.stats().lows); n1 != 1 || n2 != 1 {
		t.Errorf("key.accept ran %d and %d times on the two masters, want once on each", n1, n2)
	}
}
