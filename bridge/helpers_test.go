package bridge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/natsbus"
)

// catalogueFile is the event catalogue (one event of each shape Salt
// emits), relative to the package directory; testdataFile keeps three of
// its lines.
const (
	catalogueFile = "../engine/samples/catalogue.jsonl"
	testdataFile  = "testdata/events.jsonl"
)

// catEvent is one line of an events file.
type catEvent struct {
	Tag  string          `json:"tag"`
	Data json.RawMessage `json:"data"`
	line []byte          // the line as written (Python json.dumps style)
}

func loadEvents(t *testing.T, path string) []catEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []catEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev catEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ev.line = append([]byte(nil), line...)
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no events", path)
	}
	return out
}

// catalogueEvents loads every line of the shared catalogue, or skips.
func catalogueEvents(t *testing.T) []catEvent {
	t.Helper()
	if _, err := os.Stat(catalogueFile); err != nil {
		abs, _ := filepath.Abs(catalogueFile)
		t.Skipf("event catalogue %s not found (%v); the testdata copy still covers the bridge", abs, err)
	}
	return loadEvents(t, catalogueFile)
}

// eventKey identifies an event the way the stream should: tag plus data
// with "_stamp" (one emission), compared semantically (written independently
// of MsgID).
func eventKey(t *testing.T, tag string, data []byte) string {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("event %s: %v", tag, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return tag + "\x00" + string(b)
}

func distinctEvents(t *testing.T, evs []catEvent) map[string]catEvent {
	t.Helper()
	out := map[string]catEvent{}
	for _, ev := range evs {
		out[eventKey(t, ev.Tag, ev.Data)] = ev
	}
	return out
}

// restamp returns ev as another master would send it: another "_stamp" and
// another JSON layout (Go's sorted keys, no spaces, \u-escaped HTML chars).
func restamp(t *testing.T, ev catEvent, stamp string) catEvent {
	t.Helper()
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(ev.Data))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		t.Fatal(err)
	}
	data["_stamp"] = stamp
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(map[string]any{"data": json.RawMessage(raw), "tag": ev.Tag})
	if err != nil {
		t.Fatal(err)
	}
	return catEvent{Tag: ev.Tag, Data: raw, line: line}
}

// checkFor polls f until it returns nil, failing the test with f's last
// error once total has passed.
func checkFor(t *testing.T, total, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", total, err)
		}
		<-tick.C
	}
}

// ---------------------------------------------------------------------------
// A salt-api double: /login and /events as rest_cherrypy serves them.
// ---------------------------------------------------------------------------

// step is one action of the /events handler on one connection.
type step struct {
	block  string          // bytes to write, then flush
	wait   <-chan struct{} // block until closed
	drop   bool            // hijack the connection and close it mid-stream
	end    bool            // return: a clean end of the stream
	expire bool            // with end: the token expires first (salt-api then closes the stream)
}

// sseBlock formats an event exactly as rest_cherrypy's Events.GET does.
func sseBlock(ev catEvent) step {
	return step{block: "tag: " + ev.Tag + "\ndata: " + string(ev.line) + "\n\n"}
}

// partialBlock is the start of an event: the tag line and half the data line.
func partialBlock(ev catEvent) step {
	return step{block: "tag: " + ev.Tag + "\ndata: " + string(ev.line[:len(ev.line)/2])}
}

type fakeSaltAPI struct {
	srv                   *httptest.Server
	user, password, eauth string
	quit                  chan struct{}

	mu           sync.Mutex
	tokens       map[string]bool
	scripts      [][]step // one per authorised /events connection, in order
	conns        int
	logins       int
	unauthorized int
	badRequests  int
}

// newFakeSaltAPI starts a salt-api double. token, if not empty, is valid from
// the start; user and password, if not empty, are accepted by /login.
func newFakeSaltAPI(t *testing.T, tls bool, token, user, password string, scripts ...[]step) *fakeSaltAPI {
	t.Helper()
	f := &fakeSaltAPI{
		user: user, password: password, eauth: "pam",
		quit:    make(chan struct{}),
		tokens:  map[string]bool{},
		scripts: scripts,
	}
	if token != "" {
		f.tokens[token] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/events", f.events)
	mux.HandleFunc("/login", f.login)
	if tls {
		f.srv = httptest.NewTLSServer(mux)
	} else {
		f.srv = httptest.NewServer(mux)
	}
	t.Cleanup(func() {
		close(f.quit)
		f.srv.Close()
	})
	return f
}

func (f *fakeSaltAPI) counts() (conns, logins, unauthorized, badRequests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns, f.logins, f.unauthorized, f.badRequests
}

func (f *fakeSaltAPI) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var creds struct{ Username, Password, Eauth string }
	if err := json.NewDecoder(r.Body).Decode(&creds); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if f.user == "" || creds.Username != f.user || creds.Password != f.password || creds.Eauth != f.eauth {
		http.Error(w, "Could not authenticate using provided credentials", http.StatusUnauthorized)
		return
	}
	raw := make([]byte, 20)
	_, _ = rand.Read(raw)
	tok := hex.EncodeToString(raw)
	f.mu.Lock()
	f.tokens[tok] = true
	f.logins++
	f.mu.Unlock()
	now := float64(time.Now().UnixNano()) / 1e9
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Auth-Token", tok)
	_ = json.NewEncoder(w).Encode(map[string]any{"return": []any{map[string]any{
		"token": tok, "start": now, "expire": now + 43200, "user": creds.Username,
		"eauth": creds.Eauth, "perms": []string{".*"},
	}}})
}

func (f *fakeSaltAPI) events(w http.ResponseWriter, r *http.Request) {
	// Current rest_cherrypy refuses any query parameter on /events (tokens
	// must not travel in URLs) and reads X-Auth-Token or the session cookie.
	if r.URL.RawQuery != "" {
		f.mu.Lock()
		f.badRequests++
		f.mu.Unlock()
		http.Error(w, "The /events endpoint takes no query parameters", http.StatusBadRequest)
		return
	}
	tok := r.Header.Get("X-Auth-Token")
	f.mu.Lock()
	if !f.tokens[tok] {
		f.unauthorized++
		f.mu.Unlock()
		http.Error(w, "401 Unauthorized", http.StatusUnauthorized)
		return
	}
	var script []step
	if f.conns < len(f.scripts) {
		script = f.scripts[f.conns]
	}
	f.conns++
	f.mu.Unlock()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream;charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	// rest_cherrypy yields "retry: 400\n" with no blank line of its own.
	_, _ = io.WriteString(w, "retry: 400\n")
	_ = rc.Flush()
	for _, s := range script {
		switch {
		case s.wait != nil:
			select {
			case <-s.wait:
			case <-f.quit:
				return
			case <-r.Context().Done():
				return
			}
		case s.drop:
			conn, _, err := rc.Hijack()
			if err != nil {
				panic(fmt.Sprintf("hijack: %v", err))
			}
			_ = conn.Close()
			return
		case s.end:
			if s.expire {
				f.mu.Lock()
				delete(f.tokens, tok)
				f.mu.Unlock()
			}
			return
		default:
			if _, err := io.WriteString(w, s.block); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	select { // hold the stream open, like a quiet master
	case <-f.quit:
	case <-r.Context().Done():
	}
}

// ---------------------------------------------------------------------------
// A real in-process NATS server with JetStream, and a Publisher over it.
// ---------------------------------------------------------------------------

type natsEnv struct {
	t      *testing.T
	dir    string
	port   int
	mu     sync.Mutex
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
}

func startNATS(t *testing.T) *natsEnv {
	t.Helper()
	e := &natsEnv{t: t, dir: t.TempDir(), port: -1}
	e.start()
	t.Cleanup(e.shutdown)
	addr := e.srv.Addr().(*net.TCPAddr)
	e.port = addr.Port
	nc, err := nats.Connect(e.srv.ClientURL(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond),
		// No buffering while disconnected: a publish then fails at once
		// instead of being sent later behind the bridge's back.
		nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       "SALT_EVENTS",
		Subjects:   []string{"salt.evt.>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.nc, e.js, e.stream = nc, js, stream
	return e
}

func (e *natsEnv) start() {
	e.t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      e.port,
		JetStream: true,
		StoreDir:  e.dir,
		NoLog:     true,
		NoSigs:    true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		e.t.Fatal("nats-server not ready")
	}
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
}

func (e *natsEnv) shutdown() {
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	srv.Shutdown()
	srv.WaitForShutdown()
}

// restart brings the server back on the same port and store.
func (e *natsEnv) restart() {
	e.t.Helper()
	e.start()
	checkFor(e.t, 10*time.Second, 20*time.Millisecond, func() error {
		if !e.nc.IsConnected() {
			return errors.New("client not reconnected")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := e.stream.Info(ctx)
		return err
	})
}

func (e *natsEnv) msgCount(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := e.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// messages returns every message of the stream.
func (e *natsEnv) messages(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := e.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// jsPublisher is the test's Publisher: a JetStream publish with the bridge's
// msgID as Nats-Msg-Id, on a subject derived from the tag.
type jsPublisher struct {
	js      jetstream.JetStream
	timeout time.Duration

	mu   sync.Mutex
	dups int
}

func (p *jsPublisher) Publish(ctx context.Context, m natsbus.Msg, _ natsbus.How) error {
	tag, body, msgID := m.Tag, m.Body, m.Meta.MsgID
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ack, err := p.js.Publish(ctx, testSubject(tag), body, jetstream.WithMsgID(msgID))
	if err != nil {
		return err
	}
	if ack.Duplicate {
		p.mu.Lock()
		p.dups++
		p.mu.Unlock()
	}
	return nil
}

// limitedPublisher is a jsPublisher that reports the server's max payload,
// as natsbus.Conn does, so the outbox cuts events over it.
type limitedPublisher struct {
	*jsPublisher
	max int
}

func (p limitedPublisher) MaxPayload() int { return p.max }

func (p *jsPublisher) duplicates() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dups
}

// testSubject maps a tag to a subject for these tests only: one token per
// "/" part, bytes other than [A-Za-z0-9_-] percent-escaped, an empty part
// written as "%". reactord's real mapping lives in its NATS layer.
func testSubject(tag string) string {
	parts := strings.Split(tag, "/")
	for i, p := range parts {
		if p == "" {
			parts[i] = "%"
			continue
		}
		var b strings.Builder
		for _, c := range []byte(p) {
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
				b.WriteByte(c)
			default:
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		parts[i] = b.String()
	}
	return "salt.evt." + strings.Join(parts, ".")
}

// ---------------------------------------------------------------------------
// Logs.
// ---------------------------------------------------------------------------

type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

type logSink struct {
	t    *testing.T
	mu   sync.Mutex
	recs []logRec
}

type sinkHandler struct {
	sink  *logSink
	attrs []slog.Attr
}

func newLogger(t *testing.T) (*slog.Logger, *logSink) {
	s := &logSink{t: t}
	return slog.New(&sinkHandler{sink: s}), s
}

func (h *sinkHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *sinkHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.sink.mu.Lock()
	h.sink.recs = append(h.sink.recs, rec)
	h.sink.mu.Unlock()
	if testing.Verbose() {
		h.sink.t.Logf("%s %s %v", r.Level, r.Message, rec.attrs)
	}
	return nil
}

func (h *sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sinkHandler{sink: h.sink, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *sinkHandler) WithGroup(string) slog.Handler { return h }

func (s *logSink) all() []logRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logRec(nil), s.recs...)
}

// find returns the records at level whose message contains msg and whose
// attributes include every key=value of want.
func (s *logSink) find(level slog.Level, msg string, want map[string]string) []logRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logRec
	for _, r := range s.recs {
		if r.level != level || !strings.Contains(r.msg, msg) {
			continue
		}
		ok := true
		for k, v := range want {
			if r.attrs[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Running a bridge.
// ---------------------------------------------------------------------------

func runBridge(t *testing.T, cfg Config, pub Publisher) *Bridge {
	t.Helper()
	b, err := New(cfg, pub)
	if err != nil {
		t.Fatal(err)
	}
	return runSource(t, b)
}

// runSource runs a bridge until the test ends, and checks that Run returns
// nil soon after its context is canceled.
func runSource[B interface{ Run(context.Context) error }](t *testing.T, b B) B {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return b
}

// statsString formats the counters for failure messages.
func statsString(s *Stats) string {
	return fmt.Sprintf("received=%d published=%d dropped=%d publish_errors=%d reconnects=%d malformed=%d",
		s.Received.Load(), s.Published.Load(), s.Dropped.Load(), s.PublishErrors.Load(), s.Reconnects.Load(), s.Malformed.Load())
}

// checkStream verifies that the stream holds exactly one message per
// distinct event of want, each with the right subject, envelope and
// Nats-Msg-Id.
func checkStream(t *testing.T, env *natsEnv, want []catEvent) {
	t.Helper()
	checkStreamFit(t, env, want, 0)
}

// checkStreamFit is checkStream for a bridge whose server accepts at most
// limit bytes: events over it must be stored cut (event.Fit), with the
// Nats-Msg-Id of the original.
func checkStreamFit(t *testing.T, env *natsEnv, want []catEvent, limit int) {
	t.Helper()
	orig := map[string]catEvent{} // cut version's key → the original
	stored := make([]catEvent, len(want))
	for i, ev := range want {
		stored[i] = ev
		env := encodeEnvelope(ev.Tag, compactJSON(t, ev.Data))
		out, cuts, err := event.Fit(env, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(cuts) > 0 {
			var e struct {
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatal(err)
			}
			stored[i].Data = e.Data
			orig[eventKey(t, ev.Tag, e.Data)] = ev
		}
	}
	distinct := distinctEvents(t, stored)
	msgs := env.messages(t)
	if len(msgs) != len(distinct) {
		t.Fatalf("stream holds %d messages, want %d distinct events", len(msgs), len(distinct))
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		var got struct {
			Tag  string          `json:"tag"`
			Data json.RawMessage `json:"data"`
		}
		dec := json.NewDecoder(bytes.NewReader(m.Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("seq %d: body %s: %v", m.Sequence, m.Data, err)
		}
		key := eventKey(t, got.Tag, got.Data)
		ev, ok := distinct[key]
		if !ok {
			t.Fatalf("seq %d: unexpected event %s", m.Sequence, m.Data)
		}
		if seen[key] {
			t.Fatalf("seq %d: event %s stored twice", m.Sequence, got.Tag)
		}
		seen[key] = true
		if m.Subject != testSubject(ev.Tag) {
			t.Errorf("seq %d: subject %q, want %q", m.Sequence, m.Subject, testSubject(ev.Tag))
		}
		idOf := ev
		if o, ok := orig[key]; ok {
			idOf = o
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != MsgID(idOf.Tag, idOf.Data) {
			t.Errorf("seq %d: Nats-Msg-Id %q, want %q", m.Sequence, id, MsgID(idOf.Tag, idOf.Data))
		}
		if !jsonEqual(t, got.Data, ev.Data) {
			t.Errorf("seq %d: data %s, want %s", m.Sequence, got.Data, ev.Data)
		}
	}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	return reflect.DeepEqual(decodeAny(t, a), decodeAny(t, b))
}

// compactJSON compacts raw JSON.
func compactJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
