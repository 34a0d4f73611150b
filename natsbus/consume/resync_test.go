package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// TestResyncWithABacklog: a partition resyncs (reset to its
// acknowledgement floor, as at a missed delivery) while the handler's
// lanes hold more than an acknowledgement wait's worth of its events,
// some keys' handled already beyond the floor. The new session starts
// only once those are settled, and passes over the events handled in the
// last one: every key's events are handled once each, in order (issue 49:
// a session started after AckWait queued the events it delivered again
// behind later ones of their key, and handled those beyond the floor
// twice).
func TestResyncWithABacklog(t *testing.T) {
	_, c := natstest.Start(t)
	const keys, each = 4, 30
	log := newOrderLog()
	var lanes []chan *natsbus.Message
	for range keys {
		ch := make(chan *natsbus.Message, keys*each*2)
		lanes = append(lanes, ch)
		go func() {
			for m := range ch {
				var v struct {
					Key string `json:"key"`
					N   int    `json:"n"`
				}
				_ = json.Unmarshal(m.Body, &v)
				if v.Key != "k0" {
					time.Sleep(50 * time.Millisecond) // a slow reaction: the lanes back up (this is the handler's work, not a wait)
				}
				log.mu.Lock()
				log.seen[v.Key] = append(log.seen[v.Key], v.N)
				log.mu.Unlock()
				_ = m.Ack()
			}
		}()
	}
	t.Cleanup(func() {
		for _, ch := range lanes {
			close(ch)
		}
	})
	p, err := NewPartitioned(context.Background(), c, PartitionOptions{
		StreamOptions: natsbus.StreamOptions{AckWait: time.Second, MaxAckPending: 4096},
		Partitions:    1, Replica: "a", LeaseTTL: 2 * time.Second,
	}, func(m *natsbus.Message) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(testKey(m.Body)))
		lanes[h.Sum32()%keys] <- m
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	pub := ownedAndPublisher(t, c, p)
	for n := range each {
		for k := range keys {
			body := fmt.Sprintf(`{"key": "k%d", "n": %d}`, k, n)
			if err := pub.Publish(context.Background(), natsbus.Msg{Tag: "myco/ev", Body: []byte(body), Meta: natsbus.Meta{Key: "k0"}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub.Close(context.Background())
	if st := pub.Stats(); st.Failed > 0 {
		t.Fatalf("%d events not acknowledged: %v", st.Failed, st.Errors)
	}
	// Every event taken, k0's handled (beyond the floor, which the slow
	// keys hold back), the others' lanes a second and a half long.
	wait.For(t, 10*time.Second, func() error {
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.seen["k0"]) < each {
			return fmt.Errorf("k0: %d of %d handled", len(log.seen["k0"]), each)
		}
		return nil
	})
	p.mu.Lock()
	r := p.owned[0]
	p.mu.Unlock()
	r.resync("forced by the test")
	wait.For(t, 20*time.Second, func() error {
		if d, _, _ := log.check(); d < keys*each {
			return fmt.Errorf("%d of %d handled", d, keys*each)
		}
		return nil
	})
	// The new session's deliveries are in once the floor is at the end.
	wait.For(t, 10*time.Second, settled(r))
	distinct, dups, ooo := log.check()
	t.Logf("%d events handled, %d twice, %d out of order; %d passed over, resyncs %d", distinct, dups, ooo, p.Ignored(), p.Resyncs())
	if dups != 0 || ooo != 0 {
		log.mu.Lock()
		t.Errorf("%d handled twice, %d out of order: %v", dups, ooo, log.seen)
		log.mu.Unlock()
	}
}

// TestResyncBelowTheFloor: a resync whose reset the server starts below
// the floor this replica reached (its last acknowledgements not recorded
// yet when the reset came: the loaded CI run of TestBenchReplicas that
// handled 2,185 events of 2,000) delivers those events again; they are
// passed over, not handled twice, and the events after them are handled
// once each, in order. A stream deleted and made anew numbers its events
// from 1 again: those are handled, not taken for the old ones.
func TestResyncBelowTheFloor(t *testing.T) {
	for _, anew := range []bool{false, true} {
		t.Run(map[bool]string{false: "reset below the floor", true: "stream made anew"}[anew], func(t *testing.T) {
			testResyncFloor(t, anew)
		})
	}
}

func testResyncFloor(t *testing.T, anew bool) {
	_, c := natstest.Start(t)
	const keys, each = 3, 10
	log := newOrderLog()
	var fromStart atomic.Bool
	handle := func(m *natsbus.Message) {
		var v struct {
			Key string `json:"key"`
			N   int    `json:"n"`
		}
		_ = json.Unmarshal(m.Body, &v)
		log.mu.Lock()
		log.seen[v.Key] = append(log.seen[v.Key], v.N)
		log.mu.Unlock()
		_ = m.Ack()
	}
	p, err := NewPartitioned(context.Background(), c, PartitionOptions{
		// No trim: the reset to the stream's start must find its events.
		StreamOptions: natsbus.StreamOptions{AckWait: 5 * time.Second, TrimEvery: time.Hour},
		Partitions:    1, Replica: "a", LeaseTTL: 4 * time.Second,
		resetTo: func(string) uint64 {
			if fromStart.Load() {
				return 1 // as if the server had recorded none of this run's acknowledgements
			}
			return 0
		},
	}, handle)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	pub := ownedAndPublisher(t, c, p)
	defer pub.Close(context.Background())
	publish := func(from, to int) {
		for n := from; n < to; n++ {
			for k := range keys {
				body := fmt.Sprintf(`{"key": "k%d", "n": %d}`, k, n)
				if err := pub.Publish(context.Background(), natsbus.Msg{Tag: "myco/ev", Body: []byte(body), Meta: natsbus.Meta{Key: "k0"}}, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		pub.Flush()
	}
	handled := func(n int) func() error {
		return func() error {
			if d, _, _ := log.check(); d < n {
				return fmt.Errorf("%d of %d handled", d, n)
			}
			return nil
		}
	}
	publish(0, each)
	wait.For(t, 10*time.Second, handled(keys*each))
	p.mu.Lock()
	r := p.owned[0]
	p.mu.Unlock()
	wait.For(t, 10*time.Second, settled(r))
	ignored, resyncs := p.Ignored(), p.Resyncs()
	if anew {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.JetStream().DeleteStream(ctx, p.o.Stream); err != nil {
			t.Fatal(err)
		}
		so := p.o.StreamOptions
		so.Partitions = 1
		if err := c.EnsureStream(ctx, so); err != nil {
			t.Fatal(err)
		}
		// The consumer is gone with the stream: a resync makes it anew.
		wait.For(t, 20*time.Second, func() error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if p.Resyncs() == resyncs || r.pausing || r.cc == nil {
				return errors.New("the partition has not resynced on the new stream yet")
			}
			return nil
		})
	} else {
		fromStart.Store(true)
		r.resync("forced by the test")
		wait.For(t, 20*time.Second, func() error {
			if got := p.Ignored() - ignored; got < keys*each {
				return fmt.Errorf("%d of the %d events delivered again passed over", got, keys*each)
			}
			return nil
		})
		fromStart.Store(false)
	}
	publish(each, 2*each)
	wait.For(t, 10*time.Second, handled(2*keys*each))
	wait.For(t, 10*time.Second, settled(r))
	distinct, dups, ooo := log.check()
	t.Logf("%d events handled, %d twice, %d out of order; %d passed over, resyncs %d", distinct, dups, ooo, p.Ignored(), p.Resyncs())
	if distinct != 2*keys*each || dups != 0 || ooo != 0 {
		log.mu.Lock()
		t.Errorf("%d distinct (want %d), %d handled twice, %d out of order: %v", distinct, 2*keys*each, dups, ooo, log.seen)
		log.mu.Unlock()
	}
}

// ownedAndPublisher waits until p holds its one partition and returns a
// publisher on c.
func ownedAndPublisher(t *testing.T, c *natsbus.Conn, p *Partitioned) *natsbus.Publisher {
	t.Helper()
	wait.For(t, 10*time.Second, func() error {
		if len(p.Owned()) != 1 {
			return errors.New("the replica does not hold its partition yet")
		}
		return nil
	})
	pub, err := c.NewPublisher(context.Background(), natsbus.PublisherOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// settled is a wait.For condition: every event r took is acknowledged.
func settled(r *partRun) func() error {
	return func() error {
		if !r.empty() {
			return errors.New("events still pending or unacknowledged")
		}
		return nil
	}
}
