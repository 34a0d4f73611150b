package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestDaemonSettingsFromFile: the reactord: section's http and jetstream
// take effect (the daemon serves /metrics there and consumes the stream);
// --http on the command line wins over the file's (issue 10 #14).
func TestDaemonSettingsFromFile(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	fileHTTP := freeAddr(t)
	conf := copyExampleConfig(t)
	src, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	withSettings := strings.Replace(string(src), "\nreactord:\n", "\nreactord:\n  http: "+fileHTTP+"\n  jetstream: true\n  queue: 64\n", 1)
	if withSettings == string(src) {
		t.Fatal("the example configuration has no reactord: section")
	}
	if err := os.WriteFile(conf, []byte(withSettings), 0o644); err != nil {
		t.Fatal(err)
	}

	// From the file.
	fromFile := goRun(t, "-c", conf, "--nats", srv.ClientURL(), "--dry-run", "--data-dir", t.TempDir())
	checkFor(t, 20*time.Second, func() error {
		resp, err := http.Get("http://" + fileHTTP + "/metrics")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return errFmt("metrics " + resp.Status)
		}
		return nil
	})
	checkFor(t, 10*time.Second, func() error {
		if logs := fromFile.logs(); !strings.Contains(logs, "reactord ready") || !strings.Contains(logs, "mode=jetstream") {
			return errFmt("jetstream: true did not take effect:\n" + logs)
		}
		return nil
	})
	if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/web3/start", Body: startEvent("web3")}, natsbus.Core); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(fromFile.out.String(), `"tgt":"web3"`) {
			return errFmt("no reaction yet")
		}
		return nil
	})
	fromFile.terminate()
	if err := <-fromFile.done; err != nil {
		t.Fatalf("the daemon's stop: %v", err)
	}

	// The command line wins: startDaemon gives --http, which serves;
	// the file's address does not.
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--dry-run")
	if p.http == fileHTTP {
		t.Fatal("same address")
	}
	if resp, err := http.Get("http://" + fileHTTP + "/metrics"); err == nil {
		resp.Body.Close()
		t.Fatalf("the file's http address serves though --http %s was given", p.http)
	}
}
