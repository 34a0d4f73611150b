package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTwoMastersOneReaction: the two masters of a multi-master pair each
// fire their own copy of every event a minion sends (same tag and data,
// each with its own _stamp); a bridge per master feeds one stream, read by
// two JetStream replicas with --dedupe-masters. Every emission reacts
// once; a genuine repeat (stamped 10 s later) reacts again (issue 12).
func TestTwoMastersOneReaction(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	ce := collect(t, c, "test.exec.")
	args := []string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--dedupe-masters", "2s", "--no-loop-guard", "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none"}
	daemons := []*proc{startDaemon(t, args...), startDaemon(t, args...)}
	var masters [2]chan []byte
	for i := range masters {
		masters[i] = make(chan []byte, 1024)
		startDaemon(t, "bridge", "--sock-dir", fakeMasterSocket(t, masters[i]), "--nats", srv.ClientURL(), "--data-dir", t.TempDir())
	}
	const n, repeats = 300, 50
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	stamp := func(at time.Time) string { return at.Format("2006-01-02T15:04:05.000000") }
	emit := func(i int, at time.Time) {
		id := fmt.Sprintf("m%d", i)
		tag := "salt/minion/" + id + "/start"
		// Each master stamps with its own clock: up to 300 ms apart
		// (skew and delay), in either order.
		skew := time.Duration(1+rand.IntN(300)) * time.Millisecond // 0 would be one emission: the same Nats-Msg-Id
		first := rand.IntN(2)
		for k, m := range []int{first, 1 - first} {
			data := map[string]any{"id": id, "cmd": "_minion_event", "data": "Minion " + id + " started", "_stamp": stamp(at.Add(time.Duration(k) * skew))}
			masters[m] <- saltFrame(t, tag, data)
		}
	}
	for i := range n {
		emit(i, base.Add(time.Duration(i)*time.Millisecond))
	}
	for i := range repeats {
		emit(i, base.Add(10*time.Second+time.Duration(i)*time.Millisecond))
	}
	want := n + repeats
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total < want {
			return fmt.Errorf("%d of %d reactions", total, want)
		}
		return nil
	})
	copiesDropped := func() int {
		copies := 0.0
		for _, d := range daemons {
			var v float64
			fmt.Sscan(metricValue(t, scrape(t, d), `reactord_suppressed_total{reason="master_copy"}`), &v)
			copies += v
		}
		return int(copies)
	}
	// A copy reacting late would show up: wait until each emission's two
	// copies are accounted for (reacted or dropped) and the stream has
	// nothing left to deliver.
	checkFor(t, 30*time.Second, func() error {
		if total, _, _, _ := ce.snapshot(); total+copiesDropped() < 2*want {
			return fmt.Errorf("%d reactions and %d copies dropped of %d copies", total, copiesDropped(), 2*want)
		}
		return nil
	})
	waitSettled(t, srv.ClientURL(), 30*time.Second)
	total, distinct, origins, _ := ce.snapshot()
	ce.mu.Lock()
	wrong := 0
	for i := range n {
		w := 1
		if i < repeats {
			w = 2
		}
		if got := ce.byMinion["m"+strconv.Itoa(i)]; got != w {
			wrong++
			if wrong < 5 {
				t.Errorf("m%d reacted %d times, want %d", i, got, w)
			}
		}
	}
	ce.mu.Unlock()
	copies := copiesDropped()
	if wrong > 0 || total != want || distinct != n || copies != want {
		t.Fatalf("%d reactions (want %d), %d minions wrong, %v copies dropped (want %d)", total, want, wrong, copies, want)
	}
	t.Logf("%d emissions fired by both masters (%d events, %d repeated 10 s later): %d reactions, %v copies dropped, by replica %v", want, n, repeats, total, copies, origins)
	for _, d := range daemons {
		if strings.Contains(d.logs(), "level=ERROR") {
			t.Errorf("daemon logged errors:\n%s", d.logs())
		}
	}
}
