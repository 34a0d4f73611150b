package bridge

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	waitLong = 30 * time.Second
	poll     = 10 * time.Millisecond
)

func blocks(evs []catEvent) []step {
	out := make([]step, 0, len(evs))
	for _, ev := range evs {
		out = append(out, sseBlock(ev))
	}
	return out
}

func fastConfig(url string, log *slog.Logger) Config {
	return Config{URL: url, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: log,
		Outbox: OutboxConfig{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
}

// TestEventsArriveOnce streams the events through a salt-api double that
// drops the connection in the middle of an event, and checks that every
// event reaches JetStream exactly once, that the cut-off event is counted
// and logged, and that the bridge reconnected.
func TestEventsArriveOnce(t *testing.T) {
	t.Run("testdata", func(t *testing.T) { testEventsArriveOnce(t, loadEvents(t, testdataFile)) })
	t.Run("catalogue", func(t *testing.T) { testEventsArriveOnce(t, catalogueEvents(t)) })
}

func testEventsArriveOnce(t *testing.T, evs []catEvent) {
	if len(evs) < 2 {
		t.Fatal("need at least two events")
	}
	env := startNATS(t)
	k := len(evs) / 2
	// Connection 1: the first half, then half of event k, then the server
	// drops the TCP connection. Connection 2: the rest, from event k on.
	conn1 := append(blocks(evs[:k]), partialBlock(evs[k]), step{drop: true})
	conn2 := blocks(evs[k:])
	const token = "5e55102dbeef"
	api := newFakeSaltAPI(t, false, token, "", "", conn1, conn2)
	log, sink := newLogger(t)
	pub := &jsPublisher{js: env.js, timeout: 5 * time.Second}
	cfg := fastConfig(api.srv.URL, log)
	cfg.Token = token
	b := runBridge(t, cfg, pub)
	st := b.Stats()

	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != int64(len(evs)) || st.Malformed.Load() != 1 {
			return errors.New(statsString(st))
		}
		return nil
	})
	if st.Dropped.Load() != 0 || st.Received.Load() != int64(len(evs))+1 || st.Reconnects.Load() < 1 {
		t.Errorf("stats: %s", statsString(st))
	}
	conns, logins, unauthorized, badRequests := api.counts()
	if conns != 2 || logins != 0 || unauthorized != 0 || badRequests != 0 {
		t.Errorf("salt-api saw conns=%d logins=%d 401s=%d 400s=%d", conns, logins, unauthorized, badRequests)
	}
	if got := sink.find(slog.LevelError, "ended inside an event", map[string]string{"tag": evs[k].Tag}); len(got) != 1 {
		t.Errorf("cut-off event %s logged %d times", evs[k].Tag, len(got))
	}
	if got := sink.find(slog.LevelWarn, "stream ended; reconnecting", nil); len(got) != 1 {
		t.Errorf("disconnection logged %d times", len(got))
	}
	checkStream(t, env, evs)
	if want := len(evs) - len(distinctEvents(t, evs)); pub.duplicates() != want {
		t.Errorf("JetStream reported %d duplicates, want %d", pub.duplicates(), want)
	}
}

// TestTwoBridgesOneEmission runs three bridges against three salt-api
// doubles into one stream: B serves the same emissions as A in another JSON
// layout (a second bridge on the same master), C serves them as a second
// master of a multi-master pair would, each stamped by that master. B's
// copies are duplicates; C's are distinct events (Salt's own reactor also
// runs once per master).
func TestTwoBridgesOneEmission(t *testing.T) {
	t.Run("testdata", func(t *testing.T) { testTwoBridges(t, loadEvents(t, testdataFile)) })
	t.Run("catalogue", func(t *testing.T) { testTwoBridges(t, catalogueEvents(t)) })
}

func testTwoBridges(t *testing.T, evs []catEvent) {
	env := startNATS(t)
	evsB := make([]catEvent, len(evs))
	evsC := make([]catEvent, len(evs))
	for i, ev := range evs {
		var d struct {
			Stamp string `json:"_stamp"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Stamp == "" {
			t.Fatalf("event %d: no _stamp (%v)", i, err)
		}
		evsB[i] = restamp(t, ev, d.Stamp)
		evsC[i] = restamp(t, ev, fmt.Sprintf("2026-11-22T02:%02d:%02d.%06d", i/60, i%60, 424242+i))
		if MsgID(evs[i].Tag, evs[i].Data) != MsgID(evsB[i].Tag, evsB[i].Data) {
			t.Errorf("event %d (%s): the same emission in another layout has another id", i, evs[i].Tag)
		}
		if MsgID(evs[i].Tag, evs[i].Data) == MsgID(evsC[i].Tag, evsC[i].Data) {
			t.Errorf("event %d (%s): the second master's emission has the same id", i, evs[i].Tag)
		}
	}
	var pubs []*jsPublisher
	var bridges []*Bridge
	for k, set := range [][]catEvent{evs, evsB, evsC} {
		token := fmt.Sprintf("tok%d", k)
		api := newFakeSaltAPI(t, false, token, "", "", blocks(set))
		// Each bridge has its own NATS connection, as on its own host.
		nc, err := nats.Connect(env.srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		pub := &jsPublisher{js: js, timeout: 5 * time.Second}
		log, _ := newLogger(t)
		cfg := fastConfig(api.srv.URL, log)
		cfg.Token = token
		pubs = append(pubs, pub)
		bridges = append(bridges, runBridge(t, cfg, pub))
	}
	checkFor(t, waitLong, poll, func() error {
		for k, b := range bridges {
			if b.Stats().Published.Load() != int64(len(evs)) {
				return fmt.Errorf("bridge %d: %s", k, statsString(b.Stats()))
			}
		}
		return nil
	})
	if n := env.msgCount(t); n != uint64(2*len(evs)) {
		t.Fatalf("stream holds %d messages, want %d (A's or B's, and C's)", n, 2*len(evs))
	}
	if dups := pubs[0].duplicates() + pubs[1].duplicates() + pubs[2].duplicates(); dups != len(evs) {
		t.Errorf("JetStream reported %d duplicates, want %d", dups, len(evs))
	}
	checkStream(t, env, append(append([]catEvent(nil), evs...), evsC...))
}

// TestPublishFailure shuts NATS down while the bridge reads: the event that
// arrives meanwhile is held in the outbox, the outage is logged once, the
// bridge goes on reading the same stream, and once NATS is back both held
// events are published, in order, and the outage's end is logged.
func TestPublishFailure(t *testing.T) {
	evs := loadEvents(t, testdataFile)
	env := startNATS(t)
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	script := []step{sseBlock(evs[0]), {wait: gate1}, sseBlock(evs[1]), {wait: gate2}, sseBlock(evs[2])}
	const token = "f00d"
	api := newFakeSaltAPI(t, false, token, "", "", script)
	log, sink := newLogger(t)
	cfg := fastConfig(api.srv.URL, log)
	cfg.Token = token
	b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: 2 * time.Second})
	st := b.Stats()

	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != 1 {
			return errors.New(statsString(st))
		}
		return nil
	})
	env.shutdown()
	close(gate1)
	close(gate2)
	checkFor(t, waitLong, poll, func() error {
		if st.Received.Load() != 3 || st.PublishErrors.Load() < 2 {
			return errors.New(statsString(st))
		}
		return nil
	})
	if b.Outbox().Healthy() {
		t.Error("outbox reports healthy while NATS is down")
	}
	if got := sink.find(slog.LevelWarn, "NATS does not take events; holding them in the spool and retrying", map[string]string{"tag": evs[1].Tag}); len(got) != 1 {
		t.Errorf("outage logged %d times, want once", len(got))
	}
	if mem, _, _ := b.Outbox().Pending(); mem != 1 {
		// evs[1] is in the publisher's hands, evs[2] waits in the spool.
		t.Errorf("%d events waiting in memory, want 1", mem)
	}

	env.restart()
	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != 3 {
			return errors.New(statsString(st))
		}
		return nil
	})
	if st.Dropped.Load() != 0 || st.Malformed.Load() != 0 || st.Reconnects.Load() != 0 {
		t.Errorf("stats: %s", statsString(st))
	}
	if got := sink.find(slog.LevelInfo, "NATS takes events again", nil); len(got) != 1 || got[0].attrs["outage"] == "" {
		t.Errorf("end of the outage logged %d times (%v), want once with its length", len(got), got)
	}
	if conns, _, _, _ := api.counts(); conns != 1 {
		t.Errorf("bridge opened %d connections; it should have kept reading the first", conns)
	}
	checkStream(t, env, evs[:3])
}

// TestReloginOn401 starts with a stale token, then has salt-api end the
// stream because the token expired: each 401 leads to a new POST /login and
// no event is lost.
func TestReloginOn401(t *testing.T) {
	evs := loadEvents(t, testdataFile)
	env := startNATS(t)
	conn1 := []step{sseBlock(evs[0]), {end: true, expire: true}}
	conn2 := blocks(evs[1:])
	api := newFakeSaltAPI(t, false, "", "saltdev", "s3cret", conn1, conn2)
	log, sink := newLogger(t)
	cfg := fastConfig(api.srv.URL, log)
	cfg.Token = "0badc0ffee" // not known to salt-api
	cfg.Username, cfg.Password, cfg.EAuth = "saltdev", "s3cret", "pam"
	b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: 5 * time.Second})
	st := b.Stats()

	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != int64(len(evs)) {
			return errors.New(statsString(st))
		}
		return nil
	})
	conns, logins, unauthorized, badRequests := api.counts()
	if conns != 2 || logins != 2 || unauthorized != 2 || badRequests != 0 {
		t.Errorf("salt-api saw conns=%d logins=%d 401s=%d 400s=%d; want 2, 2, 2, 0", conns, logins, unauthorized, badRequests)
	}
	if got := sink.find(slog.LevelWarn, "logging in again", nil); len(got) != 2 {
		t.Errorf("re-login logged %d times, want 2", len(got))
	}
	if got := sink.find(slog.LevelInfo, "logged in", map[string]string{"user": "saltdev", "eauth": "pam"}); len(got) != 2 {
		t.Errorf("login logged %d times, want 2", len(got))
	}
	for _, r := range sink.all() {
		for k, v := range r.attrs {
			if strings.Contains(v, "s3cret") {
				t.Errorf("password logged in %q attribute %s", r.msg, k)
			}
		}
	}
	if st.Dropped.Load() != 0 || st.Malformed.Load() != 0 {
		t.Errorf("stats: %s", statsString(st))
	}
	checkStream(t, env, evs)
}

// TestBadCredentials: a rejected login is logged and retried with backoff;
// nothing is received.
func TestBadCredentials(t *testing.T) {
	env := startNATS(t)
	api := newFakeSaltAPI(t, false, "", "saltdev", "s3cret")
	log, sink := newLogger(t)
	cfg := fastConfig(api.srv.URL, log)
	cfg.Username, cfg.Password = "saltdev", "wrong"
	b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: time.Second})
	checkFor(t, waitLong, poll, func() error {
		if n := len(sink.find(slog.LevelError, "cannot connect", nil)); n < 2 {
			return fmt.Errorf("%d failed attempts logged", n)
		}
		return nil
	})
	// Failed attempts are not reconnections.
	if b.Stats().Reconnects.Load() != 0 || b.Stats().Received.Load() != 0 {
		t.Errorf("stats: %s", statsString(b.Stats()))
	}
	if r := sink.find(slog.LevelError, "cannot connect", nil)[0]; !strings.Contains(r.attrs["error"], "rejected") {
		t.Errorf("error %q does not say the login was rejected", r.attrs["error"])
	}
}

// TestTLS logs in and reads over HTTPS with the server's certificate given
// as CAFile, and fails (logged) without it.
func TestTLS(t *testing.T) {
	evs := loadEvents(t, testdataFile)
	env := startNATS(t)
	api := newFakeSaltAPI(t, true, "", "saltdev", "s3cret", blocks(evs))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("untrusted", func(t *testing.T) {
		log, sink := newLogger(t)
		cfg := fastConfig(api.srv.URL, log)
		cfg.Username, cfg.Password, cfg.EAuth = "saltdev", "s3cret", "pam"
		b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: time.Second})
		checkFor(t, waitLong, poll, func() error {
			if len(sink.find(slog.LevelError, "cannot connect", nil)) == 0 {
				return errors.New("no connection error logged")
			}
			return nil
		})
		if r := sink.find(slog.LevelError, "cannot connect", nil)[0]; !strings.Contains(r.attrs["error"], "certificate") {
			t.Errorf("error %q does not mention the certificate", r.attrs["error"])
		}
		if b.Stats().Received.Load() != 0 {
			t.Errorf("stats: %s", statsString(b.Stats()))
		}
	})

	t.Run("CAFile", func(t *testing.T) {
		log, _ := newLogger(t)
		cfg := fastConfig(api.srv.URL, log)
		cfg.Username, cfg.Password, cfg.EAuth = "saltdev", "s3cret", "pam"
		cfg.CAFile = caFile
		b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: 5 * time.Second})
		checkFor(t, waitLong, poll, func() error {
			if b.Stats().Published.Load() != int64(len(evs)) {
				return errors.New(statsString(b.Stats()))
			}
			return nil
		})
		checkStream(t, env, evs)
	})
}

// TestMalformedEvents mixes broken events with good ones: each broken one is
// counted and logged, and the good ones around them are published, including
// one sent as CRLF lines with a comment and its JSON split over two data lines.
func TestMalformedEvents(t *testing.T) {
	evs := loadEvents(t, testdataFile)
	env := startNATS(t)
	line := string(evs[1].line)
	cut := strings.Index(line, `, "data": `)
	if cut < 0 {
		t.Fatal("testdata line 2 has no data key")
	}
	multi := ": keep-alive\r\ntag: " + evs[1].Tag + "\r\ndata: " + line[:cut+1] + "\r\ndata:" + line[cut+1:] + "\r\n\r\n"
	script := []step{
		sseBlock(evs[0]),
		{block: "tag: broken/json\ndata: {\"tag\": \"broken/json\", \"data\": {\n\n"},
		{block: "tag: not/object\ndata: [1, 2]\n\n"},
		{block: "tag: no/data\n\n"},
		{block: "tag: null/data\ndata: {\"tag\": \"null/data\", \"data\": null}\n\n"},
		{block: multi},
		sseBlock(evs[2]),
	}
	const token = "c0ffee"
	api := newFakeSaltAPI(t, false, token, "", "", script)
	log, sink := newLogger(t)
	cfg := fastConfig(api.srv.URL, log)
	cfg.Token = token
	b := runBridge(t, cfg, &jsPublisher{js: env.js, timeout: 5 * time.Second})
	st := b.Stats()
	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != 3 || st.Malformed.Load() != 4 {
			return errors.New(statsString(st))
		}
		return nil
	})
	if st.Received.Load() != 7 || st.Dropped.Load() != 0 || st.Reconnects.Load() != 0 {
		t.Errorf("stats: %s", statsString(st))
	}
	for _, tag := range []string{"broken/json", "not/object", "no/data", "null/data"} {
		if got := sink.find(slog.LevelError, "malformed", map[string]string{"tag": tag}); len(got) != 1 {
			t.Errorf("malformed event %s logged %d times", tag, len(got))
		}
	}
	checkStream(t, env, evs)
}

func TestNewRejectsBadConfig(t *testing.T) {
	pub := &jsPublisher{}
	for name, cfg := range map[string]Config{
		"no URL":         {Token: "x"},
		"bad scheme":     {URL: "ftp://salt:8000", Token: "x"},
		"no host":        {URL: "http://", Token: "x"},
		"userinfo":       {URL: "https://u:p@salt:8000", Token: "x"},
		"query":          {URL: "https://salt:8000/?token=x", Token: "x"},
		"no credentials": {URL: "https://salt:8000"},
		"no password":    {URL: "https://salt:8000", Username: "u"},
		"min > max":      {URL: "https://salt:8000", Token: "x", MinBackoff: time.Minute, MaxBackoff: time.Second},
		"negative":       {URL: "https://salt:8000", Token: "x", MinBackoff: -1},
		"missing CA":     {URL: "https://salt:8000", Token: "x", CAFile: filepath.Join(t.TempDir(), "none.pem")},
	} {
		if _, err := New(cfg, pub); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(Config{URL: "https://salt:8000", Token: "x"}, nil); err == nil {
		t.Error("New accepted a nil Publisher")
	}
	b, err := New(Config{URL: "https://salt.example.com:8000/api/", Username: "u", Password: "p"}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if b.eventsURL != "https://salt.example.com:8000/api/events" || b.loginURL != "https://salt.example.com:8000/api/login" {
		t.Errorf("URLs: %s, %s", b.eventsURL, b.loginURL)
	}
	if b.minDelay != DefaultMinBackoff || b.maxDelay != DefaultMaxBackoff || b.eauth != DefaultEAuth {
		t.Errorf("defaults: %v %v %q", b.minDelay, b.maxDelay, b.eauth)
	}
}

func TestRunTwice(t *testing.T) {
	api := newFakeSaltAPI(t, false, "ab", "", "")
	log, _ := newLogger(t)
	cfg := fastConfig(api.srv.URL, log)
	cfg.Token = "ab"
	b := runBridge(t, cfg, &jsPublisher{})
	checkFor(t, waitLong, poll, func() error {
		if conns, _, _, _ := api.counts(); conns != 1 {
			return errors.New("not connected yet")
		}
		return nil
	})
	if err := b.Run(context.Background()); err == nil {
		t.Error("a second concurrent Run was accepted")
	}
}

func TestBackoff(t *testing.T) {
	b, err := New(Config{URL: "http://salt:8000", Token: "x", MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}, &jsPublisher{})
	if err != nil {
		t.Fatal(err)
	}
	for failures, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			if d := b.backoff(failures); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", failures, d, want/2, want)
			}
		}
	}
	b.serverRetry = 400 * time.Millisecond
	if d := b.backoff(0); d != 400*time.Millisecond {
		t.Errorf("backoff ignores salt-api's retry: %v", d)
	}
	b.serverRetry = time.Hour
	if d := b.backoff(0); d != time.Second {
		t.Errorf("salt-api's retry exceeds MaxBackoff: %v", d)
	}
}
