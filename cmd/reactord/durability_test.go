package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/internal/tcpproxy"
	"github.com/reactord/reactord/internal/testfiles"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/store/sqlstore"
)

// These tests hold docs/guarantees.md to real processes: the daemon
// killed with SIGKILL mid-burst, the audit database cut off and back, a
// stop while it is down.

// archivedMinions counts the distinct minions whose start event of this run
// (minion ids prefixed with run) the store holds.
func archivedMinions(t *testing.T, url, run string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.Events(ctx, time.Time{}, "salt/minion/"+run+"-*/start", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		seen[e.Tag] = true
	}
	return len(seen)
}

// gauge reads one unlabelled metric from a daemon's /metrics.
func gauge(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	v, _ := strconv.ParseFloat(metricValue(t, scrape(t, p), name), 64)
	return v
}

func publishStarts(t *testing.T, c *natsbus.Conn, run string, from, to int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s-m%d", run, i)
		if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJetStreamSIGKILLKeepsTheArchive: in JetStream mode an event is
// acknowledged only once its archive records are durable, so a daemon
// killed with SIGKILL in the middle of a burst leaves no event unarchived:
// its successor gets the unacknowledged ones again.
func TestJetStreamSIGKILLKeepsTheArchive(t *testing.T) {
	t.Parallel()
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	url := "sqlite://" + filepath.Join(t.TempDir(), "audit.db")
	dataDir := t.TempDir()
	// Small lanes keep what is in flight well inside --ack-wait even in a
	// -race build on a busy machine, so redeliveries come from the kill only.
	args := []string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--ack-wait", "5s", "--queue", "64", "--driver", "null", "--store", url, "--data-dir", dataDir}
	victim := startProcess(t, args...)
	run := fmt.Sprintf("k%d", time.Now().UnixNano())
	n := 6000
	if raceEnabled {
		n = 2000
	}
	go func() {
		ctx := context.Background()
		for i := range n {
			id := fmt.Sprintf("%s-m%d", run, i)
			if err := c.Publish(ctx, natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	checkFor(t, 30*time.Second, func() error {
		if v := gauge(t, victim, "reactord_events_total"); v < float64(n/3) {
			return fmt.Errorf("%v events handled so far", v)
		}
		return nil
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	atKill := archivedMinions(t, url, run)
	successor := startDaemon(t, args...)
	checkFor(t, 90*time.Second, func() error {
		if got := archivedMinions(t, url, run); got < n {
			return fmt.Errorf("%d of %d events archived", got, n)
		}
		return nil
	})
	t.Logf("archived at the kill: %d of %d; after the successor: %d", atKill, n, archivedMinions(t, url, run))
	if atKill >= n {
		t.Log("the kill came after every event was archived: the burst was too short to test anything")
	}
	successor.terminate()
	<-successor.done
}

func healthCode(p *proc, path string) int {
	resp, err := http.Get("http://" + p.http + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestStoreOutageJetStream: with MariaDB or PostgreSQL cut off mid-stream
// (through a TCP proxy, never stopping the machine's server), the
// JetStream daemon goes on reacting (the records go to the disk spool,
// events are acknowledged), logs the outage once, and writes everything
// once the database is back; a stop while it is down keeps the records on
// disk and the next start writes them. A daemon started while the
// database is down reacts too. Nothing acknowledged is lost.
func TestStoreOutageJetStream(t *testing.T) {
	t.Parallel()
	for _, db := range []struct{ name, env, example string }{
		{"mariadb", "REACTORD_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"},
		{"postgres", "REACTORD_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
	} {
		t.Run(db.name, func(t *testing.T) {
			base := os.Getenv(db.env)
			if base == "" {
				t.Skipf("%s not set (e.g. %s): no database to cut off", db.env, db.example)
			}
			storeOutage(t, base)
		})
	}
}

func storeOutage(t *testing.T, base string) {
	hostStart := strings.Index(base, "@") + 1
	hostEnd := hostStart + strings.Index(base[hostStart:], "/")
	proxy := tcpproxy.Start(t, base[hostStart:hostEnd])
	url := base[:hostStart] + proxy.Addr() + base[hostEnd:]

	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	ce := collect(t, c, "test.exec.")
	dataDir := t.TempDir()
	args := []string{"-c", conf, "--nats", srv.ClientURL(), "--jetstream", "--driver", "nats", "--exec-subject", "test.exec.",
		"--store", url, "--data-dir", dataDir, "--drain-timeout", "2s"}
	p := startDaemon(t, args...)
	run := fmt.Sprintf("o%d", time.Now().UnixNano())
	reacted := func(want int) func() error {
		return func() error {
			if _, distinct, _, _ := ce.snapshot(); distinct < want {
				return fmt.Errorf("%d of %d events reacted to", distinct, want)
			}
			return nil
		}
	}
	publishStarts(t, c, run, 0, 100)
	checkFor(t, 20*time.Second, reacted(100))

	// The database goes away: reactions go on, records are spooled.
	proxy.Refuse(true) // while cut, new connections are closed at once
	proxy.Cut()
	publishStarts(t, c, run, 100, 600)
	checkFor(t, 20*time.Second, reacted(600))
	checkFor(t, 20*time.Second, func() error {
		if v := gauge(t, p, "reactord_store_spooled_records"); v <= 0 {
			return fmt.Errorf("spooled records = %v", v)
		}
		if code := healthCode(p, "/healthz/store"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("/healthz/store = %d during the outage", code)
		}
		return nil
	})
	if code := healthCode(p, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d during a store outage; reactions go on, so it stays 200", code)
	}
	checkFor(t, 20*time.Second, func() error { // a few retries
		if v := gauge(t, p, "reactord_store_write_failures_total"); v < 3 {
			return fmt.Errorf("%v failed writes", v)
		}
		return nil
	})
	proxy.Refuse(false)
	checkFor(t, 30*time.Second, func() error {
		if got := archivedMinions(t, url, run); got < 600 {
			return fmt.Errorf("%d of 600 archived after the database came back", got)
		}
		return nil
	})
	// The writer logs the end of the outage after the write that ended it:
	// the records can be read a moment before the line is there.
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logs(), "audit store writes resumed") {
			return fmt.Errorf("the end of the outage was not logged")
		}
		return nil
	})
	if n := strings.Count(p.logs(), "audit store write failed"); n != 1 {
		t.Errorf("%d 'write failed' lines for one outage, want 1", n)
	}

	// A stop while the database is down keeps the records on disk.
	proxy.Refuse(true) // while cut, new connections are closed at once
	proxy.Cut()
	publishStarts(t, c, run, 600, 700)
	checkFor(t, 20*time.Second, reacted(700))
	p.terminate()
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exit with the records spooled: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop")
	}
	if !strings.Contains(p.logs(), "records kept on disk") {
		t.Errorf("the stop did not say the records were kept:\n%s", lastLines(p.logs(), 10))
	}

	// The next start, the database still down: it starts and reacts.
	p2 := startDaemon(t, args...)
	publishStarts(t, c, run, 700, 750)
	checkFor(t, 20*time.Second, reacted(750))
	if !strings.Contains(p2.logs(), "audit store unreachable at start") {
		t.Errorf("start with the database down not reported:\n%s", lastLines(p2.logs(), 10))
	}
	proxy.Refuse(false)
	checkFor(t, 30*time.Second, func() error {
		if got := archivedMinions(t, url, run); got < 750 {
			return fmt.Errorf("%d of 750 archived after the restart", got)
		}
		return nil
	})
	p2.terminate()
	<-p2.done
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestDaemonStoreFromFile: the daemon reads its store URL from --store-file
// (and $REACTORD_STORE), keeping a password out of ps.
func TestDaemonStoreFromFile(t *testing.T) {
	srv, c := natsServer(t)
	conf := copyExampleConfig(t)
	for _, how := range []string{"file", "env"} {
		t.Run(how, func(t *testing.T) {
			url := "sqlite://" + filepath.Join(t.TempDir(), "audit.db")
			args := []string{"-c", conf, "--nats", srv.ClientURL(), "--driver", "null"}
			if how == "file" {
				args = append(args, "--store-file", testfiles.Secret(t, url+"\n", 0o600))
			} else {
				t.Setenv(daemon.EnvName("store"), url)
			}
			p := startDaemon(t, args...)
			run := "f" + how
			if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/" + run + "-m0/start", Body: startEvent(run + "-m0")}, natsbus.Core); err != nil {
				t.Fatal(err)
			}
			checkFor(t, 20*time.Second, func() error {
				if got := archivedMinions(t, url, run); got != 1 {
					return fmt.Errorf("%d archived in the store named by the %s", got, how)
				}
				return nil
			})
			p.terminate()
			<-p.done
		})
	}
}
