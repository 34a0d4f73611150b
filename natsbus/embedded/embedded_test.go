package embedded

import (
	"errors"
	"net"
	"testing"
	"time"
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
			c := srv.srv.JetStreamConfig()
			if c == nil {
				t.Fatal("JetStream is off")
			}
			if c.SyncAlways != tc.always || (!tc.always && c.SyncInterval != tc.interval) {
				t.Fatalf("sync_always %v, sync_interval %s; want %v, %s", c.SyncAlways, c.SyncInterval, tc.always, tc.interval)
			}
		})
	}
}
