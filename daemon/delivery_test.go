package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestDeliveryDefaultFollowsTheServer: with --jetstream auto the daemon
// takes its events through JetStream whenever the server has it, the
// embedded one or one given by --nats URL; core NATS only on a server
// without JetStream, said once in the log with why and that events can be
// dropped. A value given wins either way.
func TestDeliveryDefaultFollowsTheServer(t *testing.T) {
	server := func(t *testing.T, jetStream bool) string {
		t.Helper()
		so := embedded.Options{Listen: "127.0.0.1:-1"}
		if jetStream {
			so.DataDir = t.TempDir()
		}
		srv, err := embedded.Start(so)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv.ClientURL()
	}
	for _, c := range []struct {
		name       string
		outside    bool // --nats URL, else the daemon's embedded server
		jetStream  bool // the outside server has JetStream
		given      string
		want       bool
		warnedCore bool
	}{
		{name: "embedded server", want: true},
		{name: "--nats URL, server with JetStream", outside: true, jetStream: true, want: true},
		{name: "--nats URL, server without JetStream", outside: true, want: false, warnedCore: true},
		{name: "--jetstream=false, server with JetStream", outside: true, jetStream: true, given: "false", want: false},
		{name: "--jetstream=false, embedded server", given: "false", want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions(t)
			o.SharedState = c.jetStream || !c.outside
			if c.outside {
				o.NATS.URL = server(t, c.jetStream)
			}
			if c.given != "" {
				if err := o.JetStream.Set(c.given); err != nil {
					t.Fatal(err)
				}
			}
			stderr := &syncbuf.Buffer{}
			o.Stderr = stderr
			d, stop := runDaemon(t, o)
			if d.JetStream() != c.want {
				t.Errorf("JetStream() = %v, want %v", d.JetStream(), c.want)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			logs := stderr.String()
			warned := strings.Count(logs, "NATS server has no JetStream: using core NATS")
			switch {
			case c.warnedCore && (warned != 1 || !strings.Contains(logs, "dropped") || !strings.Contains(logs, "not enabled")):
				t.Errorf("core NATS by default: want one warning saying why and that events can be dropped, got %d in:\n%s", warned, logs)
			case !c.warnedCore && warned != 0:
				t.Errorf("warned of core NATS though it was not the default:\n%s", logs)
			}
		})
	}
}

// TestJetStreamInsistedOnWithoutJetStream: --jetstream given on a server
// without JetStream refuses the start at once, in one line saying so and
// what to do, instead of waiting for ever to create the stream as if a
// cluster were forming.
func TestJetStreamInsistedOnWithoutJetStream(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1"}) // no DataDir: no JetStream
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	o := testOptions(t)
	o.NATS.URL = srv.ClientURL()
	o.SharedState = false
	if err := o.JetStream.Set("true"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		d, err := New(ctx, o)
		if err == nil {
			err = d.Run(ctx)
			if err == nil {
				err = errors.New("Run returned nil")
			}
			err = fmt.Errorf("started (want refused): %w", err)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("still starting after 20s, want refused at once; logs:\n%s", o.Stderr)
	}
	msg := err.Error()
	if !errors.Is(err, ErrConfig) || !errors.Is(err, natsbus.ErrNoJetStream) || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, "--jetstream") || !strings.Contains(msg, "not enabled") || !strings.Contains(msg, "--jetstream=false") {
		t.Fatalf("want one line refusing --jetstream (ErrConfig, ErrNoJetStream), got %q", msg)
	}
	t.Log(msg)
}
