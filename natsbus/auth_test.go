package natsbus

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func authServer(t *testing.T, o *server.Options) string {
	t.Helper()
	o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

func TestConnectAuthentication(t *testing.T) {
	tokenURL := authServer(t, &server.Options{Authorization: "s3cret"})
	userURL := authServer(t, &server.Options{Username: "reactord", Password: "pw"})
	cases := []struct {
		name string
		opts ConnOptions
		ok   bool
	}{
		{"token", ConnOptions{URL: tokenURL, Token: "s3cret"}, true},
		{"wrong token", ConnOptions{URL: tokenURL, Token: "nope"}, false},
		{"no token", ConnOptions{URL: tokenURL}, false},
		{"user and password", ConnOptions{URL: userURL, User: "reactord", Password: "pw"}, true},
		{"wrong password", ConnOptions{URL: userURL, User: "reactord", Password: "x"}, false},
		{"missing nkey file", ConnOptions{URL: userURL, NKeyFile: "/nonexistent/seed.nk"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := Connect(c.opts)
			if c.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if conn != nil {
				conn.Close()
			}
		})
	}
}
