// Package saltapi is the action driver that runs reactions through salt-api
// (rest_cherrypy). Each action becomes one lowstate POSTed to the API root:
// local reactions start a job with the local_async client, runner and wheel
// reactions with runner_async and wheel_async, so a dispatch returns as soon
// as Salt has assigned a job id. Caller reactions need a minion and cannot
// run through salt-api.
//
// The driver logs in with Salt external authentication (eauth) and sends the
// session token in the X-Auth-Token header. It logs in again shortly before
// the token expires and, once per request, after salt-api answers 401.
// Connection failures, 5xx and 429 answers are marked actions.Retryable; the
// retry itself is left to the stages around the driver.
//
// Dispatch does not serialise on one slow request: up to Config.MaxInFlight
// requests run at once over kept-alive connections, and reactions that
// arrive while all of them are busy are sent together, as one lowstate list
// in one POST, when a request finishes (see Config.MaxBatch, and Do for how
// a failed batch is reported without ever running a lowstate twice).
package saltapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/redact"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultTimeout bounds one HTTP request.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxInFlight bounds the lowstate requests running at once.
	// rest_cherrypy runs in one Python process, so requests beyond a
	// couple mostly wait for its interpreter; fewer slots leave more
	// reactions waiting, which go out batched and merged. Measured on a
	// real 3007.1 master with a storm over 10 minions: 8 slots 32, 2 slots
	// 53, 1 slot 66 reactions per second. Two keep one slow request from
	// holding up the rest.
	DefaultMaxInFlight = 2
	// DefaultMaxBatch bounds the lowstates sent in one request.
	DefaultMaxBatch = 32
	// DefaultMaxMerge bounds the reactions merged into one lowstate.
	DefaultMaxMerge = 64
)

// ErrNoMinions is returned when salt-api accepted a local reaction but Salt
// published nothing because no minion matched the target. Salt answers
// local_async with an empty return in that case, and retrying cannot help.
var ErrNoMinions = errors.New("no minions matched the target")

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("the driver is closed")

// Config configures the salt-api driver.
type Config struct {
	// URL is the base URL of salt-api, e.g. https://salt.example.com:8000.
	// The login and lowstate paths are appended to it, so a salt-api
	// mounted under a root_prefix is written with that prefix.
	URL string
	// Username, Password and EAuth are the external authentication
	// credentials used to log in (EAuth names the backend, e.g. "pam",
	// "ldap" or "auto").
	Username, Password, EAuth string
	// Token is an optional session token obtained from salt-api's /login
	// beforehand. It is used until salt-api rejects it; the driver then
	// logs in with the credentials, or fails when there are none.
	Token string
	// CAFile is a PEM bundle of certificate authorities trusted for the
	// salt-api certificate, in place of the system pool.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for a
	// salt-api behind a proxy that requires client certificates.
	CertFile, KeyFile string
	// InsecureSkipVerify turns off verification of the salt-api
	// certificate. It is meant for tests only.
	InsecureSkipVerify bool
	// Timeout bounds each HTTP request, the login included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxInFlight bounds the lowstate requests sent to salt-api at once;
	// zero means DefaultMaxInFlight. The HTTP transport keeps as many idle
	// connections (plus one for a login), so a burst reuses them instead
	// of opening and closing connections, and opens no more than that. rest_cherrypy serves each
	// request on a thread of its pool (thread_pool, 100 by default).
	MaxInFlight int
	// MaxBatch bounds how many waiting reactions go out together in one
	// POST, as a list of lowstates; zero means DefaultMaxBatch and 1 sends
	// every reaction alone. A reaction is only ever held back while
	// MaxInFlight requests are already running, so batching adds no
	// latency; see Driver.Do for how a failed batch is reported.
	MaxBatch int
	// MaxMerge bounds how many local reactions of a batch that differ only
	// in a literal minion target (a glob without wildcards, or a list)
	// share one lowstate with a list target, so one job runs on all their
	// minions; zero means DefaultMaxMerge and 1 gives every reaction its
	// own job. Each reaction gets the shared jid with its own minions; a
	// minion is never in one merged job twice.
	MaxMerge int
}

// Validate checks the configuration without touching the network or the
// file system and returns every problem it finds, joined. New calls it.
func (c Config) Validate() error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("saltapi: url is required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("saltapi: url %s: %w", redact.URL(c.URL), redact.ParseError(err)))
	case u.Scheme != "http" && u.Scheme != "https":
		errs = append(errs, fmt.Errorf("saltapi: url %q: scheme must be http or https", redact.URL(c.URL)))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("saltapi: url %q has no host", redact.URL(c.URL)))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("saltapi: url %q must not have a query or fragment", redact.URL(c.URL)))
	case u.User != nil:
		errs = append(errs, fmt.Errorf("saltapi: url must not carry credentials; use username and password"))
	case u.Scheme == "http" && (c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.InsecureSkipVerify):
		errs = append(errs, fmt.Errorf("saltapi: url %q: TLS settings need an https url", redact.URL(c.URL)))
	}
	hasCreds := c.Username != "" || c.Password != "" || c.EAuth != ""
	switch {
	case hasCreds:
		if c.Username == "" {
			errs = append(errs, errors.New("saltapi: username is required with password and eauth"))
		}
		if c.Password == "" {
			errs = append(errs, errors.New("saltapi: password is required with username"))
		}
		if c.EAuth == "" {
			errs = append(errs, errors.New(`saltapi: eauth is required with username (e.g. "pam" or "auto")`))
		}
	case c.Token == "":
		errs = append(errs, errors.New("saltapi: username, password and eauth, or a token, are required"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("saltapi: cert_file and key_file go together"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("saltapi: timeout %v is negative", c.Timeout))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("saltapi: max_in_flight %d is negative", c.MaxInFlight))
	}
	if c.MaxMerge < 0 {
		errs = append(errs, fmt.Errorf("saltapi: max_merge %d is negative", c.MaxMerge))
	}
	if c.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("saltapi: max_batch %d is negative", c.MaxBatch))
	}
	return errors.Join(errs...)
}

// Driver executes actions through salt-api. It is safe for concurrent use.
type Driver struct {
	base      string // URL without the trailing slash
	username  string
	password  string
	eauth     string
	timeout   time.Duration
	transport *http.Transport
	client    *http.Client

	// loginSem admits one login at a time; waiting on it honours the
	// caller's context, which a mutex would not.
	loginSem chan struct{}

	mu     sync.Mutex
	tok    session
	closed bool

	// The dispatch queue; see batch.go.
	maxInFlight, maxBatch, maxMerge int
	qmu                             sync.Mutex
	queue                           []*request // reactions waiting for a free request
	inFlight                        int        // requests running, at most maxInFlight
	// unhealthy is set when the last lowstate POST failed: batches are
	// formed only while salt-api answers, so an outage costs at most the
	// reactions of one batch their retries.
	unhealthy bool
}

// session is a salt-api token and the local time at which it is renewed; a
// zero renewAt means the expiry is unknown and only a 401 retires it.
type session struct {
	token   string
	renewAt time.Time
}

func (s session) usable(now time.Time) bool {
	return s.token != "" && (s.renewAt.IsZero() || now.Before(s.renewAt))
}

// New validates cfg, loads its certificate files and returns a driver. It
// does not contact salt-api; the first Do logs in.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tlsConf, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	maxInFlight := cmp.Or(cfg.MaxInFlight, DefaultMaxInFlight)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	// Go keeps two idle connections per host by default: with more
	// requests in flight, every burst would close the surplus after use
	// and open (and TLS-handshake) new ones for the next.
	tr.MaxIdleConnsPerHost = maxInFlight + 1
	// And never more connections than that: a request sent the instant
	// another's response was read would otherwise dial a new one before
	// the old one is back in the idle pool (a loaded machine did).
	tr.MaxConnsPerHost = maxInFlight + 1
	tr.MaxIdleConns = max(tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	d := &Driver{
		base:      strings.TrimRight(cfg.URL, "/"),
		username:  cfg.Username,
		password:  cfg.Password,
		eauth:     cfg.EAuth,
		timeout:   timeout,
		transport: tr,
		// Redirects are not followed: the token and lowstate must not
		// leave for another place, and a redirected POST becomes a GET.
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		loginSem:    make(chan struct{}, 1),
		tok:         session{token: cfg.Token},
		maxInFlight: maxInFlight,
		maxBatch:    cmp.Or(cfg.MaxBatch, DefaultMaxBatch),
		maxMerge:    cmp.Or(cfg.MaxMerge, DefaultMaxMerge),
	}
	return d, nil
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("saltapi: reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("saltapi: ca_file %s holds no PEM certificate", cfg.CAFile)
		}
		conf.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("saltapi: loading client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// Name implements actions.Driver.
func (d *Driver) Name() string { return "saltapi" }

// Supports implements actions.Driver: salt-api runs local, runner and wheel
// reactions. Caller reactions run salt-call on a minion, which salt-api
// cannot reach.
func (d *Driver) Supports(state string) bool {
	switch state {
	case "local", "runner", "wheel":
		return true
	}
	return false
}

// SaysSent implements the method of actions.SaysSent: the driver calls
// actions.Sent once the POST that carries a reaction is written.
func (d *Driver) SaysSent(state string) bool { return d.Supports(state) }

// Do implements actions.Driver. It POSTs the action's lowstate and returns
// the job id Salt assigned and, for local reactions, the targeted minions.
//
// When MaxInFlight requests are already running, the lowstate waits, and
// the next request to finish takes it with the other waiting ones, up to
// MaxBatch, as one lowstate list. salt-api runs such a list in order and
// answers {"return": [r1, r2, ...]}; each Do gets its own return: its own
// jid and minions, or its own error (ErrNoMinions, a string return).
//
// salt-api (rest_cherrypy's LowDataAdapter.POST) stops at the first
// lowstate of a list that raises and answers with an error status (400,
// 401, 500, 503, 504) alone: the lowstates before it have started their
// jobs, the failing one and those after it have not, and the answer does
// not say which one failed. A failed batch is therefore never sent again
// as a whole, and its reactions are not marked retryable, so that no
// lowstate runs twice: their errors wrap ErrOutcomeUnknown. The exceptions
// are failures that provably ran nothing, which are handled like those of
// a single request:
//
//   - the request was not completely written (a refused or broken
//     connection before the end of the body): salt-api reads the whole
//     body before it runs anything; the errors are retryable;
//   - 401 while salt-api's session check also refuses the token (checked
//     with an empty lowstate list, which runs nothing): the session was
//     refused before the body was read; the driver logs in again and sends
//     the batch once more, as for a single request;
//   - 413 (the body is over max_request_body_size): the batch is split in
//     halves, which are sent in turn;
//   - 429 (a proxy's rate limit) is retryable; redirects, 404, 405 and 406
//     are configuration errors, except rest_tornado's redirect to /login,
//     its answer for a refused session, which is taken as a 401.
//
// A 5xx, a timeout or a broken connection after the whole request was
// written, a 400, or a 401 from a valid session (a function the eauth user
// may not run) leave the outcome unknown. After such a failure, and after
// any failed request, reactions are sent one by one until salt-api answers
// again, so an outage costs at most one batch its retries. A lowstate sent
// alone keeps the single-request behaviour: its 5xx, 429 and transport
// failures are retryable, since salt-api answers a lone lowstate's failure
// for that lowstate.
//
// When ctx ends while the lowstate waits, Do returns without sending it;
// when it ends while a batch holding it is in flight, Do returns at once
// with ctx's error (the job may still start), and the batch goes on for
// the others. A lowstate sent alone uses ctx for its request, as before.
func (d *Driver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return actions.Result{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return actions.Result{}, err
	}
	if a.Chunk == nil {
		return actions.Result{}, errors.New("action has no chunk")
	}
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return actions.Result{}, err
	}
	if !d.Supports(call.Client) {
		return actions.Result{}, fmt.Errorf("reaction %q: salt-api cannot run %s reactions", a.Chunk.Str("__id__"), call.Client)
	}
	low, err := lowstateJSON(call, a.Chunk)
	if err != nil {
		return actions.Result{}, fmt.Errorf("reaction %q: encoding lowstate: %w", a.Chunk.Str("__id__"), err)
	}
	r := &request{ctx: ctx, client: call.Client, low: low, done: make(chan reply, 1)}
	if ids := actions.LiteralMinions(call.Tgt, call.TgtType); call.Client == "local" && ids != nil {
		r.ids = ids
		r.lowMap, r.mergeKey, err = mergeable(call, a.Chunk)
		if err != nil {
			return actions.Result{}, fmt.Errorf("reaction %q: encoding lowstate: %w", a.Chunk.Str("__id__"), err)
		}
	}
	res, err := d.dispatch(ctx, r)
	if err != nil {
		return actions.Result{}, fmt.Errorf("%s %s: %w", call.Client, call.Fun, err)
	}
	return res, nil
}

// run POSTs one lowstate list with a valid token. After a 401 it logs in
// again and repeats the request once.
func (d *Driver) run(ctx context.Context, body []byte) ([]byte, error) {
	tok, err := d.token(ctx)
	if err != nil {
		return nil, ranNothing(err)
	}
	for attempt := 1; ; attempt++ {
		status, raw, sent, err := d.post(ctx, "/", tok, body, func() { actions.Sent(ctx) })
		if err != nil {
			d.setHealthy(false)
			if !sent {
				err = ranNothing(err)
			}
			return nil, err
		}
		d.setHealthy(status >= 200 && status < 300)
		if status != http.StatusUnauthorized {
			err := checkStatus(status, raw)
			if refusedUnrun(status, raw) {
				err = ranNothing(err)
			}
			return raw, err
		}
		switch {
		case !d.canLogin():
			return nil, fmt.Errorf("salt-api rejected the token (%s) and no credentials are configured to log in again", statusText(status, raw))
		case attempt > 1:
			// A fresh token was refused too: Salt answers 401 when
			// the eauth user may not run this function.
			return nil, fmt.Errorf("salt-api refused the request after a new login (%s); check the eauth permissions of %q", statusText(status, raw), d.username)
		}
		d.retire(tok)
		if tok, err = d.token(ctx); err != nil {
			return nil, ranNothing(err)
		}
	}
}

func (d *Driver) canLogin() bool { return d.username != "" }

// Probe implements actions.Prober: salt-api must answer (GET /, each
// time), and with credentials the login must be taken (the session serves
// the reactions that follow; a later probe reuses it until it is due for
// renewal).
func (d *Driver) Probe(ctx context.Context) error {
	reqCtx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, d.base+"/", nil)
	if err != nil {
		return fmt.Errorf("salt-api %s: %w", d.base, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("salt-api %s does not answer: %w", d.base, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("salt-api %s: GET / answered %s", d.base, resp.Status)
	}
	if d.canLogin() {
		if _, err := d.token(ctx); err != nil {
			return fmt.Errorf("salt-api %s: %w", d.base, err)
		}
	}
	return nil
}

// token returns a usable session token, logging in when there is none or
// the current one is due for renewal.
func (d *Driver) token(ctx context.Context) (string, error) {
	d.mu.Lock()
	s, closed := d.tok, d.closed
	d.mu.Unlock()
	if closed {
		return "", ErrClosed
	}
	if s.usable(time.Now()) {
		return s.token, nil
	}
	if !d.canLogin() {
		// Only a static token without credentials gets here, after it
		// was retired; run reports the 401 before that happens.
		return "", errors.New("no usable token and no credentials to log in")
	}
	select {
	case d.loginSem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-d.loginSem }()
	// Another caller may have logged in while this one waited.
	d.mu.Lock()
	s = d.tok
	d.mu.Unlock()
	if s.usable(time.Now()) {
		return s.token, nil
	}
	s, err := d.login(ctx)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.tok = s
	d.mu.Unlock()
	return s.token, nil
}

// retire drops tok after salt-api refused it, unless another caller has
// already replaced it.
func (d *Driver) retire(tok string) {
	d.mu.Lock()
	if d.tok.token == tok {
		d.tok = session{}
	}
	d.mu.Unlock()
}

// Close implements actions.Driver: it forgets the session token and
// releases idle connections. Do fails with ErrClosed afterwards. Close may
// be called more than once.
func (d *Driver) Close(context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.tok = session{}
	d.mu.Unlock()
	d.transport.CloseIdleConnections()
	return nil
}

// transportError classifies an error from the HTTP client: certificate and
// TLS setup problems are configuration errors, anything else (refused or
// reset connections, timeouts) is worth retrying unless the caller's
// context ended.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var (
		unknownCA   x509.UnknownAuthorityError
		invalidCert x509.CertificateInvalidError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
		recordHdr   tls.RecordHeaderError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &invalidCert) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &recordHdr) {
		return err
	}
	// A TLS alert from salt-api (certificate required, bad certificate,
	// unknown CA, protocol version) answers the client's setup.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return err
	}
	// net/http replaces the record header error of a plain HTTP answer
	// to a TLS handshake with a text of its own.
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return err
	}
	return actions.Retryable(err)
}

var _ actions.Driver = (*Driver)(nil)

// SaltCall runs an execution function on the master for a reaction file
// that calls Salt while rendering (reactions.SaltCaller), as Salt's
// reactor does: salt-api's synchronous runner client with salt.cmd,
// answered with the function's return.
func (d *Driver) SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	if args == nil {
		args = []any{}
	}
	if kwargs == nil {
		kwargs = map[string]any{}
	}
	low := []map[string]any{{"client": "runner", "fun": "salt.cmd", "arg": append([]any{fun}, args...), "kwarg": kwargs}}
	body, err := json.Marshal(low)
	if err != nil {
		return nil, fmt.Errorf("saltapi: salt.cmd %s: encoding: %w", fun, err)
	}
	raw, err := d.run(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("saltapi: salt.cmd %s: %w", fun, err)
	}
	var out struct {
		Return []any `json:"return"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil || len(out.Return) != 1 {
		return nil, fmt.Errorf("saltapi: salt.cmd %s: unexpected answer %.200q", fun, raw)
	}
	v := event.NormalizeNumbers(out.Return[0])
	if s, ok := v.(string); ok && (strings.HasPrefix(s, "Exception occurred in runner") || strings.HasPrefix(s, "'"+fun+"' is not available")) {
		return nil, fmt.Errorf("saltapi: salt.cmd %s: %s", fun, firstLine(s))
	}
	return v, nil
}
