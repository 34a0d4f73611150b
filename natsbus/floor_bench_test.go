//go:build unix

package natsbus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/natsbus/embedded"
)

// processCPU is this process's CPU time, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkJetStreamFloor measures what JetStream alone costs on this
// machine, with nothing of reactord in the path: an embedded server with
// a file-backed stream, a publisher publishing asynchronously with message
// ids (as the bridge does), and a pull consumer receiving every message —
// the ceiling under any daemon that reads its events from JetStream. The
// sub-benchmarks are reactord's delivery (trimmed-: limits retention
// purged every 20 ms to the consumer's acknowledgement floor by a Trimmer,
// each message acknowledged, as the daemon creates and consumes the
// stream; workqueue-: the stream it created before, and still creates on
// nats-server 2.9) and, for comparison, limits retention with an
// acknowledgement per message or per 100 (AckAll); every one syncs each
// write before acknowledging it (the embedded server's default) but
// -sync-2m, which flushes every two minutes (NATS's own default). The
// -batched ones publish as the bridge does: through a Publisher,
// atomic batches (allow_atomic) each written and flushed once. Messages are 500 bytes
// on 200 subjects. Run: go test ./natsbus -run '^$' -bench JetStreamFloor
// -benchtime 200000x.
func BenchmarkJetStreamFloor(b *testing.B) {
	for _, tc := range []struct {
		name      string
		retention jetstream.RetentionPolicy
		ackEvery  int           // 1: AckExplicit; more: AckAll every that many
		sync      time.Duration // embedded.Options.SyncInterval
		batched   bool          // through a Publisher
		trim      bool          // limits retention, trimmed (Trimmer)
	}{
		{"trimmed-ack-each-batched", jetstream.LimitsPolicy, 1, 0, true, true},
		{"trimmed-ack-each-batched-sync-2m", jetstream.LimitsPolicy, 1, 2 * time.Minute, true, true},
		{"workqueue-ack-each", jetstream.WorkQueuePolicy, 1, 0, false, false},
		{"workqueue-ack-each-batched", jetstream.WorkQueuePolicy, 1, 0, true, false},
		{"workqueue-ack-each-sync-2m", jetstream.WorkQueuePolicy, 1, 2 * time.Minute, false, false},
		{"workqueue-ack-each-batched-sync-2m", jetstream.WorkQueuePolicy, 1, 2 * time.Minute, true, false},
		{"limits-ack-each", jetstream.LimitsPolicy, 1, 0, false, false},
		{"limits-ackall-100", jetstream.LimitsPolicy, 100, 0, false, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: b.TempDir(), SyncInterval: tc.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown()
			ctx := context.Background()
			sub, err := nats.Connect(srv.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			js, _ := jetstream.New(sub)
			var meta map[string]string
			if tc.trim {
				meta = map[string]string{TrimmedKey: "c"}
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.>"}, Retention: tc.retention,
				Storage: jetstream.FileStorage, MaxAge: time.Hour, AllowAtomicPublish: tc.batched, Metadata: meta}); err != nil {
				b.Fatal(err)
			}
			policy := jetstream.AckExplicitPolicy
			if tc.ackEvery > 1 {
				policy = jetstream.AckAllPolicy
			}
			cons, err := js.CreateOrUpdateConsumer(ctx, "FLOOR", jetstream.ConsumerConfig{Durable: "c", AckPolicy: policy, MaxAckPending: 4096})
			if err != nil {
				b.Fatal(err)
			}
			total := int64(b.N)
			var got atomic.Int64
			done := make(chan struct{})
			cc, err := cons.Consume(func(m jetstream.Msg) {
				n := got.Add(1)
				if n%int64(tc.ackEvery) == 0 || n == total {
					_ = m.Ack()
				}
				if n == total {
					close(done)
				}
			}, jetstream.PullMaxMessages(1024))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Stop()
			trimDone := make(chan struct{})
			trimCtx, trimStop := context.WithCancel(ctx)
			if tc.trim {
				tr, err := (&Conn{nc: sub, js: js}).NewTrimmer(ctx, StreamOptions{Stream: "FLOOR", Durable: "c"})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer close(trimDone)
					tr.Every(trimCtx, 20*time.Millisecond, func(err error) bool { // as consume's trimEvery
						b.Error(err)
						return false
					})
				}()
			} else {
				close(trimDone)
			}
			defer func() { trimStop(); <-trimDone }()
			pub, err := nats.Connect(srv.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			pjs, _ := jetstream.New(pub, jetstream.WithPublishAsyncMaxPending(4096))
			body := make([]byte, 500)
			for i := range body {
				body[i] = 'x'
			}
			b.SetBytes(int64(len(body)))
			var bp *Publisher
			var failed atomic.Int64
			if tc.batched {
				pc := &Conn{nc: pub, prefix: "floor."}
				if bp, err = pc.NewPublisher(ctx, PublisherOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if bp != nil {
					err := bp.Publish(context.Background(), Msg{Tag: "m" + strconv.Itoa(i%200), Body: body, Meta: Meta{MsgID: strconv.Itoa(i), Key: "-"}}, func(err error) {
						if err != nil {
							failed.Add(1)
						}
					})
					if err != nil {
						b.Fatal(err)
					}
					continue
				}
				msg := &nats.Msg{Subject: "floor.m" + strconv.Itoa(i%200), Data: body, Header: nats.Header{}}
				msg.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(i))
				for {
					_, err := pjs.PublishMsgAsync(msg)
					if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
						continue // the server is behind: wait, as the bridge does
					}
					if err != nil {
						b.Fatal(err)
					}
					break
				}
			}
			if bp != nil {
				bp.Close(ctx)
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d not acknowledged", n)
				}
			}
			select {
			case <-done:
			case <-time.After(time.Minute + time.Duration(b.N)*time.Millisecond):
				b.Fatalf("received %d of %d", got.Load(), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-ms/1k")
		})
	}
}
