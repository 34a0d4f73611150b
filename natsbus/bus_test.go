package natsbus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus/embedded"
)

// checkFor polls fn until it returns nil or the timeout passes.
// checkFor waits for fn to return nil (wait.For).
func checkFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	wait.For(t, timeout, fn)
}

func startServer(t *testing.T) (*embedded.Server, *Conn) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c, err := Connect(ConnOptions{URL: srv.ClientURL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

func TestCoreQueueGroupSplitsAndCarriesMeta(t *testing.T) {
	srv, pub := startServer(t)
	var counts [2]atomic.Int64
	var mu sync.Mutex
	var got []*Message
	for i := range 2 {
		c, err := Connect(ConnOptions{URL: srv.ClientURL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if _, err := c.SubscribeQueue("", "reactord", func(m *Message) {
			counts[i].Add(1)
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
		_ = c.Flush(context.Background())
	}
	const n = 400
	for i := range n {
		tag := "salt/beacon/web1/inotify//etc/important_file"
		if err := pub.Publish(context.Background(), Msg{Tag: tag, Body: []byte(`{"tag":"` + tag + `","data":{}}`), Meta: Meta{Hop: i%3 + 1, Cause: "jid-1", Origin: "test"}}, Core); err != nil {
			t.Fatal(err)
		}
	}
	checkFor(t, 5*time.Second, func() error {
		if counts[0].Load()+counts[1].Load() != n {
			return errors.New("not all delivered")
		}
		return nil
	})
	if counts[0].Load() == 0 || counts[1].Load() == 0 {
		t.Fatalf("queue group did not split: %d/%d", counts[0].Load(), counts[1].Load())
	}
	mu.Lock()
	m := got[0]
	mu.Unlock()
	tag, err := Tag(DefaultPrefix, m.Subject)
	if err != nil || tag != "salt/beacon/web1/inotify//etc/important_file" {
		t.Fatalf("subject %q -> %q, %v", m.Subject, tag, err)
	}
	if m.Meta.Origin != "test" || m.Meta.Cause != "jid-1" || m.Meta.Hop < 1 {
		t.Fatalf("meta = %+v", m.Meta)
	}
}
