package salt_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/event"
)

// TestBridgeMissesNothingAcrossRestarts restarts a real master three times
// while a pusher fires a numbered event every 5 ms into its bus
// (master_event_pull.ipc, as fire_event does). A reference subscriber on
// master_event_pub.ipc, reconnecting every 10 ms, defines what the master
// published; every event it saw must reach NATS through the native bridge.
func TestBridgeMissesNothingAcrossRestarts(t *testing.T) {
	e := startSalt(t)
	r := startReactord(t, e, "dryrun")

	var mu sync.Mutex
	ref := map[int]bool{}
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
				time.Sleep(10 * time.Millisecond)
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
						ref[i] = true
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
	time.Sleep(3 * time.Second)
	for range 3 {
		e.restartMaster()
		e.waitFor(60*time.Second, "the master's event socket", func() error {
			c, err := net.Dial("unix", filepath.Join(e.sockDir, "master_event_pull.ipc"))
			if err == nil {
				c.Close()
			}
			return err
		})
		time.Sleep(4 * time.Second)
	}
	close(stop)
	wg.Wait()
	time.Sleep(3 * time.Second) // the bridge's spool drains

	got := map[int]bool{}
	for _, ev := range r.seen(func(event.Event) bool { return true }) {
		if n, ok := strings.CutPrefix(ev.Tag, "myco/seq/"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				got[i] = true
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var missed []int
	for i := range ref {
		if !got[i] {
			missed = append(missed, i)
		}
	}
	t.Logf("3 master restarts: the reference subscriber saw %d numbered events, the bridge published %d; missed %d %v", len(ref), len(got), len(missed), missed)
	if len(ref) < 1000 {
		t.Errorf("only %d events seen by the reference: the pusher did not run", len(ref))
	}
	if len(missed) > 0 {
		t.Errorf("the bridge missed %d events the master published", len(missed))
	}
}
