package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/ordercheck"
	"github.com/reactord/reactord/natsbus"
)

// takeoverRunsEnv, set to a number, runs TestPartitionsTakeoverOrder that
// many times at the size of issue 49's cluster run (200 minions × 50
// events) instead of once at a smaller size.
const takeoverRunsEnv = "REACTORD_TEST_TAKEOVER_RUNS"

// TestPartitionsTakeoverOrder is issue 49's cluster run: three replicas
// with --partitions 6, each given all three nodes of a NATS cluster
// (--stream-replicas 3), numbered events of many minions published in two
// halves to one node; between the halves, the event stream's leader node
// and one replica are killed with SIGKILL. Every event reacts, each
// minion's in the order published, and the only events reacting twice
// are those in flight at the kills (first reacted to before the second
// half was published).
//
// Unlike TestPartitionsOrderThroughKills, the replicas may be connected
// to the node that dies, and the second half is published at once, while
// the cluster elects new leaders and the dead replica's partitions wait
// for their leases to run out.
func TestPartitionsTakeoverOrder(t *testing.T) {
	t.Parallel()
	runs, minions, each := 1, 60, 24
	if v := os.Getenv(takeoverRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of runs", takeoverRunsEnv, v)
		}
		runs, minions, each = n, 200, 50
	}
	for run := range runs {
		// The runs vary the node killed (the stream's leader first) and
		// whether the first half was handled by then.
		t.Run(strconv.Itoa(run+1), func(t *testing.T) { takeoverRun(t, minions, each, run%3, run%2 == 1) })
	}
}

// handling is one reaction seen: which replica's exec subject it came on,
// the minion's event number, and when.
type handling struct {
	replica string
	n       int
	at      time.Time
}

// takeoverLog records every reaction, per minion, in arrival order.
type takeoverLog struct {
	mu   sync.Mutex
	seen map[string][]handling
}

func (l *takeoverLog) add(subject string, body []byte) {
	var v struct {
		Chunk struct {
			Tgt string `json:"tgt"`
			Arg []int  `json:"arg"`
		} `json:"chunk"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Chunk.Arg) != 1 {
		return
	}
	replica, _, _ := strings.Cut(strings.TrimPrefix(subject, "test.exec."), ".")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[v.Chunk.Tgt] = append(l.seen[v.Chunk.Tgt], handling{replica: replica, n: v.Chunk.Arg[0], at: time.Now()})
}

// count returns the distinct events reacted to, the duplicates, the
// events reacted to after a later one of their minion (out of order),
// and the duplicates of events first reacted to after since.
func (l *takeoverLog) count(since time.Time) (distinct, dups, outOfOrder, lateDups int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nums := map[string][]int{}
	for m, hs := range l.seen {
		first := map[int]time.Time{}
		for _, h := range hs {
			nums[m] = append(nums[m], h.n)
			if at, ok := first[h.n]; !ok {
				first[h.n] = h.at
			} else if at.After(since) {
				lateDups++
			}
		}
	}
	distinct, dups, outOfOrder = ordercheck.Count(nums)
	return distinct, dups, outOfOrder, lateDups
}

// examples describes up to limit minions whose events reacted out of order:
// each reaction around the first break, with its replica and time.
func (l *takeoverLog) examples(start time.Time, limit int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range l.seen {
			if !yield(m) {
				return
			}
		}
	}) {
		hs := l.seen[m]
		top := -1
		for i, h := range hs {
			if h.n > top+1 && len(out) < limit {
				var b strings.Builder
				fmt.Fprintf(&b, "%s:", m)
				for _, x := range hs[max(i-3, 0):min(len(hs), i+6)] {
					fmt.Fprintf(&b, " %d@%s+%.2fs", x.n, x.replica, x.at.Sub(start).Seconds())
				}
				out = append(out, b.String())
				break
			}
			top = max(top, h.n)
		}
	}
	return out
}

// takeoverRun runs issue 49's cluster run once with minions × each
// events, killing node victimNode (made the stream's leader when 0) once
// the first half is acknowledged, or once it is handled too (idle).
func takeoverRun(t *testing.T, minions, each, victimNode int, idle bool) {
	cl := startCluster(t)
	pubNode := (victimNode + 1) % 3
	conf := orderConf(t)
	all := strings.Join(cl.urls, ",")
	args := func(i int) []string {
		return []string{"-c", conf, "--nats", all, "--jetstream", "--stream-replicas", "3", "--partitions", "6",
			"--driver", "nats", "--exec-subject", fmt.Sprintf("test.exec.r%d.", i), "--store", "none", "--no-loop-guard"}
	}
	ps := []*proc{startProcess(t, args(0)...), startDaemon(t, args(1)...), startDaemon(t, args(2)...)}
	waitBalanced(t, ps, "2")
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: cl.urls[pubNode], Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	log := &takeoverLog{seen: map[string][]handling{}}
	sub, err := c.SubscribeRaw("test.exec.>", func(subject string, body []byte, _ natsbus.Meta) { log.add(subject, body) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Stop)
	_ = c.Flush(context.Background())
	nc, err := nats.Connect(cl.urls[pubNode])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	victim := fmt.Sprintf("n%d", victimNode+1)
	if victimNode == 0 {
		checkFor(t, 10*time.Second, func() error {
			info, err := streamInfo(js, "REACTORD_EVENTS")
			if err != nil {
				return err
			}
			if info.Cluster.Leader == victim {
				return nil
			}
			return stepDown(nc, js, victim)
		})
	}

	start := time.Now()
	if err := publishRounds(c, 0, each/2, minions, nil); err != nil {
		t.Fatal(err)
	}
	if idle {
		checkFor(t, 30*time.Second, func() error {
			if d, _, _, _ := log.count(start); d < minions*(each/2) {
				return fmt.Errorf("%d of the first half's %d events reacted to", d, minions*(each/2))
			}
			return nil
		})
	}
	if err := cl.cmds[victimNode].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	atKill, _, _, _ := log.count(killedAt)
	if err := publishRounds(c, each/2, each, minions, nil); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	checkFor(t, 90*time.Second, func() error {
		if d, _, _, _ := log.count(published); d < minions*each {
			return fmt.Errorf("%d of %d events reacted to", d, minions*each)
		}
		return nil
	})
	took := time.Since(killedAt)
	var live []string
	for i, u := range cl.urls {
		if i != victimNode {
			live = append(live, u)
		}
	}
	waitSettled(t, strings.Join(live, ","), 30*time.Second) // late duplicates would show
	distinct, dups, ooo, late := log.count(published)
	resyncs := 0
	for _, p := range ps[1:] {
		v, _ := strconv.Atoi(metricValue(t, scrape(t, p), `reactord_partition_changes_total{change="resync"}`))
		resyncs += v
	}
	t.Logf("%d minions × %d events: %d reacted to when node %s and a replica were killed; all %d reacted %v after; duplicates %d (%d first reacted to after the second half was published), out of order %d; survivors' resyncs %d",
		minions, each, atKill, victim, distinct, took.Round(time.Millisecond), dups, late, ooo, resyncs)
	if ooo > 0 || late > 0 {
		t.Logf("out of order (event@replica+seconds since the first half began):\n%s", strings.Join(log.examples(start, 10), "\n"))
		for i, p := range ps[1:] {
			var notes []string
			for _, l := range strings.Split(p.logs(), "\n") {
				if strings.Contains(l, "partition") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					notes = append(notes, l)
				}
			}
			t.Logf("survivor r%d's partition changes, warnings and errors:\n%s", i+1, strings.Join(notes, "\n"))
		}
		t.Fatalf("%d events out of order, %d duplicates of events not in flight at the kills", ooo, late)
	}
}

// publishRounds publishes, for each minion, its events numbered from to
// to-1 (half with the minion in the tag, half only in data.id): one round
// per number, each acknowledged whole before the next, so that the
// stream stores each minion's events in number order whatever a node's
// death makes the publisher send again. A round waits for pace, when
// given, before the next (a steady stream, not one burst).
func publishRounds(c *natsbus.Conn, from, to, minions int, pace <-chan time.Time) error {
	for n := from; n < to; n++ {
		if pace != nil && n > from {
			<-pace
		}
		for attempt := 1; ; attempt++ {
			pub, err := c.NewPublisher(context.Background(), natsbus.PublisherOptions{MaxBatch: 64, Retries: 3, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				return err
			}
			for m := range minions {
				id := fmt.Sprintf("m%03d", m)
				tag, data := "salt/minion/"+id+"/ord", fmt.Sprintf(`{"id": %q, "n": %d}`, id, n)
				if m%2 == 1 {
					tag = "myco/ord"
				}
				body := []byte(fmt.Sprintf(`{"tag": %q, "data": %s}`, tag, data))
				if err := pub.Publish(context.Background(), natsbus.Msg{Tag: tag, Body: body, Meta: natsbus.Meta{MsgID: id + "-" + strconv.Itoa(n)}}, nil); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			pub.Close(ctx)
			cancel()
			st := pub.Stats()
			if st.Failed == 0 {
				break
			}
			if attempt == 10 {
				return fmt.Errorf("round %d: %d events not acknowledged: %v", n, st.Failed, st.Errors)
			}
		}
	}
	return nil
}
