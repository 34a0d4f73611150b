package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/reactord/reactord/store"
	"testing"
	"time"
)

// benchPayloads are the data of a realistic mix of master events: job
// publishes, job returns, minion starts and beacon events (300 to 700 bytes
// each), with a "seq" that numbers the event.
var benchPayloads = []struct {
	tag  string
	data string
}{
	{"salt/job/20250301120000123456/new", `{"jid": "20250301120000123456", "tgt_type": "glob", "tgt": "web*", "user": "root", "fun": "state.apply", "arg": ["nginx", {"__kwarg__": true, "test": false}], "minions": ["web1", "web2", "web3", "web4"], "missing": [], "_stamp": "2025-03-01T12:00:00.123456"`},
	{"salt/job/20250301120000123456/ret/web1", `{"cmd": "_return", "id": "web1", "success": true, "return": {"pkg_|-nginx_|-nginx_|-installed": {"result": true, "comment": "All specified packages are already installed", "name": "nginx", "changes": {}, "__run_num__": 0, "start_time": "12:00:01.123456", "duration": 123.456, "__id__": "nginx", "__sls__": "nginx"}}, "retcode": 0, "jid": "20250301120000123456", "fun": "state.apply", "fun_args": ["nginx"], "out": "highstate", "_stamp": "2025-03-01T12:00:02.654321"`},
	{"salt/minion/web7/start", `{"id": "web7", "cmd": "_minion_event", "pretag": null, "data": "Minion web7 started at Sat Mar  1 12:00:03 2025", "tag": "salt/minion/web7/start", "_stamp": "2025-03-01T12:00:03.000001"`},
	{"salt/beacon/web2/inotify//etc/nginx/nginx.conf", `{"change": "IN_MODIFY", "id": "web2", "path": "/etc/nginx/nginx.conf", "_stamp": "2025-03-01T12:00:04.111111"`},
}

// benchEvent returns event number i of the mix, with id ev-<i>.
func benchEvent(i int) store.Event {
	p := benchPayloads[i%len(benchPayloads)]
	return store.Event{
		ID:       fmt.Sprintf("ev-%d", i),
		Tag:      p.tag,
		Data:     json.RawMessage(fmt.Sprintf(`%s, "seq": %d}`, p.data, i)),
		MasterID: "saltmaster",
		Time:     time.Now(),
	}
}

// BenchmarkWriterEvents measures events per second through a Writer with
// its default batching into each backend: b.N events are added as fast as
// the Writer takes them (waiting when its buffer is full, as a JetStream
// consumer would) and flushed. Run with -benchtime 100000x.
func BenchmarkWriterEvents(b *testing.B) {
	for _, name := range backendNames {
		b.Run(name, func(b *testing.B) {
			db := newTestDB(b, name)
			s := db.open(b)
			events := make([]store.Event, b.N)
			for i := range events {
				events[i] = benchEvent(i)
			}
			w := store.NewWriter(s, store.WriterOptions{})
			waits := 0
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range events {
				for !w.Add(events[i]) {
					waits++
					time.Sleep(100 * time.Microsecond)
				}
			}
			if err := w.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			st := w.Stats()
			if st.Written != int64(b.N) || st.Failures != 0 {
				b.Fatalf("stats = %+v", st)
			}
			if b.N >= 1000 {
				b.Logf("%s: %d events in %v (%.0f events/s), %d waits for buffer room", name, b.N, elapsed.Round(time.Millisecond), float64(b.N)/elapsed.Seconds(), waits)
			}
		})
	}
}
