package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// orderConf writes a rule reacting to a minion's numbered events (tag
// salt/minion/<id>/ord, or myco/ord with the minion only in data.id): the
// reaction carries the minion and the event's number.
func orderConf(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sls := filepath.Join(dir, "ord.sls")
	if err := os.WriteFile(sls, []byte("ord:\n  local.test.arg:\n    - tgt: {{ .data.id }}\n    - arg:\n      - {{ .data.n }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "reactor.conf")
	if err := os.WriteFile(conf, []byte("reactor:\n  - 'salt/minion/*/ord':\n      - "+sls+"\n  - 'myco/ord':\n      - "+sls+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// reactionOrder records, per minion, the event numbers of the reactions
// the nats driver published, in arrival order, with when each number was
// first seen.
type reactionOrder struct {
	mu    sync.Mutex
	seen  map[string][]int
	first map[string]time.Time // "minion/n" → first arrival
	dupAt []time.Time          // first arrival of each duplicated event
}

func collectOrder(t *testing.T, c *natsbus.Conn) *reactionOrder {
	t.Helper()
	ro := &reactionOrder{seen: map[string][]int{}, first: map[string]time.Time{}}
	sub, err := c.SubscribeRaw("test.exec.>", func(_ string, body []byte, _ natsbus.Meta) {
		var v struct {
			Chunk struct {
				Tgt string `json:"tgt"`
				Arg []int  `json:"arg"`
			} `json:"chunk"`
		}
		if json.Unmarshal(body, &v) != nil || len(v.Chunk.Arg) != 1 {
			return
		}
		ro.mu.Lock()
		defer ro.mu.Unlock()
		ro.seen[v.Chunk.Tgt] = append(ro.seen[v.Chunk.Tgt], v.Chunk.Arg[0])
		k := v.Chunk.Tgt + "/" + strconv.Itoa(v.Chunk.Arg[0])
		if at, ok := ro.first[k]; ok {
			ro.dupAt = append(ro.dupAt, at)
		} else {
			ro.first[k] = time.Now()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Stop)
	_ = c.Flush(context.Background())
	return ro
}

// missing lists (up to 20) events no reaction was seen for, with their
// minion's partition among 6.
func (ro *reactionOrder) missing(minions, each int) []string {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	var out []string
	for m := range minions {
		id := fmt.Sprintf("m%03d", m)
		for n := range each {
			if _, ok := ro.first[id+"/"+strconv.Itoa(n)]; !ok && len(out) < 20 {
				out = append(out, fmt.Sprintf("%s/%d(p%d)", id, n, natsbus.PartitionOf(id, 6)))
			}
		}
	}
	return out
}

// check returns the distinct events reacted to, the duplicates, and the
// events reacted to before an earlier event of their minion was (out of
// order).
func (ro *reactionOrder) check() (distinct, dups, outOfOrder int) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	return ordercheck.Count(ro.seen)
}

// TestPartitionsOrderThroughKills: three replicas with --partitions 6 on a
// three-node NATS cluster (--stream-replicas 3); 10,000 numbered events
// of 200 minions (half with the minion in the tag, half only in data.id).
// One NATS node (the event stream's leader) and one replica are killed
// with SIGKILL mid-stream. Every event reacts, each minion's in the order
// published (the stream's), and the only events reacting twice are those
// in flight at the kills.
//
// The replicas and the test's client are connected to the two other
// nodes: a reaction the nats driver publishes (core NATS) through the
// dying node can be lost in its routes after the node confirmed it, which
// would look like a lost event. The dying node still holds the stream's
// leader and its share of the consumers' and buckets' leaders.
func TestPartitionsOrderThroughKills(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	const victimNode = 0
	all := strings.Join(cl.urls[victimNode+1:], ",")
	conf := orderConf(t)
	args := []string{"-c", conf, "--nats", all, "--jetstream", "--stream-replicas", "3", "--partitions", "6", "--ack-wait", "5s",
		"--driver", "nats", "--exec-subject", "test.exec.", "--store", "none", "--no-loop-guard"}
	ps := []*proc{startProcess(t, args...), startDaemon(t, args...), startDaemon(t, args...)}
	waitBalanced(t, ps, "2")
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: cl.urls[victimNode+1], Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ro := collectOrder(t, c)
	nc, err := nats.Connect(cl.urls[victimNode+1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	victimName := fmt.Sprintf("n%d", victimNode+1)
	checkFor(t, 10*time.Second, func() error {
		info, err := streamInfo(js, "REACTORD_EVENTS")
		if err != nil {
			return err
		}
		if info.Cluster.Leader == victimName {
			return nil
		}
		return stepDown(nc, js, victimName)
	})

	const minions, each = 200, 50
	published := make(chan error, 1)
	steady := time.NewTicker(20 * time.Millisecond)
	defer steady.Stop()
	go func() { published <- publishRounds(c, 0, each, minions, steady.C) }()
	checkFor(t, 30*time.Second, func() error {
		if d, _, _ := ro.check(); d < minions*each/3 {
			return fmt.Errorf("%d reactions so far", d)
		}
		return nil
	})
	if err := cl.cmds[victimNode].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	atKill, _, _ := ro.check()
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	checkFor(t, 60*time.Second, func() error {
		if d, _, _ := ro.check(); d < minions*each {
			return fmt.Errorf("%d of %d events reacted to; missing: %v", d, minions*each, ro.missing(minions, each))
		}
		return nil
	})
	took := time.Since(killedAt)
	waitSettled(t, strings.Join(cl.urls[victimNode+1:], ","), 30*time.Second) // late duplicates would show
	distinct, dups, ooo := ro.check()
	ro.mu.Lock()
	late := 0
	for _, at := range ro.dupAt {
		if at.After(killedAt.Add(10 * time.Second)) {
			late++
		}
	}
	ro.mu.Unlock()
	var owned []string
	changes := map[string]int{}
	for _, p := range ps[1:] {
		text := scrape(t, p)
		owned = append(owned, metricValue(t, text, "reactord_partitions_owned"))
		for _, ch := range []string{"acquired", "released", "lost", "resync"} {
			v, _ := strconv.Atoi(metricValue(t, text, `reactord_partition_changes_total{change="`+ch+`"}`))
			changes[ch] += v
		}
	}
	moved := movedAfter(ps[0].logs(), []string{ps[1].logs(), ps[2].logs()}, killedAt)
	t.Logf("%d minions × %d events: killed NATS node n%d and a replica after %d reactions; all %d reacted %v after the kills; duplicates %d, out of order %d; the dead replica's partitions taken over after %v; survivors hold %v partitions; their ownership changes %v",
		minions, each, victimNode+1, atKill, distinct, took.Round(time.Millisecond), dups, ooo, moved, owned, changes)
	for i, p := range ps[1:] {
		var notes []string
		for _, l := range strings.Split(p.logs(), "\n") {
			if strings.Contains(l, "partition") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				notes = append(notes, l)
			}
		}
		t.Logf("survivor %d's partition changes, warnings and errors:\n%s", i+1, strings.Join(notes, "\n"))
	}
	if distinct != minions*each || ooo != 0 {
		t.Fatalf("%d of %d events reacted to, %d out of order", distinct, minions*each, ooo)
	}
	if late > 0 {
		t.Fatalf("%d duplicates of events first reacted to more than 10s after the kills: only events in flight at the kills may run twice", late)
	}
	if owned[0] != "3" || owned[1] != "3" {
		t.Fatalf("the survivors hold %v partitions, want 3 each: the dead replica's should have moved", owned)
	}
	for _, p := range ps[1:] {
		if !strings.Contains(p.logs(), "partition acquired") {
			t.Errorf("a survivor did not log its partitions:\n%s", p.logs())
		}
	}
}

// movedAfter returns, for each partition the dead replica held (from its
// log), how long after at a survivor logged taking it.
func movedAfter(dead string, survivors []string, at time.Time) map[string]string {
	held := map[string]bool{}
	for _, l := range strings.Split(dead, "\n") {
		_, p, ok := strings.Cut(l, " partition=")
		if !ok {
			continue
		}
		p, _, _ = strings.Cut(p, " ")
		switch {
		case strings.Contains(l, "partition acquired"):
			held[p] = true
		case strings.Contains(l, "partition handed over"):
			delete(held, p)
		}
	}
	out := map[string]string{}
	for _, s := range survivors {
		for _, l := range strings.Split(s, "\n") {
			_, p, ok := strings.Cut(l, " partition=")
			if !ok || !strings.Contains(l, "partition acquired") {
				continue
			}
			p, _, _ = strings.Cut(p, " ")
			ts, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
			when, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil || !held[p] || when.Before(at) || out[p] != "" {
				continue
			}
			out[p] = when.Sub(at).Round(10 * time.Millisecond).String()
		}
	}
	return out
}
