package natsbus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/wait"
)

// TestPartitionTransformAgreesWithPartitionOf: a stream made for 6
// partitions stores each keyed event under the partition PartitionOf
// names (the server's own mapping), events published on core NATS keep
// their subject, and changing the number moves new events only.
func TestPartitionTransformAgreesWithPartitionOf(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.EnsureStream(ctx, StreamOptions{Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, "REACTORD_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	// Interest retention keeps nothing without a consumer: one that
	// reads every subject.
	all := StreamOptions{Durable: "all"}
	all.Defaults()
	if _, err := c.JetStream().CreateConsumer(ctx, "REACTORD_EVENTS", all.SharedConsumer()); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 60 {
		key := fmt.Sprintf("web%d.example.com", i)
		keys = append(keys, key)
		body := fmt.Appendf(nil, `{"tag":"salt/minion/%s/start","data":{"id":%q}}`, key, key)
		if err := c.Publish(ctx, Msg{Tag: "salt/minion/" + key + "/start", Body: body}, Stored); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]bool{}
	for i, key := range keys {
		m, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		want := PartitionFilter(DefaultPrefix, 6, PartitionOf(key, 6))
		if !strings.HasPrefix(m.Subject, strings.TrimSuffix(want, ">")+KeyToken(key)+".salt.minion.") {
			t.Fatalf("event of %s stored as %q, want under %q", key, m.Subject, want)
		}
		seen[PartitionOf(key, 6)] = true
	}
	if len(seen) != 6 {
		t.Errorf("60 minions fell into partitions %v, want all 6", seen)
	}
	// Core NATS publishers (older bridges, other tools) keep the tag's subject.
	if err := c.Publish(context.Background(), Msg{Tag: "myco/plain", Body: []byte(`{"tag":"myco/plain","data":{}}`)}, Core); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The flush says the server has the message; the stream stores it a
	// moment later.
	var m *jetstream.RawStreamMsg
	wait.For(t, 5*time.Second, func() (err error) {
		m, err = s.GetMsg(ctx, 61)
		return err
	})
	if m.Subject != "salt.evt.myco.plain" {
		t.Fatalf("core publish stored as %q; want salt.evt.myco.plain", m.Subject)
	}
	// Another number: EnsureStream leaves the transform alone (the new
	// consumers come first), SetPartitionTransform changes it for new
	// events.
	if err := c.EnsureStream(ctx, StreamOptions{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.Config.SubjectTransform.Destination != PartitionTransform(DefaultPrefix, 6).Destination {
		t.Fatalf("EnsureStream changed the transform before the consumers exist: %+v, %v", info.Config.SubjectTransform, err)
	}
	if err := c.SetPartitionTransform(ctx, StreamOptions{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, Msg{Tag: "salt/minion/web1/start", Body: []byte(`{"tag":"salt/minion/web1/start","data":{}}`)}, Stored); err != nil {
		t.Fatal(err)
	}
	m, err = s.GetMsg(ctx, 62)
	if err != nil || !strings.HasPrefix(m.Subject, fmt.Sprintf("salt.evt-part.3.%d.", PartitionOf("web1", 3))) {
		t.Fatalf("after the change to 3 partitions: stored as %v, %v", m, err)
	}
}
