package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/reactor"
)

// cmdFloorConsumer is the process --replicas starts, with --floor, in
// place of each daemon: JetStream alone with reactord's consumer shape —
// the event stream as the daemon creates it (each write flushed by the
// server the bench runs; trimmed every 20 ms to the acknowledgement floor
// as the daemon's consumer trims it, or a work queue on nats-server 2.9)
// and the shared durable consumer, each message acknowledged on its own
// once received — and nothing of reactord in the path. It serves the figures the bench reads from a
// replica (events received, and the publish-to-receipt latency in the
// daemon's buckets) on /metrics.
func cmdFloorConsumer(ctx context.Context, args []string, stderr io.Writer) int {
	fs := newFlags("floor", "reactord-bench floor --nats URL", "A JetStream consumer alone: the floor under reactord's daemon.", stderr)
	url := fs.String("nats", "", "NATS URL")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: *url, Name: "bench-floor"})
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	defer c.Close()
	so := natsbus.StreamOptions{}
	so.Defaults()
	if err := c.EnsureStream(ctx, so); err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	cons, err := c.JetStream().CreateOrUpdateConsumer(ctx, so.Stream, so.SharedConsumer())
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	reg := prometheus.NewRegistry()
	received := prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_events_total", Help: "Messages received."})
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reactord_event_sent_latency_seconds",
		Help: "From the publisher's send stamp to the message's receipt.", Buckets: reactor.SentLatencyBuckets})
	reg.MustRegister(received, latency)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ns, err := strconv.ParseInt(m.Headers().Get(natsbus.HeaderSent), 10, 64); err == nil {
			latency.Observe(time.Since(time.Unix(0, ns)).Seconds())
		}
		received.Inc()
		_ = m.Ack()
	}, jetstream.PullMaxMessages(so.MaxAckPending))
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	defer cc.Stop()
	if tr, err := c.NewTrimmer(ctx, so); err == nil {
		// Every 20 ms, as the daemon's consumer trims (natsbus/consume).
		go tr.Every(ctx, 20*time.Millisecond, func(err error) bool {
			log.Warn("trimming the stream failed", "err", err)
			return true
		})
	} else if !errors.Is(err, natsbus.ErrNotTrimmed) {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	srv, err := serveBenchHTTP("127.0.0.1:0", reg, log, nil)
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return exitUsage
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return exitUsage
	}
	return exitOK
}
