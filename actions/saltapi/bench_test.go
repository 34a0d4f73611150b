package saltapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/saltapi"
)

// BenchmarkDispatch measures reactions per second through Do from several
// concurrent callers (the daemon's lanes) against a salt-api stand-in that
// takes 20ms per POST whatever it holds, with batching off (MaxBatch 1)
// and on (the default), for two MaxInFlight settings. The stand-in's
// constant cost flatters batching: a real salt-api runs the lowstates of a
// list one after the other, so only the per-request share of its cost
// (HTTP, session, thread hand-off) is saved.
//
//	go test -run '^$' -bench Dispatch ./actions/saltapi
func BenchmarkDispatch(b *testing.B) {
	for _, callers := range []int{4, 8, 16} {
		for _, inFlight := range []int{2, 8} {
			for _, batch := range []bool{false, true} {
				name := fmt.Sprintf("callers=%d/inflight=%d/batch=%v", callers, inFlight, batch)
				b.Run(name, func(b *testing.B) { benchDispatch(b, callers, inFlight, batch) })
			}
		}
	}
}

func benchDispatch(b *testing.B, callers, inFlight int, batch bool) {
	ls := newLoadServer(b, 20*time.Millisecond)
	cfg := saltapi.Config{URL: ls.URL, Token: "ab12", MaxInFlight: inFlight, MaxBatch: 1}
	if batch {
		cfg.MaxBatch = 0
	}
	d, err := saltapi.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close(context.Background())
	a := actions.Action{Chunk: ping("web1")}
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := d.Do(context.Background(), a); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	if posts := ls.posts.Load(); posts > 0 {
		b.ReportMetric(float64(ls.lowstates.Load())/float64(posts), "lowstates/POST")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkOneCaller measures what the driver adds to salt-api's round trip
// for one caller, as one minion's lane calls it (each reaction waits for
// the previous one's job): Do against an instant salt-api stand-in, beside
// a plain client POSTing the same lowstate over a kept-alive connection.
//
//	go test -run '^$' -bench OneCaller ./actions/saltapi
func BenchmarkOneCaller(b *testing.B) {
	b.Run("driver", func(b *testing.B) {
		ls := newLoadServer(b, 0)
		d, err := saltapi.New(saltapi.Config{URL: ls.URL, Token: "ab12"})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close(context.Background())
		a := actions.Action{Chunk: ping("web1")}
		for b.Loop() {
			if _, err := d.Do(context.Background(), a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		ls := newLoadServer(b, 0)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		defer client.CloseIdleConnections()
		const body = `[{"client": "local_async", "tgt": "web1", "tgt_type": "glob", "fun": "test.ping", "arg": [], "kwarg": {}}]`
		for b.Loop() {
			req, err := http.NewRequest(http.MethodPost, ls.URL+"/", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Auth-Token", "ab12")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
