package natsbus_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
	"github.com/reactord/reactord/reactor"
)

// A subscriber whose handler is blocked makes the client drop messages
// once its pending buffer is full: the drops are counted in
// reactord_dropped_total{reason="slow_consumer"} and logged once.
func TestSlowConsumerCounted(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var logs syncbuf.Buffer
	m := reactor.NewMetrics(prometheus.NewRegistry())
	dropped := m.Dropped.WithLabelValues(reactor.DropSlowConsumer)
	sub, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "slow", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		SlowConsumer: func(n int64) { dropped.Add(float64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	release := make(chan struct{})
	defer close(release)
	// Subscribe keeps the client's default pending limit (64 MB): 4 KB
	// events fill it after about 16,000.
	s, err := sub.Subscribe("", func(*natsbus.Message) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := sub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pub, err := natsbus.Connect(natsbus.ConnOptions{URL: srv.ClientURL(), Name: "pub"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	body := []byte(`{"tag":"t","data":{"x":"` + strings.Repeat("x", 4096) + `"}}`)
	const sent = 30000
	for range sent {
		if err := pub.Publish(context.Background(), natsbus.Msg{Tag: "t", Body: body}, natsbus.Core); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 15*time.Second, func() error {
		if got := testutil.ToFloat64(dropped); got < sent-17000 {
			return fmt.Errorf("slow_consumer drops = %v", got)
		}
		return nil
	})
	if got := testutil.ToFloat64(dropped); got < sent-17000 || got > sent {
		t.Fatalf("slow_consumer drops = %v, want about %d", got, sent-16000)
	}
	if n := strings.Count(logs.String(), "NATS slow consumer"); n != 1 {
		t.Fatalf("%d slow consumer lines, want 1:\n%s", n, logs.String())
	}
}
