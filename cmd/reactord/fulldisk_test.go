package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/natsbus"
)

// tmpfs mounts a tmpfs of size MiB for the test, or skips.
func tmpfs(t *testing.T, mib int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", mib), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s): the full-disk test needs root and mount", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file on dir's file system until it is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// TestFullDiskRecovers: the daemon on its embedded server, its data
// directory on a 64 MiB tmpfs filled while events flow. JetStream stops
// (the NATS server turns it off when a write fails): reactord says so once
// in its log, /healthz answers 503 and reactord_jetstream_up is 0. When the
// space comes back it restarts the embedded server by itself: /healthz 200
// again and every event published afterwards is reacted to; nothing the
// stream acknowledged is lost (issue 22, item 1).
func TestFullDiskRecovers(t *testing.T) {
	t.Parallel()
	fs := tmpfs(t, 64)
	data := filepath.Join(fs, "data")
	conf := copyExampleConfig(t)
	listen := freeAddr(t)
	p := startDaemon(t, "-c", conf, "--listen", listen, "--data-dir", data, "--driver", "nats", "--exec-subject", "test.exec.")
	c := embeddedClient(t, data, listen)
	ce := collect(t, c, "test.exec.")
	run := fmt.Sprintf("d%d", time.Now().UnixNano())
	acked := map[string]bool{}
	publish := func(from, to int) (failed int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("%s-%d", run, i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id)}, natsbus.Stored)
			cancel()
			if err != nil {
				failed++
				continue
			}
			acked[id] = true
		}
		return failed
	}
	reacted := func() error {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		for id := range acked {
			if ce.byMinion[id] == 0 {
				return fmt.Errorf("%s acknowledged by the stream but not reacted to (%d acknowledged)", id, len(acked))
			}
		}
		return nil
	}
	if n := publish(0, 100); n > 0 {
		t.Fatalf("%d of 100 events refused before the disk was full", n)
	}
	checkFor(t, 20*time.Second, reacted)

	filler := fill(t, fs)
	// nats-server finds the disk full at a write to a store that does not
	// fit in what its files' last pages left free: the test keeps
	// publishing until it does (once 20 events fitted, and JetStream
	// stopped only 51 s later, at the guard's next write).
	failed, next := 0, 100
	checkFor(t, 60*time.Second, func() error {
		for range 10 { // a round ends at its first refusal: each may take its 1 s
			f := publish(next, next+1)
			failed, next = failed+f, next+1
			if f > 0 {
				break
			}
		}
		if code := healthCode(p, "/healthz"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("/healthz %d with the disk full", code)
		}
		return nil
	})
	if got := metricValue(t, scrape(t, p), "reactord_jetstream_up"); got != "0" {
		t.Errorf("reactord_jetstream_up = %s with JetStream stopped", got)
	}
	if !strings.Contains(p.logs(), "JetStream stopped on the embedded NATS server") {
		t.Fatalf("the stop is not logged:\n%s", lastLines(p.logs(), 15))
	}
	t.Logf("disk full: %d of %d events refused by the stream", failed, next-100)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	checkFor(t, 60*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != http.StatusOK {
			return fmt.Errorf("/healthz %d after the space came back", code)
		}
		return nil
	})
	back := time.Since(freed)
	// The restarted server dropped every client's connection, the test's
	// too: a publish written just before its client noticed is lost on the
	// way and times out. The test publishes as the bridge does, retrying
	// with the event's id, which the stream's dedupe window makes safe.
	retried := 0
	for i := next; i < next+200; i++ {
		id := fmt.Sprintf("%s-%d", run, i)
		checkFor(t, 10*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored)
			if err != nil {
				retried++
				t.Logf("%s %s refused after the space came back: %v", time.Now().Format("15:04:05.000"), id, err)
			}
			return err
		})
		acked[id] = true
	}
	checkFor(t, 60*time.Second, reacted)
	if n := strings.Count(p.logs(), "JetStream stopped on the embedded NATS server"); n != 1 {
		t.Errorf("the stop was logged %d times, want once", n)
	}
	if !strings.Contains(p.logs(), "JetStream runs again") {
		t.Errorf("the recovery is not logged")
	}
	t.Logf("healthy again %s after the space came back; %d acknowledged events, all reacted to; %d publishes retried after the space came back", back.Round(time.Second), len(acked), retried)
}

// TestFullDiskExternalNATS: a daemon on an external NATS server whose
// store fills up notices it through its heartbeat writes: one log line,
// /healthz 503 and reactord_jetstream_writable 0. The server's streams
// keep refusing writes after the space came back, until the server
// restarts (the server's operator's move; here the test's): then the
// daemon is healthy again and events flow (issue 22, item 1).
func TestFullDiskExternalNATS(t *testing.T) {
	t.Parallel()
	fs := tmpfs(t, 64)
	srv, c := natstest.StartIn(t, filepath.Join(fs, "js"))
	ce := collect(t, c, "test.exec.")
	conf := copyExampleConfig(t)
	p := startDaemon(t, "-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--driver", "nats", "--exec-subject", "test.exec.")
	filler := fill(t, fs)
	checkFor(t, 45*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("/healthz %d with the server's disk full", code)
		}
		return nil
	})
	if got := metricValue(t, scrape(t, p), "reactord_jetstream_writable"); got != "0" {
		t.Errorf("reactord_jetstream_writable = %s", got)
	}
	if n := strings.Count(p.logs(), "JetStream refuses writes"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once:\n%s", n, lastLines(p.logs(), 10))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 45*time.Second, func() error {
		if code := healthCode(p, "/healthz"); code != http.StatusOK {
			return fmt.Errorf("/healthz %d after the server restarted", code)
		}
		return nil
	})
	run := fmt.Sprintf("x%d", time.Now().UnixNano())
	checkFor(t, 30*time.Second, func() error {
		for i := range 20 {
			id := fmt.Sprintf("%s-%d", run, i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored)
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	})
	checkFor(t, 30*time.Second, func() error {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		for i := range 20 {
			if id := fmt.Sprintf("%s-%d", run, i); ce.byMinion[id] == 0 {
				return fmt.Errorf("%s not reacted to", id)
			}
		}
		return nil
	})
	if !strings.Contains(p.logs(), "JetStream takes writes again") {
		t.Error("the recovery is not logged")
	}
}
