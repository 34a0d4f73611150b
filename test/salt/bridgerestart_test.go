package salt_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// TestBridgeMissesNothingAcrossRestarts restarts a real master three times
// while a pusher fires a numbered event every 5 ms into its bus
// (master_event_pull.ipc, as fire_event does). A reference subscriber on
// master_event_pub.ipc, reconnecting every 10 ms, defines what the master
// published; every event it saw must reach NATS through the native bridge.
func TestBridgeMissesNothingAcrossRestarts(t *testing.T) {
	t.Parallel()
	e := startSalt(t)
	r := startReactord(t, e, "dryrun")

	var mu sync.Mutex
	ref := map[int]time.Time{} // when the reference saw each event
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the reference subscriber
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pub.ipc"))
			if err != nil {
				select { // the master is down: try again in 10 ms
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			go func() { <-stop; c.Close() }()
			d := msgpack.NewDecoder(bufio.NewReader(c))
			for {
				var frame map[string]any
				if err := d.Decode(&frame); err != nil {
					break
				}
				body, _ := frame["body"].([]byte)
				tag, _, _ := bytes.Cut(body, []byte("\n\n"))
				if n, ok := strings.CutPrefix(string(tag), "myco/seq/"); ok {
					if i, err := strconv.Atoi(n); err == nil {
						mu.Lock()
						ref[i] = time.Now()
						mu.Unlock()
					}
				}
			}
			c.Close()
		}
	}()
	go func() { // the pusher
		defer wg.Done()
		var c net.Conn
		for i := 0; ; i++ {
			select {
			case <-stop:
				if c != nil {
					c.Close()
				}
				return
			case <-time.After(5 * time.Millisecond):
			}
			if c == nil {
				var err error
				if c, err = net.Dial("unix", filepath.Join(e.sockDir, "master_event_pull.ipc")); err != nil {
					c = nil
					continue
				}
			}
			tag := fmt.Sprintf("myco/seq/%d", i)
			data, _ := msgpack.Marshal(map[string]any{"n": i, "_stamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000")})
			if _, err := c.Write(bridge.SaltFrame(tag, data)); err != nil {
				c.Close()
				c = nil
			}
		}
	}()
	// seenMore waits until the reference subscriber saw n more numbered
	// events (2.5 s of the pusher's traffic for 500): each restart comes
	// after traffic that the master really published.
	seenMore := func(n int, what string) {
		mu.Lock()
		from := len(ref)
		mu.Unlock()
		e.waitFor(60*time.Second, what, func() error {
			mu.Lock()
			defer mu.Unlock()
			if got := len(ref) - from; got < n {
				return fmt.Errorf("the reference saw %d of %d", got, n)
			}
			return nil
		})
	}
	seenMore(500, "traffic before the first restart")
	var restarts []string
	for range 3 {
		restarts = append(restarts, time.Now().UTC().Format("15:04:05.000"))
		e.restartMaster()
		e.waitFor(60*time.Second, "the master's event socket", func() error {
			c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pull.ipc"))
			if err == nil {
				c.Close()
			}
			return err
		})
		seenMore(500, "traffic after the restart")
	}
	close(stop)
	wg.Wait()

	var got map[int]bool
	var missed []int
	check := func() error {
		got = map[int]bool{}
		for _, ev := range r.seen(func(event.Event) bool { return true }) {
			if n, ok := strings.CutPrefix(ev.Tag, "myco/seq/"); ok {
				if i, err := strconv.Atoi(n); err == nil {
					got[i] = true
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		missed = missed[:0]
		for i := range ref {
			if !got[i] {
				missed = append(missed, i)
			}
		}
		if len(missed) > 0 {
			return fmt.Errorf("%d events not through the bridge yet", len(missed))
		}
		return nil
	}
	// The bridge's spool drains; what is still missing after 30 s is lost.
	_ = wait.PollEvery(30*time.Second, 200*time.Millisecond, check)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("3 master restarts: the reference subscriber saw %d numbered events, the bridge published %d; missed %d %v", len(ref), len(got), len(missed), missed)
	if len(ref) < 1000 {
		t.Errorf("only %d events seen by the reference: the pusher did not run", len(ref))
	}
	if len(missed) > 0 {
		// When each was seen, against the restarts (a stopping master's
		// last events, or a starting one's first) and the bridge's log.
		for _, i := range missed {
			t.Logf("missed %d: the reference saw it at %s (restarts began at %v)", i, ref[i].UTC().Format("15:04:05.000000"), restarts)
		}
		t.Errorf("the bridge missed %d events the master published", len(missed))
	}
}

// busProxy stands between the bridge and the master's event socket, so a
// test can cut the bridge off while the master runs on.
type busProxy struct {
	t      *testing.T
	dir    string // the sock_dir the bridge reads
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startBusProxy(t *testing.T, sockDir string) *busProxy {
	dir, err := os.MkdirTemp("", "rsp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &busProxy{t: t, dir: dir, target: filepath.Join(sockDir, "master_event_pub.ipc")}
	p.open()
	t.Cleanup(p.cut)
	return p
}

// open listens for the bridge and forwards the master's bus to it.
func (p *busProxy) open() {
	ln, err := net.Listen("unix", filepath.Join(p.dir, "master_event_pub.ipc"))
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the socket and every connection: the bridge is blind.
func (p *busProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestBridgeRecoversReturnsFromJobCache cuts the native bridge off a real
// master's bus while jobs run: the returns the master stored meanwhile
// reach NATS once each from its job cache, marked recovered, and a
// return the bridge read live is not published twice.
func TestBridgeRecoversReturnsFromJobCache(t *testing.T) {
	t.Parallel()
	e := startSalt(t)
	proxy := startBusProxy(t, e.sockDir)
	e.bridgeSockDir = proxy.dir
	r := startReactord(t, e, "dryrun")
	e.startMinions()
	waitFor(t, 120*time.Second, "minion keys", func() error {
		o, err := e.salt("salt-key", "-l", "pre", "--out", "json")
		if err != nil || strings.Count(o, "web") < 2 {
			return fmt.Errorf("pending: %s %v", o, err)
		}
		return nil
	})
	if o, err := e.salt("salt-key", "-A", "-y"); err != nil {
		t.Fatalf("salt-key -A: %v %s", err, o)
	}
	returns := func(jid string) []event.Event {
		return r.seen(func(ev event.Event) bool { return strings.HasPrefix(ev.Tag, "salt/job/"+jid+"/ret/") })
	}
	waitFor(t, 120*time.Second, "the minions to answer", func() error {
		out, err := e.salt("salt", "--out", "json", "--static", "*", "test.ping")
		if err != nil || strings.Count(out, "true") < 2 {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	live, err := e.salt("salt", "--async", "*", "test.ping")
	liveJID := jidOf(t, live, err)
	waitFor(t, 60*time.Second, "the live returns", func() error {
		if n := len(returns(liveJID)); n != 2 {
			return fmt.Errorf("%d returns", n)
		}
		return nil
	})

	proxy.cut()
	var jids []string
	for range 3 {
		out, err := e.salt("salt", "--async", "*", "test.arg", "a", "k=v")
		jids = append(jids, jidOf(t, out, err))
	}
	e.waitFor(60*time.Second, "the returns in the job cache", func() error {
		for _, jid := range jids {
			out, err := e.salt("salt-run", "--out", "json", "jobs.lookup_jid", jid)
			if err != nil || !strings.Contains(out, "web1") || !strings.Contains(out, "web2") {
				return fmt.Errorf("%s: %v %s", jid, err, out)
			}
		}
		return nil
	})
	proxy.open()
	waitFor(t, 60*time.Second, "the recovered returns", func() error {
		for _, jid := range jids {
			if n := len(returns(jid)); n != 2 {
				return fmt.Errorf("job %s: %d returns", jid, n)
			}
		}
		return nil
	})
	holds(t, 2*time.Second, "no return published twice", func() error {
		for _, jid := range jids {
			if n := len(returns(jid)); n != 2 {
				return fmt.Errorf("job %s: %d returns, want 2", jid, n)
			}
		}
		return nil
	})
	for _, jid := range jids {
		evs := returns(jid)
		for _, ev := range evs {
			d := ev.Data
			if d["_recovered"] != "job_cache" || d["fun"] != "test.arg" || d["success"] != true || d["cmd"] != "_return" {
				t.Errorf("%s: %s", ev.Tag, ev.Data)
			}
		}
	}
	if n := len(returns(liveJID)); n != 2 {
		t.Errorf("the live job's returns reached NATS %d times, want 2", n)
	}
	if !strings.Contains(r.log(), "recovered job returns fired while disconnected") {
		t.Errorf("no recovery logged:\n%s", r.log())
	}
}

// jidOf reads the job id `salt --async` printed ("Executed command with
// job ID: JID"): the one word after it, whatever follows.
func jidOf(t *testing.T, out string, err error) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "job ID: ")
	jid, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
	jid = strings.TrimSpace(jid)
	if err != nil || !ok || jid == "" || strings.ContainsAny(jid, " \t") {
		t.Fatalf("salt --async: %v: %q", err, out)
	}
	return jid
}
