package saltapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// waitFor polls cond until it holds, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 5*time.Second, what, cond)
}

// gate sits in front of the fake salt-api. It holds the first lowstate
// POST until released, so that reactions queue up behind it, and lets a
// test act on every lowstate POST before the fake sees it.
type gate struct {
	next    http.Handler
	arrived chan struct{} // closed when the first lowstate POST arrives
	release func()        // lets the first lowstate POST through
	held    chan struct{}

	mu    sync.Mutex
	posts int
	// before, when set, runs for each lowstate POST (n counts from 1)
	// with the number of lowstates it holds; it returns true when it
	// answered the request itself.
	before func(n, lows int, w http.ResponseWriter) bool
}

func newGate(next http.Handler) *gate {
	g := &gate{next: next, arrived: make(chan struct{}), held: make(chan struct{})}
	g.release = sync.OnceFunc(func() { close(g.held) })
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		g.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var lows []json.RawMessage
	_ = json.Unmarshal(body, &lows)
	g.mu.Lock()
	g.posts++
	n, before := g.posts, g.before
	g.mu.Unlock()
	if n == 1 {
		close(g.arrived)
		<-g.held
	}
	if before != nil && before(n, len(lows), w) {
		return
	}
	g.next.ServeHTTP(w, r)
}

// start serves g until the test ends.
func (g *gate) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	t.Cleanup(g.release) // runs before srv.Close
	return srv
}

type outcome struct {
	res actions.Result
	err error
}

// lineUp dispatches first, waits until its POST is held by g, dispatches
// rest in order (they queue behind it on a driver with MaxInFlight 1), then
// lets the first POST through and returns every outcome.
func lineUp(t *testing.T, d *saltapi.Driver, g *gate, first *event.Chunk, rest []*event.Chunk) (outcome, []outcome) {
	t.Helper()
	var firstOut outcome
	var wg sync.WaitGroup
	wg.Go(func() {
		firstOut.res, firstOut.err = d.Do(context.Background(), actions.Action{Chunk: first})
	})
	select {
	case <-g.arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the first POST never arrived")
	}
	outs := make([]outcome, len(rest))
	for i, c := range rest {
		wg.Go(func() {
			outs[i].res, outs[i].err = d.Do(context.Background(), actions.Action{Chunk: c})
		})
		// One at a time, so that the queue holds rest in order.
		waitFor(t, fmt.Sprintf("%d queued reactions", i+1), func() bool { return d.Queued() == i+1 })
	}
	g.release()
	wg.Wait()
	return firstOut, outs
}

func ping(tgt string) *event.Chunk {
	return reaction("local", "ping "+tgt, "test.ping", "tgt", tgt)
}

// pings returns reactions targeting m1..mn, one minion each.
func pings(n int) []*event.Chunk {
	out := make([]*event.Chunk, n)
	for i := range out {
		out[i] = ping(fmt.Sprintf("m%d", i+1))
	}
	return out
}

func minionNames(n int) []string {
	names := []string{"m0"}
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
	}
	return names
}

// TestBatching lines reactions up behind a held request: they go out
// together, and each caller gets its own return.
func TestBatching(t *testing.T) {
	cases := []struct {
		name     string
		maxBatch int
		rest     []*event.Chunk
		batches  []int   // lowstates per POST, as salt-api saw them
		errIs    []error // per reaction of rest; nil entries succeed
	}{
		{name: "waiting reactions share one POST", rest: pings(5), batches: []int{1, 5}},
		{name: "MaxBatch caps a batch", maxBatch: 2, rest: pings(5), batches: []int{1, 2, 2, 1}},
		{name: "MaxBatch 1 sends each alone", maxBatch: 1, rest: pings(3), batches: []int{1, 1, 1, 1}},
		{
			name: "clients mixed in one list",
			rest: []*event.Chunk{
				reaction("runner", "deploy", "state.orchestrate", "mods", "orch"),
				ping("m1"),
				reaction("wheel", "accept", "key.accept", "match", "m9"),
				ping("m2"),
			},
			batches: []int{1, 4},
		},
		{
			name:    "a target matching nothing fails alone",
			rest:    []*event.Chunk{ping("m1"), ping("nomatch"), ping("m2")},
			batches: []int{1, 3},
			errIs:   []error{nil, saltapi.ErrNoMinions, nil},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			fake.minions = minionNames(8)
			g := newGate(fake)
			srv := g.start(t)
			cfg := credentials(srv.URL)
			cfg.MaxInFlight, cfg.MaxBatch = 1, tc.maxBatch
			d := newDriver(t, cfg)
			first, outs := lineUp(t, d, g, ping("m0"), tc.rest)
			if first.err != nil {
				t.Fatalf("first reaction: %v", first.err)
			}
			st := fake.stats()
			if !reflect.DeepEqual(st.batches, tc.batches) {
				t.Fatalf("lowstates per POST %v, want %v", st.batches, tc.batches)
			}
			if len(st.problems) > 0 {
				t.Errorf("protocol problems: %q", st.problems)
			}
			jids := map[string]bool{first.res.JID: true}
			for i, out := range outs {
				var want error
				if tc.errIs != nil {
					want = tc.errIs[i]
				}
				if want != nil {
					if !errors.Is(out.err, want) {
						t.Errorf("reaction %d: err %v, want %v", i, out.err, want)
					}
					continue
				}
				if out.err != nil {
					t.Errorf("reaction %d: %v", i, out.err)
					continue
				}
				if !jidRE.MatchString(out.res.JID) || jids[out.res.JID] {
					t.Errorf("reaction %d: jid %q is not a fresh Salt jid", i, out.res.JID)
				}
				jids[out.res.JID] = true
				// A reaction gets its own return: a local one the
				// minion it targeted.
				c := tc.rest[i]
				if c.Str("state") == "local" && !reflect.DeepEqual(out.res.Minions, []string{c.Str("tgt")}) {
					t.Errorf("reaction %d for %s: minions %q", i, c.Str("tgt"), out.res.Minions)
				}
			}
		})
	}
}

// TestBatchFailure covers each way a batched POST can fail: a failure that
// may have run part of the batch is never sent again (each lowstate runs
// at most once) and is not retryable; one that provably ran nothing is
// sent again or reported like a single request's.
func TestBatchFailure(t *testing.T) {
	hijack := func(w http.ResponseWriter) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	// restartOnBatch makes salt-api forget its sessions (a restart) when
	// the first batch of more than one lowstate comes.
	restartOnBatch := func(f *fakeSalt) func(int, int, http.ResponseWriter) bool {
		var once sync.Once
		return func(_, lows int, _ http.ResponseWriter) bool {
			if lows > 1 {
				once.Do(f.restart)
			}
			return false
		}
	}
	cases := []struct {
		name   string
		setup  func(*fakeSalt)
		before func(f *fakeSalt) func(n, lows int, w http.ResponseWriter) bool
		rest   []*event.Chunk
		ran    []string // targets that ran, the first reaction's m0 included
		posts  int      // lowstate POSTs, probes included
		errIs  error    // every reaction of rest fails with it; nil: they succeed
		retry  bool
	}{
		{
			name:  "a lowstate the eauth user may not run, after others ran",
			setup: func(f *fakeSalt) { f.denied["cmd.run"] = true },
			rest: []*event.Chunk{ping("m1"), ping("m2"),
				reaction("local", "forbidden", "cmd.run", "tgt", "m3", "arg", []any{"reboot"}), ping("m4")},
			ran:   []string{"m0", "m1", "m2"},
			posts: 3, // the first, the batch, the empty session probe
			errIs: saltapi.ErrOutcomeUnknown,
		},
		{
			name:  "a lowstate raises: 500 after others ran",
			setup: func(f *fakeSalt) { f.crash["state.apply"] = http.StatusInternalServerError },
			rest:  []*event.Chunk{ping("m1"), reaction("local", "apply", "state.apply", "tgt", "m2"), ping("m3")},
			ran:   []string{"m0", "m1"},
			posts: 2,
			errIs: saltapi.ErrOutcomeUnknown,
		},
		{
			name: "503 for the whole batch",
			before: func(*fakeSalt) func(int, int, http.ResponseWriter) bool {
				return func(_, lows int, w http.ResponseWriter) bool {
					if lows > 1 {
						httpError(w, http.StatusServiceUnavailable, "Salt Master is not available.")
						return true
					}
					return false
				}
			},
			rest:  pings(3),
			ran:   []string{"m0"},
			posts: 2,
			errIs: saltapi.ErrOutcomeUnknown,
		},
		{
			name: "connection lost after the batch was sent",
			before: func(*fakeSalt) func(int, int, http.ResponseWriter) bool {
				return func(_, lows int, w http.ResponseWriter) bool {
					if lows > 1 {
						hijack(w)
						return true
					}
					return false
				}
			},
			rest:  pings(3),
			ran:   []string{"m0"},
			posts: 2,
			errIs: saltapi.ErrOutcomeUnknown,
		},
		{
			name:   "salt-api restarted: the session is refused before anything runs",
			before: restartOnBatch,
			rest:   pings(3),
			ran:    []string{"m0", "m1", "m2", "m3"},
			posts:  4, // the first, the refused batch, the probe, the batch again
		},
		{
			name:   "rest_tornado restarted: the session is redirected to /login before anything runs",
			setup:  func(f *fakeSalt) { f.tornado = true },
			before: restartOnBatch,
			rest:   pings(3),
			ran:    []string{"m0", "m1", "m2", "m3"},
			posts:  4, // the first, the redirected batch, the probe, the batch again
		},
		{
			name: "413: the batch is split until it fits",
			before: func(*fakeSalt) func(int, int, http.ResponseWriter) bool {
				return func(_, lows int, w http.ResponseWriter) bool {
					if lows > 2 {
						httpError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
						return true
					}
					return false
				}
			},
			rest:  pings(4),
			ran:   []string{"m0", "m1", "m2", "m3", "m4"},
			posts: 4, // the first, 4 refused, then 2 and 2
		},
		{
			name: "429 from a proxy: nothing ran, retry later",
			before: func(*fakeSalt) func(int, int, http.ResponseWriter) bool {
				return func(_, lows int, w http.ResponseWriter) bool {
					if lows > 1 {
						httpError(w, http.StatusTooManyRequests, "slow down")
						return true
					}
					return false
				}
			},
			rest:  pings(3),
			ran:   []string{"m0"},
			posts: 2,
			errIs: errRetryable,
			retry: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			fake.minions = minionNames(8)
			if tc.setup != nil {
				tc.setup(fake)
			}
			g := newGate(fake)
			if tc.before != nil {
				g.before = tc.before(fake)
			}
			srv := g.start(t)
			cfg := credentials(srv.URL)
			cfg.MaxInFlight = 1
			d := newDriver(t, cfg)
			first, outs := lineUp(t, d, g, ping("m0"), tc.rest)
			if first.err != nil {
				t.Fatalf("first reaction: %v", first.err)
			}
			var ran []string
			for _, low := range fake.stats().lows {
				ran = append(ran, low["tgt"].(string))
			}
			if !reflect.DeepEqual(ran, tc.ran) {
				t.Errorf("lowstates run for %q, want %q (each once)", ran, tc.ran)
			}
			g.mu.Lock()
			posts := g.posts
			g.mu.Unlock()
			if posts != tc.posts {
				t.Errorf("%d lowstate POSTs, want %d", posts, tc.posts)
			}
			for i, out := range outs {
				switch {
				case tc.errIs == nil:
					if out.err != nil {
						t.Errorf("reaction %d: %v", i, out.err)
					}
				case tc.errIs == errRetryable:
					if out.err == nil || errors.Is(out.err, saltapi.ErrOutcomeUnknown) {
						t.Errorf("reaction %d: err %v, want a plain retryable error", i, out.err)
					}
				case !errors.Is(out.err, tc.errIs):
					t.Errorf("reaction %d: err %v, want %v", i, out.err, tc.errIs)
				}
				if out.err != nil && actions.IsRetryable(out.err) != tc.retry {
					t.Errorf("reaction %d: retryable %v, want %v (%v)", i, actions.IsRetryable(out.err), tc.retry, out.err)
				}
			}
		})
	}
}

// errRetryable stands for "a retryable error that is not ErrOutcomeUnknown"
// in TestBatchFailure.
var errRetryable = errors.New("retryable")

// TestNoBatchWhileFailing: after a failed POST, reactions that queue up go
// out one by one (each failure then stays retryable) until salt-api
// answers again.
func TestNoBatchWhileFailing(t *testing.T) {
	fake := newFakeSalt()
	fake.minions = minionNames(8)
	g := newGate(fake)
	g.before = func(n, _ int, w http.ResponseWriter) bool {
		if n == 1 || n == 2 {
			httpError(w, http.StatusServiceUnavailable, "Salt Master is not available.")
			return true
		}
		return false
	}
	srv := g.start(t)
	cfg := credentials(srv.URL)
	cfg.MaxInFlight = 1
	d := newDriver(t, cfg)
	first, outs := lineUp(t, d, g, ping("m0"), pings(3))
	if first.err == nil || !actions.IsRetryable(first.err) {
		t.Fatalf("first reaction: %v, want a retryable 503", first.err)
	}
	// POST 2 (m1, alone) fails too; m2 and m3 then go alone and succeed.
	if outs[0].err == nil || !actions.IsRetryable(outs[0].err) || errors.Is(outs[0].err, saltapi.ErrOutcomeUnknown) {
		t.Fatalf("m1: %v, want a retryable 503", outs[0].err)
	}
	for i, out := range outs[1:] {
		if out.err != nil {
			t.Fatalf("reaction %d: %v", i+1, out.err)
		}
	}
	if st := fake.stats(); !reflect.DeepEqual(st.batches, []int{1, 1}) {
		t.Fatalf("lowstates per POST %v, want [1 1]", st.batches)
	}
}

// TestCallerLeavesBatch: a caller whose context ends while its lowstate
// waits is taken out of the queue and never sent.
func TestCallerLeavesQueue(t *testing.T) {
	fake := newFakeSalt()
	fake.minions = minionNames(8)
	g := newGate(fake)
	srv := g.start(t)
	cfg := credentials(srv.URL)
	cfg.MaxInFlight = 1
	d := newDriver(t, cfg)

	done := make(chan error, 1)
	go func() {
		_, err := d.Do(context.Background(), actions.Action{Chunk: ping("m0")})
		done <- err
	}()
	<-g.arrived
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := d.Do(ctx, actions.Action{Chunk: ping("m1")})
		left <- err
	}()
	waitFor(t, "a queued reaction", func() bool { return d.Queued() == 1 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) || actions.IsRetryable(err) {
		t.Fatalf("canceled caller: %v", err)
	}
	if d.Queued() != 0 {
		t.Fatalf("%d reactions still queued", d.Queued())
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := fake.stats(); len(st.lows) != 1 {
		t.Fatalf("%d lowstates ran, want only the first", len(st.lows))
	}
}

// loadServer is a salt-api stand-in for load: every lowstate POST takes
// delay, then answers a local_async return per lowstate. It counts the
// connections it accepted and the most POSTs it had in flight at once.
type loadServer struct {
	*httptest.Server
	delay            time.Duration
	conns            atomic.Int64
	posts, lowstates atomic.Int64
	inFlight, peak   atomic.Int64
	jid              atomic.Int64
}

func newLoadServer(tb testing.TB, delay time.Duration) *loadServer {
	tb.Helper()
	ls := &loadServer{delay: delay}
	ls.Server = httptest.NewUnstartedServer(http.HandlerFunc(ls.serve))
	ls.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ls.conns.Add(1)
		}
	}
	ls.Start()
	tb.Cleanup(ls.Close)
	return ls
}

func (ls *loadServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/login" {
		answer(w, http.StatusOK, map[string]any{"return": []any{map[string]any{"token": "ab12", "expire": 0}}})
		return
	}
	n := ls.inFlight.Add(1)
	defer ls.inFlight.Add(-1)
	for {
		p := ls.peak.Load()
		if n <= p || ls.peak.CompareAndSwap(p, n) {
			break
		}
	}
	var lows []map[string]any
	if err := json.NewDecoder(r.Body).Decode(&lows); err != nil {
		httpError(w, http.StatusBadRequest, "Lowstates must be a list")
		return
	}
	time.Sleep(ls.delay)
	ls.posts.Add(1)
	ls.lowstates.Add(int64(len(lows)))
	rets := make([]any, len(lows))
	for i, low := range lows {
		rets[i] = map[string]any{"jid": fmt.Sprintf("2026%016d", ls.jid.Add(1)), "minions": []any{low["tgt"]}}
	}
	answer(w, http.StatusOK, map[string]any{"return": rets})
}

// TestConcurrency sends bursts of reactions from many callers to a slow
// salt-api: the driver keeps MaxInFlight requests going, never more,
// batches the reactions that wait, and keeps its connections between
// bursts instead of closing all but two.
func TestConcurrency(t *testing.T) {
	const (
		callers     = 16
		bursts      = 8
		maxInFlight = 4
	)
	ls := newLoadServer(t, 5*time.Millisecond)
	// MaxBatch 2: a burst needs several POSTs, so every slot is used.
	cfg := saltapi.Config{URL: ls.URL, Token: "ab12", MaxInFlight: maxInFlight, MaxMerge: 1, MaxBatch: 2}
	d := newDriver(t, cfg)
	for b := range bursts {
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				tgt := fmt.Sprintf("b%d-c%d", b, c)
				res, err := d.Do(context.Background(), actions.Action{Chunk: ping(tgt)})
				if err != nil || !reflect.DeepEqual(res.Minions, []string{tgt}) {
					t.Errorf("%s: %+v %v", tgt, res, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	if got := ls.lowstates.Load(); got != callers*bursts {
		t.Fatalf("%d lowstates, want %d", got, callers*bursts)
	}
	if peak := ls.peak.Load(); peak != maxInFlight {
		t.Errorf("at most %d POSTs in flight, want exactly MaxInFlight %d", peak, maxInFlight)
	}
	if posts := ls.posts.Load(); posts >= callers*bursts {
		t.Errorf("%d POSTs for %d reactions: nothing was batched", posts, callers*bursts)
	}
	// One connection per request in flight (and one for a login), opened
	// once and kept: with Go's default of two idle connections, each of
	// the bursts would open new ones.
	if conns := ls.conns.Load(); conns > maxInFlight+1 {
		t.Errorf("%d connections opened for %d requests in flight: connections were not reused", conns, maxInFlight)
	}
}

// TestMerge: waiting local reactions that differ only in a literal minion
// target become one lowstate with a list target; each gets the shared jid
// with its own minion; a minion never appears twice in one merged job, other
// functions and non-literal targets stay apart, and a merged minion Salt did
// not match gets ErrNoMinions.
func TestMerge(t *testing.T) {
	apply := func(tgt string) *event.Chunk {
		return reaction("local", "highstate", "state.apply", "tgt", tgt)
	}
	cases := []struct {
		name     string
		maxMerge int
		rest     []*event.Chunk
		batches  []int      // lowstates per POST
		targets  [][]string // minions of each lowstate of the second POST
		errIs    []error
	}{
		{
			name:    "same call, different minions: one job",
			rest:    []*event.Chunk{apply("m1"), apply("m2"), apply("m3")},
			batches: []int{1, 1},
			targets: [][]string{{"m1", "m2", "m3"}},
		},
		{
			name:    "a minion twice: two jobs, in order",
			rest:    []*event.Chunk{apply("m1"), apply("m2"), apply("m1")},
			batches: []int{1, 2},
			targets: [][]string{{"m1", "m2"}, {"m1"}},
		},
		{
			name:    "other functions and globs stay apart",
			rest:    []*event.Chunk{apply("m1"), ping("m2"), apply("m*"), apply("m3")},
			batches: []int{1, 3},
			targets: [][]string{{"m1", "m3"}, {"m2"}, {"m*"}},
		},
		{
			name:    "an unknown minion in a merged job",
			rest:    []*event.Chunk{apply("m1"), apply("ghost"), apply("m2")},
			batches: []int{1, 1},
			targets: [][]string{{"m1", "ghost", "m2"}},
			errIs:   []error{nil, saltapi.ErrNoMinions, nil},
		},
		{
			name:     "MaxMerge 1 keeps one job per reaction",
			maxMerge: 1,
			rest:     []*event.Chunk{apply("m1"), apply("m2")},
			batches:  []int{1, 2},
			targets:  [][]string{{"m1"}, {"m2"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			fake.minions = minionNames(8)
			g := newGate(fake)
			srv := g.start(t)
			cfg := credentials(srv.URL)
			cfg.MaxInFlight, cfg.MaxMerge = 1, cmp.Or(tc.maxMerge, 64)
			d := newDriver(t, cfg)
			first, outs := lineUp(t, d, g, ping("m0"), tc.rest)
			if first.err != nil {
				t.Fatalf("first reaction: %v", first.err)
			}
			st := fake.stats()
			if !reflect.DeepEqual(st.batches, tc.batches) {
				t.Fatalf("lowstates per POST %v, want %v", st.batches, tc.batches)
			}
			var targets [][]string
			for _, low := range st.lows[1:] {
				switch tgt := low["tgt"].(type) {
				case string:
					targets = append(targets, []string{tgt})
				case []any:
					var ids []string
					for _, x := range tgt {
						ids = append(ids, x.(string))
					}
					targets = append(targets, ids)
					if low["tgt_type"] != "list" {
						t.Errorf("merged lowstate has tgt_type %v", low["tgt_type"])
					}
				}
			}
			if !reflect.DeepEqual(targets, tc.targets) {
				t.Fatalf("lowstate targets %q, want %q", targets, tc.targets)
			}
			jobOf := map[string]string{} // jid → a minion, to check no minion repeats in one job
			for i, out := range outs {
				var want error
				if tc.errIs != nil {
					want = tc.errIs[i]
				}
				if want != nil {
					if !errors.Is(out.err, want) {
						t.Errorf("reaction %d: err %v, want %v", i, out.err, want)
					}
					continue
				}
				if out.err != nil {
					t.Fatalf("reaction %d: %v", i, out.err)
				}
				tgt := tc.rest[i].Str("tgt")
				if tgt != "m*" && !reflect.DeepEqual(out.res.Minions, []string{tgt}) {
					t.Errorf("reaction %d: minions %v, want its own [%s]", i, out.res.Minions, tgt)
				}
				if prev, ok := jobOf[out.res.JID+"/"+tgt]; ok {
					t.Errorf("minion %s twice in job %s (%s)", tgt, out.res.JID, prev)
				}
				jobOf[out.res.JID+"/"+tgt] = tgt
			}
		})
	}
}
