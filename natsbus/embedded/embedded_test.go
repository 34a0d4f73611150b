package embedded

import (
	"errors"
	"net"
	"testing"
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
