package natsbus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestTrimmerForAllConsumers: on a stream trimmed for all its consumers,
// a Trim purges up to what every consumer acknowledged: a consumer with
// events waiting holds the stream at its acknowledgement floor, one with
// none holds nothing it was delivered or the stream had settleAge ago;
// with no consumer nothing is purged.
// PurgeAcknowledged purges one consumer's acknowledged events of its own
// subjects only.
func TestTrimmerForAllConsumers(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ALL", Subjects: []string{"a.>", "b.>"},
		Metadata: map[string]string{TrimmedKey: TrimmedAll}})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(subjects ...string) {
		t.Helper()
		for _, subj := range subjects {
			if _, err := c.js.Publish(ctx, subj, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	state := func() (first, msgs uint64) {
		t.Helper()
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.FirstSeq, info.State.Msgs
	}
	tr, err := c.NewTrimmer(ctx, StreamOptions{Stream: "ALL"})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	tr.now = func() time.Time { return clock }
	publish("a.1", "b.1", "a.2", "b.2") // 1 to 4
	if purged, _, err := tr.Trim(ctx); err != nil || purged != 0 {
		t.Fatalf("with no consumer: purged %d (%v), want 0", purged, err)
	}
	consumer := func(name, filter string) jetstream.Consumer {
		t.Helper()
		k, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckAllPolicy})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	fetch := func(k jetstream.Consumer, n int) []jetstream.Msg {
		t.Helper()
		b, err := k.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var out []jetstream.Msg
		for m := range b.Messages() {
			out = append(out, m)
		}
		if len(out) != n {
			t.Fatalf("fetched %d of %d (%v)", len(out), n, b.Error())
		}
		return out
	}
	a, b := consumer("A", "a.>"), consumer("B", "b.>")
	am, bm := fetch(a, 2), fetch(b, 2)
	ack := func(m jetstream.Msg) {
		t.Helper()
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name              string
		do                func()
		wantFirst, wantN  uint64
		wantPurged, floor uint64
	}{
		{"nothing acknowledged", func() {}, 1, 4, 0, 0},
		{"A acknowledged all, B nothing: B holds the stream at its floor", func() { ack(am[1]) }, 1, 4, 0, 0},
		{"B acknowledged b.1: up to it", func() { ack(bm[0]) }, 3, 2, 2, 2},
		// A is idle, but the server may not count a new event among its
		// pending ones yet: it holds what followed its last delivery
		// (a.2, 3) until the stream's last sequence was read settleAge ago.
		{"B acknowledged all: A holds what followed its last event", func() { ack(bm[1]) }, 4, 1, 1, 3},
		{"a moment later: nothing held", func() { clock = clock.Add(settleAge) }, 5, 0, 1, 4},
	}
	for _, st := range steps {
		st.do()
		purged, floor, err := tr.Trim(ctx)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if first, n := state(); purged != st.wantPurged || floor != st.floor || first != st.wantFirst || n != st.wantN {
			t.Errorf("%s: purged %d to floor %d, stream from %d holding %d; want %d, %d, %d, %d", st.name, purged, floor, first, n, st.wantPurged, st.floor, st.wantFirst, st.wantN)
		}
	}

	// PurgeAcknowledged: A acknowledged a.3, B holds b.3; only a.3 goes.
	publish("a.3", "b.3") // 5, 6
	ack(fetch(a, 1)[0])
	fetch(b, 1)
	if n, err := c.PurgeAcknowledged(ctx, "ALL", "A"); err != nil || n != 1 {
		t.Fatalf("PurgeAcknowledged(A): %d (%v), want 1", n, err)
	}
	if first, n := state(); first != 6 || n != 1 {
		t.Errorf("after PurgeAcknowledged(A) the stream starts at %d holding %d, want 6 holding 1 (b.3)", first, n)
	}
	// B's own acknowledged events, not those it still holds.
	publish("b.4") // 7
	if n, err := c.PurgeAcknowledged(ctx, "ALL", "B"); err != nil || n != 0 {
		t.Fatalf("PurgeAcknowledged(B) holding b.3: %d (%v), want 0", n, err)
	}
	// A consumer of every subject holds the events of both.
	consumer("EVERY", "")
	ack(fetch(b, 1)[0]) // b.4, and b.3 before it (AckAll)
	if n, err := c.PurgeAcknowledged(ctx, "ALL", "B"); err != nil || n != 0 {
		t.Fatalf("PurgeAcknowledged(B) while a consumer of every subject holds its events: %d (%v), want 0", n, err)
	}
	if err := s.DeleteConsumer(ctx, "EVERY"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.PurgeAcknowledged(ctx, "ALL", "B"); err != nil || n != 2 {
		t.Fatalf("PurgeAcknowledged(B) having acknowledged b.3 and b.4: %d (%v), want 2", n, err)
	}
}

func TestSubjectsOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.c", true},
		{"a.*", "a.c.d", false},
		{"a.>", "a.c.d", true},
		{"a.>", "a", false},
		{">", "x.y", true},
		{"salt.evt.>", "salt.evt-part.3.0.>", false},
		{"salt.*.3.>", "salt.evt-part.3.0.>", true},
		{"a.*.c", "a.b.*", true},
		{"a.*.c", "a.b.d", false},
	} {
		if got := subjectsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
		if got := subjectsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %t, want %t", tc.b, tc.a, got, tc.want)
		}
	}
}
