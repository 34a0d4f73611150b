package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// collect is a Publisher that keeps what it is given.
type collect struct {
	mu   sync.Mutex
	tags []string
}

func (c *collect) Publish(_ context.Context, m natsbus.Msg, _ natsbus.How) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tags = append(c.tags, m.Tag)
	return nil
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tags)
}

// TestOutboxCountsEventsSaltTrimmed: events whose values the master
// replaced with VALUE_TRIMMED (over its max_event_size) are published as
// they came, counted, and logged once per interval with what to do.
func TestOutboxCountsEventsSaltTrimmed(t *testing.T) {
	var logs bytes.Buffer
	pub := &collect{}
	o, err := NewOutbox(OutboxConfig{Dir: t.TempDir(), LogInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, pub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = o.Run(ctx) }()
	o.Offer("salt/job/1/ret/web1", []byte(`{"tag": "salt/job/1/ret/web1", "data": {"return": "VALUE_TRIMMED", "id": "web1"}}`), "1")
	o.Offer("salt/job/2/ret/web1", []byte(`{"tag": "salt/job/2/ret/web1", "data": {"return": {"a": "VALUE_TRIMMED"}}}`), "2")
	o.Offer("salt/job/3/ret/web1", []byte(`{"tag": "salt/job/3/ret/web1", "data": {"return": "the words VALUE_TRIMMED in a value"}}`), "3")
	wait.Until(t, 10*time.Second, "3 published", func() bool { return pub.count() >= 3 })
	if n := o.Stats().TrimmedBySalt.Load(); n != 2 {
		t.Errorf("TrimmedBySalt = %d, want 2", n)
	}
	if n := strings.Count(logs.String(), "event arrived trimmed by the Salt master"); n != 1 || !strings.Contains(logs.String(), "max_event_size") {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
}
