package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/wait"
)

// TestPortTaken: an address in use is ErrAddrInUse, naming the flag that
// set it.
func TestPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Start(Options{Listen: l.Addr().String(), ListenFlag: "--listen"})
	if !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("err = %v, want ErrAddrInUse", err)
	}
	if want := "--listen " + l.Addr().String(); err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("error %q does not name the flag", err)
	}
}

// TestSyncBeforeAck: JetStream on the embedded server flushes each write
// to disk before acknowledging it unless SyncInterval asks otherwise.
func TestSyncBeforeAck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		always   bool
	}{
		{"default", 0, true},
		{"interval", 2 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Start(Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir(), SyncInterval: tc.interval})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			c := srv.current().JetStreamConfig()
			if c == nil {
				t.Fatal("JetStream is off")
			}
			if c.SyncAlways != tc.always || (!tc.always && c.SyncInterval != tc.interval) {
				t.Fatalf("sync_always %v, sync_interval %s; want %v, %s", c.SyncAlways, c.SyncInterval, tc.always, tc.interval)
			}
		})
	}
}

// TestRestart: Restart brings the server back on the same address (also
// when the first port was picked at random) with its settings (the token,
// the flush before each acknowledgement) and the streams read back from
// disk; a client reconnects by itself; Shutdown then stops it for good.
func TestRestart(t *testing.T) {
	const token = "s3cret"
	srv, err := Start(Options{Listen: "127.0.0.1:-1", DataDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	addr := srv.Addr()
	nc, err := nats.Connect(srv.ClientURL(), nats.Token(token), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.before", []byte("1")); err != nil {
		t.Fatal(err)
	}
	before := srv.current()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if srv.current() == before || before.Running() {
		t.Fatal("Restart kept the old server running")
	}
	if got := srv.Addr(); got != addr {
		t.Fatalf("restarted on %s, first on %s", got, addr)
	}
	if c := srv.current().JetStreamConfig(); c == nil || !c.SyncAlways {
		t.Fatalf("JetStream after the restart: %+v, want on and flushing each write", c)
	}
	if anon, err := nats.Connect(srv.ClientURL()); err == nil {
		anon.Close()
		t.Fatal("the restarted server takes a client without the token")
	}
	// A publish written to the old connection just before the client
	// noticed the restart is lost and never answered: each try gets 2 s,
	// and the retries carry one message id, so the stream keeps one copy.
	for {
		try, cancelTry := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(try, "s.after", []byte("2"), jetstream.WithMsgID("after"))
		cancelTry()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish went through after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 2 {
		t.Fatalf("the stream holds %d messages after the restart, want 2 (one from before)", n)
	}
	srv.Shutdown()
	if err := srv.Restart(); err == nil {
		t.Fatal("Restart after Shutdown started a server")
	}
	if srv.current().Running() {
		t.Fatal("a server runs after Shutdown")
	}
}

// TestClosedConnectionsBounded: the server keeps the records of at most
// maxClosedClients closed connections, however many came and went.
func TestClosedConnectionsBounded(t *testing.T) {
	srv, err := Start(Options{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for range 3 * maxClosedClients {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}
	// The last connections' records may still be on their way.
	var closed int
	wait.For(t, 10*time.Second, func() error {
		cz, err := srv.current().Connz(&natsserver.ConnzOptions{State: natsserver.ConnClosed})
		if err != nil {
			return err
		}
		if closed = cz.Total; closed < maxClosedClients {
			return fmt.Errorf("%d records of closed connections", closed)
		}
		return nil
	})
	if closed != maxClosedClients {
		t.Errorf("%d records of %d closed connections, want %d", closed, 3*maxClosedClients, maxClosedClients)
	}
}
