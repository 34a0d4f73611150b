package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDefaultDelivery: the daemon takes events through JetStream whenever
// the server has it, its embedded one or one given by --nats URL, unless
// told otherwise (a burst waits on disk). (A server without JetStream:
// daemon.TestDeliveryDefaultFollowsTheServer.)
func TestDefaultDelivery(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	conf := copyExampleConfig(t)
	fileJS := filepath.Join(t.TempDir(), "reactor.conf")
	body, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	withSetting := strings.Replace(string(body), "\nreactord:\n", "\nreactord:\n  jetstream: false\n", 1)
	if withSetting == string(body) {
		t.Fatal("the example configuration has no reactord: section")
	}
	if err := os.WriteFile(fileJS, []byte(withSetting), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		mode string
	}{
		{"embedded", []string{"-c", conf, "--dry-run", "--listen", "127.0.0.1:0"}, "jetstream"},
		{"embedded, --jetstream=false", []string{"-c", conf, "--dry-run", "--listen", "127.0.0.1:0", "--jetstream=false"}, "core"},
		{"embedded, jetstream: false in the file", []string{"-c", fileJS, "--dry-run", "--listen", "127.0.0.1:0"}, "core"},
		{"--nats URL", []string{"-c", conf, "--dry-run", "--nats", srv.ClientURL()}, "jetstream"},
		{"--nats URL --jetstream=false", []string{"-c", conf, "--dry-run", "--nats", srv.ClientURL(), "--jetstream=false"}, "core"},
		{"--nats URL --jetstream", []string{"-c", conf, "--dry-run", "--nats", srv.ClientURL(), "--jetstream"}, "jetstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startDaemon(t, tc.args...)
			checkFor(t, 20*time.Second, func() error {
				if !strings.Contains(p.logs(), "reactord ready") {
					return fmt.Errorf("not ready")
				}
				return nil
			})
			if want := "mode=" + tc.mode + " "; !strings.Contains(p.logs(), want) {
				t.Errorf("want %q in the ready line:\n%s", want, p.logs())
			}
			stopAll(t, []*proc{p})
		})
	}
}
