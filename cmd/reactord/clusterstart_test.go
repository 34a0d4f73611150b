package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// TestPartitionsWaitForTheCluster: a replica with --partitions started on
// a fresh three-node cluster before it could elect (one node up, no
// JetStream quorum) neither exits nor says ready: it logs once that
// JetStream cannot create the stream yet and why, waits, and once the
// other two nodes are up and have elected, logs that it was created,
// says ready and takes every event. (It exited before: "creating
// key-value bucket REACTORD_PARTITIONS: context deadline exceeded".)
func TestPartitionsWaitForTheCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a NATS cluster of three processes")
	}
	cl := launchCluster(t, 1)
	node1 := strings.TrimPrefix(cl.urls[0], "nats://")
	checkFor(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", node1)
		if err == nil {
			c.Close()
		}
		return err
	})
	conf := copyExampleConfig(t)
	p := launchDaemon(t, "-c", conf, "--nats", strings.Join(cl.urls, ","), "--jetstream", "--stream-replicas", "3", "--partitions", "2",
		"--shared-state=false", "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
	checkFor(t, 30*time.Second, func() error {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("the replica exited while the cluster could not elect: %v", err)
		default:
		}
		if !strings.Contains(p.logs(), "JetStream cannot create") {
			return errors.New("no line saying it waits for JetStream")
		}
		return nil
	})
	if strings.Contains(p.logs(), "reactord ready") {
		t.Fatalf("said ready before JetStream could hold its stream:\n%s", p.logs())
	}
	if n := strings.Count(p.logs(), "JetStream cannot create"); n != 1 {
		t.Fatalf("%d lines saying it waits, want 1:\n%s", n, p.logs())
	}
	cl.restart(t, 1)
	cl.restart(t, 2)
	// 120s: three nodes electing on a loaded two-core machine.
	checkFor(t, 120*time.Second, func() error {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("the replica exited: %v", err)
		default:
		}
		if !strings.Contains(p.logs(), "reactord ready") {
			return errors.New("not ready yet")
		}
		return nil
	})
	if !strings.Contains(p.logs(), "after waiting") {
		t.Fatalf("no line saying the wait ended:\n%s", p.logs())
	}
	waitHealthy(t, p)
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: strings.Join(cl.urls, ","), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ce := collect(t, c, "test.exec.")
	fireStarts(t, c, "late", false)
	expectEveryReaction(t, strings.Join(cl.urls, ","), ce)
	for _, l := range strings.Split(p.logs(), "\n") {
		if strings.Contains(l, "JetStream cannot create") || strings.Contains(l, "after waiting") {
			t.Log(l)
		}
	}
}

// TestStopWhileWaitingForTheCluster: the stop signal (SIGTERM) while a
// replica waits for a cluster that cannot elect yet is a clean stop: exit
// 0, one line saying what it was waiting for, no error.
func TestStopWhileWaitingForTheCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a NATS cluster node")
	}
	cl := launchCluster(t, 1)
	node1 := strings.TrimPrefix(cl.urls[0], "nats://")
	checkFor(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", node1)
		if err == nil {
			c.Close()
		}
		return err
	})
	conf := copyExampleConfig(t)
	p := launchDaemon(t, "-c", conf, "--nats", strings.Join(cl.urls, ","), "--jetstream", "--stream-replicas", "3",
		"--shared-state=false", "--driver", "nats", "--exec-subject", "test.exec.", "--store", "none")
	checkFor(t, 30*time.Second, func() error {
		if !strings.Contains(p.logs(), "JetStream cannot create") {
			return errors.New("no line saying it waits for JetStream")
		}
		return nil
	})
	p.stop()
	var err error
	select {
	case err = <-p.done:
		p.done <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after the stop signal:\n%s", p.logs())
	}
	logs := p.logs()
	if err != nil || strings.Count(logs, "stopped while waiting for JetStream") != 1 || strings.Contains(logs, "reactord: ") {
		t.Fatalf("exit %v, want 0 with one line saying it stopped while waiting, and no error:\n%s", err, logs)
	}
}

// TestSystemdUnitWaitsForTheCluster: the example unit, Type=notify (ready
// once the consumers are subscribed, which waits for JetStream), has no
// start timeout: with systemd's default 90 s, a cluster slower to form
// would have the daemon killed and restarted in a loop.
func TestSystemdUnitWaitsForTheCluster(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../examples/systemd/reactord.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := "\n" + string(b)
	if !strings.Contains(unit, "\nType=notify\n") || !strings.Contains(unit, "\nTimeoutStartSec=infinity\n") {
		t.Fatal("examples/systemd/reactord.service: want Type=notify with TimeoutStartSec=infinity")
	}
}
