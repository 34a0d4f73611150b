package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/syncbuf"
)

const exampleConf = "../reactor.conf.example"

// testOptions are a daemon's defaults on an embedded server of its own.
func testOptions(t *testing.T) Options {
	t.Helper()
	o := Defaults()
	o.Config, o.Listen, o.DataDir, o.DryRun = exampleConf, "127.0.0.1:-1", t.TempDir(), true
	o.Stderr = &syncbuf.Buffer{}
	return o
}

// TestRunReactsAndStops: a daemon built by New on its defaults (embedded
// server, JetStream, store, shared state) reacts to an event, and Run
// returns nil once its context ends, having stopped every part.
func TestRunReactsAndStops(t *testing.T) {
	o := testOptions(t)
	out := &syncbuf.Buffer{}
	o.Stdout = out
	d, stop := runDaemon(t, o)
	if err := d.Health(); err != nil {
		t.Fatalf("health after start: %v", err)
	}
	publish(t, d, "salt/minion/web1/start", `{"id": "web1"}`)
	waitFor(t, out, `"tgt":"web1"`)
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if err := d.Health(); err == nil {
		t.Error("healthy after Stop")
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// TestPartialStartTearsDown: a part that cannot start (--http on an
// address in use) fails New with a configuration error naming it, and the
// parts already started are taken down (the embedded server's address is
// free again).
func TestPartialStartTearsDown(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()
	o := testOptions(t)
	o.Listen, o.HTTP = listen, busy.Addr().String()
	_, err = New(context.Background(), o)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("New: %v, want a configuration error naming --http", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("the embedded server still holds %s after the failed start: %v", listen, err)
	}
	ln.Close()
}

// TestSettingsRefused: settings that contradict each other are refused
// before anything starts.
func TestSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		set  func(o *Options)
		want string
	}{
		{func(o *Options) { o.Driver = "exec" }, "--dry-run executes nothing"},
		{func(o *Options) { o.DryRun, o.Partitions, o.JetStream = false, 2, AutoBool{Given: true} }, "--partitions needs --jetstream"},
		{func(o *Options) { o.LogLevel = "loud" }, "--log-level"},
		{func(o *Options) { o.Config = "" }, "need -c CONF"},
	} {
		o := testOptions(t)
		c.set(&o)
		_, err := New(context.Background(), o)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want a configuration error with %q", err, c.want)
		}
	}
}

// TestNotifiesSystemd: under systemd's Type=notify ($NOTIFY_SOCKET) the
// daemon says READY=1 once it takes events, and STOPPING=1 when it stops.
func TestNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	d, err := New(context.Background(), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	read := func() string {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	if got := read(); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	select {
	case <-d.Ready():
	default:
		t.Fatal("READY=1 came before the daemon was ready")
	}
	cancel()
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("notification at stop %q, want STOPPING=1", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLogFormatJSON: --log-format json writes one JSON object a line, at
// the level asked for.
func TestLogFormatJSON(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, "warning", "json", false)
	log.Info("not shown")
	log.Warn("shown", "minion", "web1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["msg"] != "shown" || line["minion"] != "web1" || line["level"] != "WARN" {
		t.Fatalf("line %v", line)
	}
}
