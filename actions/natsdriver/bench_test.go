package natsdriver

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// BenchmarkDriver measures the nats driver as the daemon uses it: 8 lanes
// calling Do at once on the connection that also receives the events.
// "busy" floods that connection with events meanwhile (a burst), as the
// daemon's connection is when reactions pile up; "jetstream" has a stream
// capture the event subjects, so Do waits for its confirmation (the flood
// then goes into the stream too). It reports reactions/s and
// checks that an executor subscribed to reactord.exec.> got every one.
//
//	go test -run '^$' -bench Driver -benchtime 20000x ./natsbus
func BenchmarkDriver(b *testing.B) {
	for _, js := range []bool{false, true} {
		for _, busy := range []bool{false, true} {
			name := "core-idle"
			switch {
			case js && busy:
				name = "jetstream-busy"
			case js:
				name = "jetstream-idle"
			case busy:
				name = "core-busy"
			}
			b.Run(name, func(b *testing.B) { benchDriver(b, js, busy) })
		}
	}
}

func benchDriver(b *testing.B, js, busy bool) {
	o := embedded.Options{Listen: "127.0.0.1:-1"}
	if js {
		o.DataDir = b.TempDir()
	}
	srv, err := embedded.Start(o)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	connect := func(name string) *natsbus.Conn {
		c, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: name})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	daemon, executor, flooder := connect("daemon"), connect("executor"), connect("flooder")
	defer daemon.Close()
	defer executor.Close()
	defer flooder.Close()
	var got atomic.Int64
	sub, err := executor.SubscribeRaw(DefaultExecPrefix+">", func(string, []byte, natsbus.Meta) { got.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Stop()
	if err := executor.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if js { // Do waits for a round trip, as in a --jetstream daemon
		if err := executor.EnsureStream(context.Background(), natsbus.StreamOptions{Stream: "BENCH"}); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	flooded := make(chan struct{})
	if busy {
		var events atomic.Int64
		evs, err := daemon.Subscribe("", func(*natsbus.Message) { events.Add(1) })
		if err != nil {
			b.Fatal(err)
		}
		defer evs.Stop()
		_ = daemon.Flush(context.Background())
		body := []byte(`{"tag":"salt/job/20260101000000000000/ret/web1","data":{"id":"web1","fun":"state.apply","return":{"x":"ok"},"success":true}}`)
		go func() {
			defer close(flooded)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = flooder.Publish(context.Background(), natsbus.Msg{Tag: "salt/job/20260101000000000000/ret/web1", Body: body}, natsbus.Core)
			}
		}()
	} else {
		close(flooded)
	}
	drv := New(daemon, "", "bench")
	defer func() { _ = drv.Close(context.Background()) }()
	a := actions.Action{Tag: "salt/minion/web1/start", Chunk: benchChunk()}
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 lanes
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := drv.Do(context.Background(), a); err != nil {
				b.Error(err)
				return
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	close(stop)
	<-flooded
	b.ReportMetric(float64(b.N)/el.Seconds(), "reactions/s")
	wait.For(b, 20*time.Second, func() error {
		if n := got.Load(); n != int64(b.N) {
			return fmt.Errorf("executor got %d reactions of %d", n, b.N)
		}
		return nil
	})
}

func benchChunk() *event.Chunk {
	c := event.NewMap(6)
	c.Set("state", "local")
	c.Set("fun", "state.apply")
	c.Set("tgt", "web1")
	c.Set("__id__", "highstate")
	c.Set("__sls__", "/srv/reactor/start.sls")
	c.Set("order", int64(1))
	return c
}
