package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reactord/reactord/natsbus"
)

// embeddedClient connects to the embedded server of the daemon with data
// directory data, listening on listen, with its token; the connection
// reconnects by itself when the daemon (and its server) restarts.
func embeddedClient(t *testing.T, data, listen string) *natsbus.Conn {
	t.Helper()
	token, err := os.ReadFile(natsbus.TokenFile(data))
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: "nats://" + listen, Name: "test", Token: strings.TrimSpace(string(token))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestSIGKILLOnDefaultsRecoversPromptly: the daemon on its defaults (the
// embedded server, JetStream, the store, the loop guard) with the exec
// driver, its stand-in salt taking 50ms a job, is SIGKILLed in the middle
// of a burst and started again on the same data directory: every event is
// reacted to, and the events the killed run had in hand come back within
// the ack wait (10s), not the 30s of before (issue 22, item 6).
func TestSIGKILLOnDefaultsRecoversPromptly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts a daemon")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	calls := filepath.Join(dir, "calls")
	salt := filepath.Join(dir, "salt")
	standIn(t, salt, fmt.Sprintf(`# Stand-in for salt --async: argv is --async [-L] -- TGT FUN ARGS...
for a; do [ "$a" = -- ] && break; shift; done
shift
sleep 0.05
echo "$1" | tr , '\n' >> %q
echo "Executed command with job ID: $(date +%%Y%%m%%d%%H%%M%%S%%N | cut -c1-20)"
`, calls))
	conf := copyExampleConfig(t)
	listen := freeAddr(t)
	args := []string{"-c", conf, "--listen", listen, "--data-dir", data, "--driver", "exec", "--salt-bin", salt}
	victim := startProcess(t, args...)
	c := embeddedClient(t, data, listen)
	const n = 300
	for i := range n {
		id := fmt.Sprintf("k%d", i)
		if err := c.Publish(context.Background(), natsbus.Msg{Tag: "salt/minion/" + id + "/start", Body: startEvent(id), Meta: natsbus.Meta{MsgID: id}}, natsbus.Stored); err != nil {
			t.Fatal(err)
		}
	}
	reacted := func() map[string]bool {
		b, _ := os.ReadFile(calls)
		seen := map[string]bool{}
		for _, l := range strings.Fields(string(b)) {
			seen[l] = true
		}
		return seen
	}
	checkFor(t, 30*time.Second, func() error {
		if got := len(reacted()); got < n/6 {
			return fmt.Errorf("%d reactions so far", got)
		}
		return nil
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	killedAt := len(reacted())
	startDaemon(t, args...)
	restarted := time.Now()
	checkFor(t, 60*time.Second, func() error {
		if got := len(reacted()); got < n {
			return fmt.Errorf("%d of %d events reacted to", got, n)
		}
		return nil
	})
	took := time.Since(restarted)
	if took > 25*time.Second {
		t.Errorf("the killed run's events came back %s after the restart; want within the 10s ack wait and a little", took.Round(time.Second))
	}
	t.Logf("killed after %d of %d events; all reacted to %s after the restart", killedAt, n, took.Round(100*time.Millisecond))
}
