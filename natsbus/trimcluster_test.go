package natsbus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestTrimNeedsEveryConsumer: on a NATS cluster, a consumer whose servers
// are all down is listed with no state at all (no leader, nothing pending,
// a floor of 0), and one whose leader does not answer in time is left out
// of the list. The trim of a stream trimmed for all its consumers must
// then purge nothing: read as an idle consumer, the one that is down
// would let the trim take the ten events it has not acknowledged.
func TestTrimNeedsEveryConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes, c := startTrimCluster(t)
	o := StreamOptions{Stream: "PARTS", Partitions: 2, Replicas: 3}
	if err := c.EnsureStream(ctx, o); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := c.Publish(ctx, Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: Meta{MsgID: fmt.Sprint(i)}}, Stored); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func(name string, replicas int, ack bool) *jetstream.ConsumerInfo {
		t.Helper()
		cons, err := c.js.CreateOrUpdateConsumer(ctx, "PARTS", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: replicas, AckWait: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// A consumer just created on a cluster may have no leader for a
		// moment: its pull requests then get "no responders". Fetch until
		// all ten came; none is delivered twice within the ack wait (2 min,
		// past the polls' 30 s).
		n := 0
		err = wait.PollEvery(30*time.Second, 200*time.Millisecond, func() error {
			batch, err := cons.Fetch(10-n, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				n++
				if ack {
					if err := m.DoubleAck(ctx); err != nil {
						return err
					}
				}
			}
			if n < 10 {
				return fmt.Errorf("%s fetched %d of 10 (%v)", name, n, batch.Error())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	consumer("done", 3, true)
	held := consumer("held", 1, false) // on one server only
	now := time.Now()
	tr, err := c.NewTrimmer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	tr.now = func() time.Time { return now }
	if purged, _, err := tr.Trim(ctx); err != nil || purged != 0 {
		t.Fatalf("first trim: purged %d (%v); want none: held has acknowledged nothing", purged, err)
	}
	// held's only server goes down; the others keep the stream.
	down := -1
	for i, n := range nodes {
		if n.Name() == held.Cluster.Leader {
			down = i
		}
	}
	if down < 0 {
		t.Fatalf("held's leader %q is none of the nodes", held.Cluster.Leader)
	}
	nodes[down].Shutdown()
	wait.For(t, 60*time.Second, func() error {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		s, err := c.js.Stream(cctx, "PARTS")
		if err != nil {
			return err
		}
		l := s.ListConsumers(cctx)
		var seen []string
		listed := false
		for ci := range l.Info() {
			leader := "?"
			if ci.Cluster != nil {
				leader = ci.Cluster.Leader
			}
			seen = append(seen, ci.Name+"@"+leader)
			if ci.Name == "held" {
				listed = true
				if leader == "" {
					return nil // offline: listed with no state
				}
			}
		}
		if !listed && l.Err() == nil {
			return nil // missing: left out of the list
		}
		return fmt.Errorf("held still listed with a leader: %v (%v)", seen, l.Err())
	})
	now = now.Add(2 * time.Second) // past the settle: an idle consumer would hold nothing
	purged, _, err := tr.Trim(ctx)
	if purged != 0 || err == nil || !strings.Contains(err.Error(), "held has no leader") && !strings.Contains(err.Error(), "1 of its 2 answered") {
		t.Errorf("trim with held down: purged %d (%v); want none, and an error naming held", purged, err)
	}
	s, err := c.js.Stream(ctx, "PARTS")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 10 {
		t.Errorf("the stream holds %v events (%v), want 10", info.State.Msgs, err)
	}
}

// startTrimCluster starts three embedded servers as one NATS cluster and
// returns them with a connection to all three, once JetStream has its
// meta leader.
func startTrimCluster(t *testing.T) ([]*embedded.Server, *Conn) {
	t.Helper()
	var routes, urls []string
	var listens []string
	for range 3 {
		listens = append(listens, fmt.Sprintf("127.0.0.1:%d", freeport.Port(t)))
	}
	for _, l := range listens {
		routes = append(routes, "nats-route://"+l)
	}
	var nodes []*embedded.Server
	for i := range 3 {
		srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir(), Name: fmt.Sprintf("n%d", i+1),
			Cluster: &embedded.ClusterOptions{Name: "trim", Listen: listens[i], Routes: routes}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		nodes = append(nodes, srv)
		urls = append(urls, srv.ClientURL())
	}
	c, err := Connect(ConnOptions{URL: strings.Join(urls, ","), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait.For(t, 60*time.Second, func() error {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		return c.JetStreamReady(cctx, 3)
	})
	return nodes, c
}
