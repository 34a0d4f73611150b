// Package bridge carries events from a Salt master's event bus into reactord.
// Two sources read the bus: MasterBus reads the master's event publisher
// socket directly (see master.go and saltwire.go), Bridge reads salt-api's
// /events stream. Both hand every event to an Outbox, which never blocks
// them and publishes through a Publisher (natsbus).
//
// # The salt-api event stream
//
// salt-api's rest_cherrypy module serves GET /events as server-sent events
// (Content-Type text/event-stream). The handler first writes "retry: 400\n"
// (no blank line of its own, so it belongs to the first event block), then for
// every event on the master bus:
//
//	tag: <tag>
//	data: {"tag": "<tag>", "data": {...}}
//	<blank line>
//
// The "tag" field is salt-api's addition (SSE clients ignore unknown fields);
// the "data" line is the JSON of the whole event, tag and data together, on
// one line. The bridge parses the stream with the SSE rules (CRLF/LF/CR line
// ends, comments, multi-line data, retry), takes the tag from the JSON (the
// tag line is the fallback) and publishes the envelope {"tag":..., "data":...}
// with data re-encoded compactly, numbers untouched.
//
// # Authentication
//
// The bridge sends its token in the X-Auth-Token header, which rest_cherrypy
// accepts for /events in old releases (its salt_token tool copies the header
// into the session cookie) and current ones (which read it directly). It
// never puts the token in the URL: older releases also took ?token= (a
// salt-api session token) or ?salt_token= (a raw eauth token), but current
// ones answer 400 to any query parameter on /events because URLs end up in
// logs. The token is either Config.Token (a session token from /login or a
// raw Salt eauth token) or obtained by POST /login with Config.Username,
// Password and EAuth. salt-api checks the token's expiry before each event
// and ends the stream once it has expired; the reconnection then gets 401,
// and on any 401 the bridge logs in again if it has credentials.
//
// # Delivery
//
// salt-api keeps no history: events fired while the bridge is disconnected are
// not replayed, so the bridge reconnects quickly (exponential backoff from
// Config.MinBackoff, reset after every successful connection) and logs every
// disconnection; a master that vanishes without closing the connection (salt-api
// sends nothing while the bus is quiet) is noticed by TCP keep-alive within
// about a minute. Nothing it receives is dropped silently: an event that cannot
// be parsed is counted in Stats.Malformed and logged; every other event goes
// to the Outbox, which holds it while NATS is away and counts and logs what
// its bounded spool cannot hold; in both cases the bridge goes on reading. Each event carries a
// de-duplication id (see MsgID) naming one emission on one master, so that
// several bridges reading the same master, or a retried publish, store it
// once, while a genuine repeat (a new _stamp) is kept.
package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/internal/retry"
	"github.com/reactord/reactord/natsbus"
)

// Defaults for Config.
const (
	// DefaultMinBackoff is the first reconnection delay.
	DefaultMinBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff caps the reconnection and publish-retry delays.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultEAuth is the eauth backend named in POST /login.
	DefaultEAuth = "auto"
)

const (
	// loginTimeout bounds one POST /login.
	loginTimeout = 30 * time.Second
	// headerTimeout bounds the wait for the response headers of /events.
	headerTimeout = 30 * time.Second
	// dialTimeout bounds the TCP connection and the TLS handshake.
	dialTimeout = 15 * time.Second
	// logPrefixBytes is how much of a malformed event is quoted in the log.
	logPrefixBytes = 200
)

// Publisher publishes one event; natsbus.Conn implements it.
type Publisher interface {
	// Publish publishes one event the bridge's way, natsbus.Event: m.Body
	// is the envelope JSON {"tag":..., "data":{...}}; m.Meta.MsgID
	// becomes the Nats-Msg-Id header for JetStream de-duplication. An
	// error makes the bridge retry the same event, so Publish must be
	// safe to call again for an event it may already have stored
	// (JetStream de-duplication makes it so).
	Publish(ctx context.Context, m natsbus.Msg, how natsbus.How) error
}

// Config configures a Bridge.
type Config struct {
	// URL is the base URL of salt-api, e.g. "https://salt.example.com:8000"
	// (with rest_cherrypy's root_prefix, if one is set). The bridge reads
	// URL + "/events" and logs in at URL + "/login". It must be http or
	// https and carry no query and no user information.
	URL string
	// Token is a salt-api session token (from POST /login) or a raw Salt
	// eauth token. When empty, the bridge logs in with Username and
	// Password first.
	Token string
	// Username, Password and EAuth are the credentials for POST /login. With
	// them the bridge logs in when Token is empty and again whenever salt-api
	// answers 401 (an expired or revoked token). EAuth defaults to "auto".
	Username, Password, EAuth string
	// CAFile is a PEM file of CA certificates trusted for salt-api's TLS
	// certificate, in addition to the system pool.
	CAFile string
	// InsecureSkipVerify disables TLS certificate verification. Only for
	// tests: the token and the password travel on this connection.
	InsecureSkipVerify bool
	// MinBackoff is the first reconnection delay (default 500ms); it doubles
	// after each failed attempt up to MaxBackoff (default 30s) and returns
	// to MinBackoff once a connection succeeds. Each delay is jittered
	// between half and all of its value, and is never shorter than the
	// "retry:" value salt-api sends (400ms), capped by MaxBackoff. Retries
	// of a failed publish start at MinBackoff/2 and double up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives the bridge's logs; nil means slog.Default(), since a
	// bridge that logs nothing would drop events silently.
	Logger *slog.Logger
	// Outbox configures the spool that holds events while NATS cannot take
	// them (its Logger defaults to Logger).
	Outbox OutboxConfig
}

// Stats are the bridge's running counters: the source's, and its outbox's
// (Published, Dropped, ...). Once every received event has been handled,
// Received + Recovered == Published + Dropped + Unpublishable + Malformed +
// the events still waiting in the outbox.
type Stats struct {
	*OutboxStats
	// Received counts events read from the stream, including malformed and
	// truncated ones.
	Received atomic.Int64
	// Reconnects counts reconnections: connections made after the first
	// one (not the attempts that failed).
	Reconnects atomic.Int64
	// BlindNanos adds up the time the native bridge spent disconnected
	// from the master's bus after its first connection: events published
	// then were not seen.
	BlindNanos atomic.Int64
	// Recovered counts job returns the native bridge rebuilt from the
	// master's job cache after a reconnection (MasterConfig.JobCache).
	Recovered atomic.Int64
	// Malformed counts events that could not be turned into an envelope:
	// data that is not a JSON object with an object "data", a missing tag,
	// an event cut off by the end of the stream, an oversized line.
	Malformed atomic.Int64
}

// Bridge reads salt-api's event stream and publishes each event. Create it
// with New and start it with Run.
type Bridge struct {
	out       *Outbox
	log       *slog.Logger
	client    *http.Client
	eventsURL string
	loginURL  string
	username  string
	password  string
	eauth     string
	minDelay  time.Duration
	maxDelay  time.Duration

	stats   Stats
	running atomic.Bool
	up      atomic.Bool

	// Owned by the goroutine running Run.
	token         string
	tokenFresh    bool          // token comes from a login not yet used for a connection
	connectedOnce bool          // a session reached the stream: the next one is a reconnection
	serverRetry   time.Duration // last "retry:" value salt-api sent
}

var (
	// errUnauthorized is a 401 from /events.
	errUnauthorized = errors.New("salt-api rejected the token (401)")
	// errStreamEnded is a clean end of the event stream.
	errStreamEnded = errors.New("salt-api closed the event stream")
)

// New checks cfg and returns a Bridge that publishes to pub. It does not
// connect; Run does.
func New(cfg Config, pub Publisher) (*Bridge, error) {
	if pub == nil {
		return nil, errors.New("bridge: nil Publisher")
	}
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("bridge: URL %s: %w", redact.URL(cfg.URL), redact.ParseError(err))
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("bridge: URL %q: scheme must be http or https", redact.URL(cfg.URL))
	}
	if base.Host == "" {
		return nil, fmt.Errorf("bridge: URL %q has no host", redact.URL(cfg.URL))
	}
	if base.User != nil {
		return nil, errors.New("bridge: URL must not carry user information; use Username and Password")
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("bridge: URL %q must not carry a query or fragment", redact.URL(cfg.URL))
	}
	if cfg.Token == "" && (cfg.Username == "" || cfg.Password == "") {
		return nil, errors.New("bridge: need Token, or Username and Password to log in")
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 {
		return nil, errors.New("bridge: negative backoff")
	}
	minDelay, maxDelay := cfg.MinBackoff, cfg.MaxBackoff
	if minDelay == 0 {
		minDelay = DefaultMinBackoff
	}
	if maxDelay == 0 {
		maxDelay = DefaultMaxBackoff
	}
	if minDelay > maxDelay {
		return nil, fmt.Errorf("bridge: MinBackoff %v exceeds MaxBackoff %v", minDelay, maxDelay)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify}
	if cfg.CAFile != "" {
		pemBytes, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("bridge: CAFile: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("bridge: CAFile %s: no PEM certificate found", cfg.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	dialer := &net.Dialer{
		Timeout: dialTimeout,
		// salt-api sends nothing on a quiet bus, so a dead master is only
		// noticed by TCP keep-alive: after about Idle + Count*Interval.
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3},
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: headerTimeout,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		// The stream must reach us event by event; a compressing server may
		// hold events back in its compressor.
		DisableCompression: true,
	}
	client := &http.Client{
		Transport: tr,
		// No Timeout: the event stream lasts as long as the connection.
		// Redirects are not followed: they would carry X-Auth-Token along.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	eauth := cfg.EAuth
	if eauth == "" {
		eauth = DefaultEAuth
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""
	if cfg.Outbox.Logger == nil {
		cfg.Outbox.Logger = log
	}
	out, err := NewOutbox(cfg.Outbox, pub)
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		out:       out,
		log:       log.With("component", "bridge"),
		client:    client,
		eventsURL: base.JoinPath("events").String(),
		loginURL:  base.JoinPath("login").String(),
		username:  cfg.Username,
		password:  cfg.Password,
		eauth:     eauth,
		minDelay:  minDelay,
		maxDelay:  maxDelay,
		token:     cfg.Token,
	}
	b.stats.OutboxStats = out.Stats()
	if cfg.InsecureSkipVerify {
		b.log.Warn("TLS certificate verification is disabled for salt-api", "url", b.eventsURL)
	}
	return b, nil
}

// Stats returns the bridge's live counters.
func (b *Bridge) Stats() *Stats { return &b.stats }

// Outbox is the bridge's outbox, for its health and spool size.
func (b *Bridge) Outbox() *Outbox { return b.out }

// Connected reports whether the bridge is reading salt-api's event stream.
func (b *Bridge) Connected() bool { return b.up.Load() }

// Run reads the event stream and publishes its events until ctx ends, then
// returns nil. It reconnects after every failure or end of the stream, with
// exponential backoff that is reset after each successful connection; on a
// 401 it logs in again at once when it has credentials. Run must not be
// called twice at the same time.
func (b *Bridge) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("bridge: Run is already running")
	}
	defer b.running.Store(false)
	stop := runOutbox(ctx, b.out)
	defer stop()

	failures := 0 // consecutive attempts that did not connect
	for {
		connected, err := b.session(ctx)
		if ctx.Err() != nil {
			b.log.Info("bridge stopped", "url", b.eventsURL)
			return nil
		}
		if connected {
			failures = 0
		}
		delay := b.backoff(failures)
		if errors.Is(err, errUnauthorized) {
			if b.canLogin() {
				fresh := b.tokenFresh
				b.token, b.tokenFresh = "", false
				if !fresh {
					// Expired or revoked token: log in again right away.
					b.log.Warn("salt-api rejected the token; logging in again", "url", b.eventsURL)
					continue
				}
				b.log.Error("salt-api rejected a token it has just issued", "url", b.eventsURL, "retry_in", delay)
			} else {
				b.log.Error("salt-api rejected the token and no credentials are configured to log in again",
					"url", b.eventsURL, "retry_in", delay)
			}
		} else if connected {
			b.log.Warn("salt-api event stream ended; reconnecting", "url", b.eventsURL, "error", err, "retry_in", delay)
		} else {
			b.log.Error("cannot connect to salt-api", "url", b.eventsURL, "error", err, "retry_in", delay)
		}
		if !connected {
			failures++
		}
		if !retry.Sleep(ctx, delay) {
			b.log.Info("bridge stopped", "url", b.eventsURL)
			return nil
		}
	}
}

// backoff is the delay before the next attempt after failures failed ones.
func (b *Bridge) backoff(failures int) time.Duration {
	// Half the delay at most is taken off at random, so that bridges do
	// not reconnect in step.
	d := retry.Backoff{Min: b.minDelay, Max: b.maxDelay, Jitter: 0.5}.Delay(failures + 1)
	if d < b.serverRetry {
		d = b.serverRetry
	}
	return min(d, b.maxDelay)
}

func (b *Bridge) canLogin() bool { return b.username != "" && b.password != "" }

// session logs in if needed, opens /events and consumes it until it ends.
// connected reports whether the stream was opened.
func (b *Bridge) session(ctx context.Context) (connected bool, err error) {
	if b.token == "" {
		tok, err := b.login(ctx)
		if err != nil {
			return false, err
		}
		b.token, b.tokenFresh = tok, true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.eventsURL, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("X-Auth-Token", b.token)
	resp, err := b.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return false, errUnauthorized
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET /events: %s: %s", resp.Status, bodySnippet(resp.Body))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, fmt.Errorf("GET /events: Content-Type %q is not text/event-stream", resp.Header.Get("Content-Type"))
	}
	b.tokenFresh = false
	b.log.Info("connected to salt-api event stream", "url", b.eventsURL)
	if b.connectedOnce {
		b.stats.Reconnects.Add(1)
	}
	b.connectedOnce = true
	b.up.Store(true)
	defer b.up.Store(false)
	return true, b.consume(ctx, resp.Body)
}

// consume reads events from body and publishes them, until the stream ends.
func (b *Bridge) consume(ctx context.Context, body io.Reader) error {
	r := newSSEReader(body)
	for {
		ev, err := r.next()
		if r.retry > 0 {
			b.serverRetry = r.retry
		}
		if err != nil {
			if p, ok := r.partial(); ok {
				b.stats.Received.Add(1)
				b.stats.Malformed.Add(1)
				b.log.Error("salt-api event stream ended inside an event; partial event discarded",
					"tag", p.tag, "bytes", len(p.data), "error", err)
			}
			if errors.Is(err, io.EOF) {
				return errStreamEnded
			}
			return err
		}
		b.handle(ev)
	}
}

// handle turns one SSE event into an envelope and publishes it.
func (b *Bridge) handle(ev sseEvent) {
	b.stats.Received.Add(1)
	tag, data, err := decodeEnvelope(ev)
	if err != nil {
		b.stats.Malformed.Add(1)
		b.log.Error("malformed salt-api event discarded", "tag", ev.tag, "error", err,
			"bytes", len(ev.data), "prefix", prefix(ev.data))
		return
	}
	if ev.hasTag && ev.tag != tag {
		b.log.Warn("salt-api tag line differs from the event's tag; using the event's",
			"tag", tag, "tag_line", ev.tag)
	}
	b.out.Offer(tag, encodeEnvelope(tag, data), receiptID(tag, data))
}

// decodeEnvelope checks that an SSE event carries a Salt event and returns
// its tag and compacted data.
func decodeEnvelope(ev sseEvent) (string, json.RawMessage, error) {
	if !ev.hasData {
		return "", nil, errors.New("event has a tag line but no data")
	}
	var env struct {
		Tag  *string         `json:"tag"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(ev.data, &env); err != nil {
		return "", nil, fmt.Errorf("data is not a JSON event: %w", err)
	}
	tag := ev.tag
	if env.Tag != nil && *env.Tag != "" {
		tag = *env.Tag
	}
	if tag == "" {
		return "", nil, errors.New("event has no tag")
	}
	raw := bytes.TrimSpace(env.Data)
	if len(raw) == 0 || raw[0] != '{' {
		return "", nil, errors.New(`event has no "data" object`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", nil, fmt.Errorf("event data: %w", err)
	}
	return tag, buf.Bytes(), nil
}

// encodeEnvelope builds {"tag":...,"data":...}; data must be compact JSON.
func encodeEnvelope(tag string, data json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"tag":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(tag) // a string always encodes
	buf.Truncate(buf.Len() - 1)
	buf.WriteString(`,"data":`)
	buf.Write(data)
	buf.WriteByte('}')
	return buf.Bytes()
}

// login obtains a token with POST /login.
func (b *Bridge) login(ctx context.Context) (string, error) {
	if !b.canLogin() {
		return "", errors.New("no token and no credentials to log in")
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	payload, err := json.Marshal(map[string]string{
		"username": b.username,
		"password": b.password,
		"eauth":    b.eauth,
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.loginURL, bytes.NewReader(payload))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("login as %q (eauth %q) rejected: %s", b.username, b.eauth, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("login: %s: %s", resp.Status, bodySnippet(resp.Body))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("login: reading the answer: %w", err)
	}
	token, expire := parseLogin(raw)
	if token == "" {
		token = resp.Header.Get("X-Auth-Token")
	}
	if token == "" {
		return "", errors.New("login: the answer carries no token")
	}
	attrs := []any{"url", b.loginURL, "user", b.username, "eauth", b.eauth}
	if expire > 0 {
		sec := int64(expire)
		attrs = append(attrs, "expires", time.Unix(sec, int64((expire-float64(sec))*1e9)).UTC())
	}
	b.log.Info("logged in to salt-api", attrs...)
	return token, nil
}

// parseLogin reads {"return": [{"token": ..., "expire": ...}]} (the list form
// rest_cherrypy sends) or {"return": {...}}.
func parseLogin(raw []byte) (token string, expire float64) {
	var resp struct {
		Return json.RawMessage `json:"return"`
	}
	if json.Unmarshal(raw, &resp) != nil {
		return "", 0
	}
	type entry struct {
		Token  string  `json:"token"`
		Expire float64 `json:"expire"`
	}
	var list []entry
	if json.Unmarshal(resp.Return, &list) == nil && len(list) > 0 {
		return list[0].Token, list[0].Expire
	}
	var one entry
	if json.Unmarshal(resp.Return, &one) == nil {
		return one.Token, one.Expire
	}
	return "", 0
}

// bodySnippet returns the start of an error response for the log.
func bodySnippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return strings.TrimSpace(string(b))
}

// prefix quotes the start of a malformed event for the log.
func prefix(b []byte) string {
	if len(b) > logPrefixBytes {
		return strings.ToValidUTF8(string(b[:logPrefixBytes]), "\uFFFD") + "…"
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// runOutbox publishes from out until ctx ends; the returned function waits
// for that and persists what is still held.
func runOutbox(ctx context.Context, out *Outbox) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = out.Run(ctx)
	}()
	return func() {
		<-done
		_, _ = out.Close()
	}
}
