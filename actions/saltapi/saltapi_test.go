package saltapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// m builds an ordered map from key/value pairs.
func m(kv ...any) *event.Map {
	out := event.NewMap(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i].(string), kv[i+1])
	}
	return out
}

// reaction builds a low chunk the way the compiler does: state, __id__,
// name, __sls__, order and fun, then the reaction body.
func reaction(state, id, fun string, body ...any) *event.Chunk {
	c := m("state", state, "__id__", id, "name", id, "__sls__", "/srv/reactor/test.sls", "order", int64(1), "fun", fun)
	c.Update(m(body...))
	return c
}

func credentials(url string) saltapi.Config {
	// MaxMerge 1: tests of batching count lowstates; merging has its own.
	return saltapi.Config{URL: url, Username: "saltdev", Password: "s3cret", EAuth: "pam", Timeout: 5 * time.Second, MaxMerge: 1}
}

func newDriver(t *testing.T, cfg saltapi.Config) *saltapi.Driver {
	t.Helper()
	d, err := saltapi.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// quietLog discards the handshake errors of servers refusing a client.
var quietLog = log.New(io.Discard, "", 0)

var jidRE = regexp.MustCompile(`^\d{20}$`)

// sameJSON compares a lowstate the fake received with the expected one.
func sameJSON(t *testing.T, got map[string]any, want string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	var w map[string]any
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("bad expected lowstate %s: %v", want, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Fatalf("lowstate\n got %s\nwant %s", g, want)
	}
}

func TestDo(t *testing.T) {
	cases := []struct {
		name    string
		chunk   *event.Chunk
		denied  string // a function the eauth user may not run
		fail    []int  // statuses salt-api answers first
		low     string // the lowstate salt-api receives
		minions []string
		err     string // expected error text; "" for success
		errIs   error
		retry   bool // the error is marked retryable
		logins  int
		posts   int
	}{
		{
			name: "local list target with arg kwarg and ret",
			chunk: reaction("local", "restart nginx", "cmd.run",
				"tgt", []any{"web1", "web2", "web9"}, "tgt_type", "list",
				"arg", []any{"systemctl restart nginx"}, "kwarg", m("runas", "root"),
				"ret", []any{"syslog", "slack"}, "timeout", int64(30), "metadata", m("source", "reactord")),
			low: `{"client": "local_async", "tgt": ["web1", "web2", "web9"], "tgt_type": "list", "fun": "cmd.run",
				"arg": ["systemctl restart nginx"], "kwarg": {"runas": "root"}, "ret": "syslog,slack",
				"timeout": 30, "metadata": {"source": "reactord"}}`,
			minions: []string{"web1", "web2"},
			logins:  1, posts: 1,
		},
		{
			name:    "local glob without arguments",
			chunk:   reaction("local", "ping", "test.ping", "tgt", "*"),
			low:     `{"client": "local_async", "tgt": "*", "tgt_type": "glob", "fun": "test.ping", "arg": [], "kwarg": {}}`,
			minions: []string{"db1", "web1", "web2"},
			logins:  1, posts: 1,
		},
		{
			name: "local new schema args become kwarg",
			chunk: reaction("local", "install zsh", "state.single", "tgt", "web*",
				"args", []any{m("fun", "pkg.installed"), m("name", "zsh")}),
			low:     `{"client": "local_async", "tgt": "web*", "tgt_type": "glob", "fun": "state.single", "arg": [], "kwarg": {"fun": "pkg.installed", "name": "zsh"}}`,
			minions: []string{"web1", "web2"},
			logins:  1, posts: 1,
		},
		{
			name: "runner legacy body becomes kwarg",
			chunk: reaction("runner", "deploy", "state.orchestrate",
				"mods", "orch.deploy", "pillar", m("version", "1.2.0")),
			low:    `{"client": "runner_async", "fun": "state.orchestrate", "arg": [], "kwarg": {"mods": "orch.deploy", "pillar": {"version": "1.2.0"}}}`,
			logins: 1, posts: 1,
		},
		{
			name: "runner new schema ignores the other body keys",
			chunk: reaction("runner", "deploy", "state.orchestrate",
				"args", []any{m("mods", "orch.deploy"), m("pillar", m("version", "1.2.0"))}, "queue", true),
			low:    `{"client": "runner_async", "fun": "state.orchestrate", "arg": [], "kwarg": {"mods": "orch.deploy", "pillar": {"version": "1.2.0"}}}`,
			logins: 1, posts: 1,
		},
		{
			name: "runner explicit kwarg wins over body keys and a set name is kept",
			chunk: func() *event.Chunk {
				c := reaction("runner", "notify", "event.send", "tag", "myco/notify", "data", m("a", int64(1)), "kwarg", m("tag", "myco/override"))
				c.Set("name", "notifier")
				return c
			}(),
			low:    `{"client": "runner_async", "fun": "event.send", "arg": [], "kwarg": {"name": "notifier", "tag": "myco/override", "data": {"a": 1}}}`,
			logins: 1, posts: 1,
		},
		{
			name:   "wheel legacy body",
			chunk:  reaction("wheel", "accept web3", "key.accept", "match", "web3"),
			low:    `{"client": "wheel_async", "fun": "key.accept", "arg": [], "kwarg": {"match": "web3"}}`,
			logins: 1, posts: 1,
		},
		{
			name: "wheel new schema",
			chunk: reaction("wheel", "accept web3", "key.accept",
				"args", []any{m("match", "web3"), m("include_denied", true)}),
			low:    `{"client": "wheel_async", "fun": "key.accept", "arg": [], "kwarg": {"match": "web3", "include_denied": true}}`,
			logins: 1, posts: 1,
		},
		{
			name:   "500 is retryable",
			chunk:  reaction("local", "ping", "test.ping", "tgt", "*"),
			fail:   []int{http.StatusInternalServerError},
			err:    "local test.ping: HTTP 500 Internal Server Error: An unexpected error occurred",
			retry:  true,
			logins: 1, posts: 1,
		},
		{
			name:   "503 is retryable",
			chunk:  reaction("runner", "deploy", "state.orchestrate", "mods", "orch"),
			fail:   []int{http.StatusServiceUnavailable},
			err:    "HTTP 503 Service Unavailable",
			retry:  true,
			logins: 1, posts: 1,
		},
		{
			name:   "429 is retryable",
			chunk:  reaction("wheel", "accept", "key.accept", "match", "web3"),
			fail:   []int{http.StatusTooManyRequests},
			err:    "HTTP 429 Too Many Requests",
			retry:  true,
			logins: 1, posts: 1,
		},
		{
			name:   "400 is not retryable",
			chunk:  reaction("local", "ping", "test.ping", "tgt", "*"),
			fail:   []int{http.StatusBadRequest},
			err:    "local test.ping: HTTP 400 Bad Request: Bad Request",
			logins: 1, posts: 1,
		},
		{
			name:   "salt-api's own 400 for a target it cannot parse",
			chunk:  reaction("local", "ping", "test.ping", "tgt", "G@os:Debian", "tgt_type", "compound"),
			err:    `HTTP 400 Bad Request: fake salt-api does not implement tgt_type "compound"`,
			logins: 1, posts: 1,
		},
		{
			name:   "no minions matched",
			chunk:  reaction("local", "ping", "test.ping", "tgt", "mail*"),
			low:    `{"client": "local_async", "tgt": "mail*", "tgt_type": "glob", "fun": "test.ping", "arg": [], "kwarg": {}}`,
			err:    "local test.ping: no minions matched the target",
			errIs:  saltapi.ErrNoMinions,
			logins: 1, posts: 1,
		},
		{
			name:   "function the eauth user may not run",
			chunk:  reaction("wheel", "delete", "key.delete", "match", "web1"),
			denied: "key.delete",
			err:    `salt-api refused the request after a new login (HTTP 401 Unauthorized: Authorization error occurred.); check the eauth permissions of "saltdev"`,
			logins: 2, posts: 2,
		},
		{
			name:  "caller is not supported",
			chunk: reaction("caller", "touch", "file.touch", "args", []any{"/tmp/x"}),
			err:   "reaction \"touch\": salt-api cannot run caller reactions",
		},
		{
			name:  "malformed args never reach salt-api",
			chunk: reaction("runner", "bad", "state.orchestrate", "args", []any{}),
			errIs: actions.ErrArgFormat,
			err:   "incorrect argument format",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			if tc.denied != "" {
				fake.denied[tc.denied] = true
			}
			fake.failNext(tc.fail...)
			srv := fake.start(t)
			d := newDriver(t, credentials(srv.URL))
			res, err := d.Do(context.Background(), actions.Action{Tag: "salt/minion/web1/start", Chunk: tc.chunk})
			st := fake.stats()
			if len(st.problems) > 0 {
				t.Errorf("protocol problems: %q", st.problems)
			}
			if st.logins != tc.logins || st.posts != tc.posts {
				t.Errorf("logins %d posts %d, want %d and %d", st.logins, st.posts, tc.logins, tc.posts)
			}
			if tc.low != "" {
				if len(st.lows) != 1 {
					t.Fatalf("salt-api ran %d lowstates, want 1", len(st.lows))
				}
				sameJSON(t, st.lows[0], tc.low)
			}
			if tc.err != "" || tc.errIs != nil {
				if err == nil {
					t.Fatalf("no error, result %+v", res)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %q, want it to contain %q", err, tc.err)
				}
				if strings.HasPrefix(err.Error(), "saltapi") {
					t.Errorf("error %q starts with the driver's name, which whoever reports it adds", err)
				}
				if tc.errIs != nil && !errors.Is(err, tc.errIs) {
					t.Errorf("error %v is not %v", err, tc.errIs)
				}
				if got := actions.IsRetryable(err); got != tc.retry {
					t.Errorf("retryable = %v, want %v (%v)", got, tc.retry, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if !jidRE.MatchString(res.JID) {
				t.Errorf("jid %q is not a Salt jid", res.JID)
			}
			if !reflect.DeepEqual(res.Minions, tc.minions) {
				t.Errorf("minions %q, want %q", res.Minions, tc.minions)
			}
		})
	}
}

func TestSupports(t *testing.T) {
	d := newDriver(t, saltapi.Config{URL: "http://127.0.0.1:1", Token: "ab12"})
	for state, want := range map[string]bool{"local": true, "runner": true, "wheel": true, "caller": false, "bogus": false} {
		if got := d.Supports(state); got != want {
			t.Errorf("Supports(%q) = %v, want %v", state, got, want)
		}
	}
	if d.Name() != "saltapi" {
		t.Errorf("Name() = %q", d.Name())
	}
}

// TestTokenRenewedBeforeExpiry runs the driver's clock in a bubble: a token
// minted for ten minutes is reused for nine and replaced before it runs
// out, without salt-api having to refuse it first.
func TestTokenRenewedBeforeExpiry(t *testing.T) {
	fake := newFakeSalt()
	fake.lifetime = 10 * time.Minute
	srv := httptest.NewUnstartedServer(fake)
	// Closed connections leave no goroutine of the bubble blocked on the
	// network, so its clock can move.
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	t.Cleanup(srv.Close)
	synctest.Test(t, func(t *testing.T) {
		d, err := saltapi.New(credentials(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		do := func() {
			t.Helper()
			if _, err := d.Do(t.Context(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")}); err != nil {
				t.Fatalf("Do: %v", err)
			}
		}
		do()
		time.Sleep(8*time.Minute + 59*time.Second)
		do()
		if st := fake.stats(); st.logins != 1 || st.tokens[0] != st.tokens[1] {
			t.Fatalf("token changed within its lifetime: logins %d, tokens %q", st.logins, st.tokens)
		}
		time.Sleep(2 * time.Second)
		do()
		st := fake.stats()
		if st.logins != 2 || st.posts != 3 || st.tokens[2] == st.tokens[1] {
			t.Fatalf("token not renewed before expiry: logins %d posts %d tokens %q", st.logins, st.posts, st.tokens)
		}
	})
}

func TestReloginAfter401(t *testing.T) {
	cases := []struct {
		name  string
		cause func(*fakeSalt)
	}{
		{"salt-api restarted and forgot the session", (*fakeSalt).restart},
		// The master's clock runs ahead: the token expired there while the
		// driver still counts it valid.
		{"token expired on the server", func(f *fakeSalt) { f.advance(13 * time.Hour) }},
	}
	for _, tornado := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if tornado {
				name = "rest_tornado: " + name + " (302 to /login)"
			}
			t.Run(name, func(t *testing.T) {
				fake := newFakeSalt()
				fake.tornado = tornado
				srv := fake.start(t)
				d := newDriver(t, credentials(srv.URL))
				a := actions.Action{Chunk: reaction("runner", "deploy", "state.orchestrate", "mods", "orch")}
				if _, err := d.Do(context.Background(), a); err != nil {
					t.Fatal(err)
				}
				tc.cause(fake)
				res, err := d.Do(context.Background(), a)
				if err != nil {
					t.Fatalf("Do after 401: %v", err)
				}
				st := fake.stats()
				if st.logins != 2 || st.posts != 3 || st.tokens[1] != st.tokens[0] || st.tokens[2] == st.tokens[1] {
					t.Fatalf("logins %d posts %d tokens %q: want a second login and one retried post", st.logins, st.posts, st.tokens)
				}
				if len(st.lows) != 2 || !jidRE.MatchString(res.JID) {
					t.Fatalf("lowstates run %d, jid %q", len(st.lows), res.JID)
				}
			})
		}
	}
}

func TestStaticToken(t *testing.T) {
	const tok = "6d1b722e9a0f4c2bb1a3e8f0d2c4b6a8e0f1a2b3"
	fake := newFakeSalt()
	fake.addSession(tok)
	srv := fake.start(t)
	a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "db1")}

	d := newDriver(t, saltapi.Config{URL: srv.URL, Token: tok})
	res, err := d.Do(context.Background(), a)
	if err != nil || !reflect.DeepEqual(res.Minions, []string{"db1"}) {
		t.Fatalf("Do = %+v, %v", res, err)
	}
	if st := fake.stats(); st.logins != 0 || st.tokens[0] != tok {
		t.Fatalf("logins %d tokens %q: want the static token and no login", st.logins, st.tokens)
	}

	// A refused static token without credentials cannot be replaced.
	fake.restart()
	_, err = d.Do(context.Background(), a)
	if err == nil || actions.IsRetryable(err) || !strings.Contains(err.Error(), "no credentials are configured") {
		t.Fatalf("refused static token: %v", err)
	}

	// With credentials the driver logs in once the static token is refused.
	cfg := credentials(srv.URL)
	cfg.Token = tok
	d2 := newDriver(t, cfg)
	if _, err := d2.Do(context.Background(), a); err != nil {
		t.Fatalf("Do with token and credentials: %v", err)
	}
	if st := fake.stats(); st.logins != 1 {
		t.Fatalf("logins %d, want 1", st.logins)
	}
}

func TestLoginRefused(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(*saltapi.Config)
		err  string
	}{
		{"wrong password", func(c *saltapi.Config) { c.Password = "nope" }, `login as "saltdev" with eauth "pam" refused (HTTP 401 Unauthorized: Could not authenticate using provided credentials)`},
		{"eauth backend not configured", func(c *saltapi.Config) { c.EAuth = "ldap" }, `with eauth "ldap" refused`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			srv := fake.start(t)
			cfg := credentials(srv.URL)
			tc.cfg(&cfg)
			d := newDriver(t, cfg)
			_, err := d.Do(context.Background(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")})
			if err == nil || !strings.Contains(err.Error(), tc.err) || actions.IsRetryable(err) {
				t.Fatalf("err = %v, want a non-retryable %q", err, tc.err)
			}
			if st := fake.stats(); st.posts != 0 {
				t.Fatalf("%d lowstate posts without a token", st.posts)
			}
		})
	}
}

func TestLoginServerErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// salt-api answers 503 when the master is not running.
		httpError(w, http.StatusServiceUnavailable, "Salt Master is not available.")
	}))
	t.Cleanup(srv.Close)
	d := newDriver(t, credentials(srv.URL))
	_, err := d.Do(context.Background(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")})
	if err == nil || !actions.IsRetryable(err) || !strings.Contains(err.Error(), "login: HTTP 503 Service Unavailable: Salt Master is not available.") {
		t.Fatalf("err = %v", err)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d := newDriver(t, credentials(url))
	_, err := d.Do(context.Background(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")})
	if err == nil || !actions.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
}

func TestCanceledContext(t *testing.T) {
	fake := newFakeSalt()
	srv := fake.start(t)
	d := newDriver(t, credentials(srv.URL))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Do(ctx, actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")})
	if !errors.Is(err, context.Canceled) || actions.IsRetryable(err) {
		t.Fatalf("err = %v, want context.Canceled, not retryable", err)
	}
}

// writePEM writes one PEM block to a file in dir.
func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTLSWithCustomCA(t *testing.T) {
	fake := newFakeSalt()
	srv := httptest.NewUnstartedServer(fake)
	srv.Config.ErrorLog = quietLog // the handshake with an unknown CA fails
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := writePEM(t, t.TempDir(), "ca.pem", "CERTIFICATE", srv.Certificate().Raw)
	a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "web1")}

	cfg := credentials(srv.URL)
	cfg.CAFile = caFile
	res, err := newDriver(t, cfg).Do(context.Background(), a)
	if err != nil || !reflect.DeepEqual(res.Minions, []string{"web1"}) {
		t.Fatalf("Do over TLS = %+v, %v", res, err)
	}

	// Without the CA the certificate is unknown: a configuration error,
	// not worth retrying.
	_, err = newDriver(t, credentials(srv.URL)).Do(context.Background(), a)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) || actions.IsRetryable(err) {
		t.Fatalf("unknown CA: %v (retryable %v)", err, actions.IsRetryable(err))
	}

	insecure := credentials(srv.URL)
	insecure.InsecureSkipVerify = true
	if _, err := newDriver(t, insecure).Do(context.Background(), a); err != nil {
		t.Fatalf("InsecureSkipVerify: %v", err)
	}

	// Speaking TLS to a plain HTTP salt-api is a configuration error too.
	plain := newFakeSalt().start(t)
	_, err = newDriver(t, credentials(strings.Replace(plain.URL, "http://", "https://", 1))).Do(context.Background(), a)
	if err == nil || actions.IsRetryable(err) {
		t.Fatalf("https to an http server: %v (retryable %v)", err, actions.IsRetryable(err))
	}
}

func TestTLSClientCertificate(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "reactord"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCert)

	fake := newFakeSalt()
	srv := httptest.NewUnstartedServer(fake)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = quietLog // the handshake without a certificate fails
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	cfg := credentials(srv.URL)
	cfg.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", srv.Certificate().Raw)
	cfg.CertFile = writePEM(t, dir, "client.pem", "CERTIFICATE", der)
	cfg.KeyFile = writePEM(t, dir, "client.key", "PRIVATE KEY", keyDER)
	a := actions.Action{Chunk: reaction("wheel", "accept", "key.accept", "match", "web3")}
	if _, err := newDriver(t, cfg).Do(context.Background(), a); err != nil {
		t.Fatalf("Do with a client certificate: %v", err)
	}

	cfg.CertFile, cfg.KeyFile = "", ""
	_, err = newDriver(t, cfg).Do(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "certificate required") || actions.IsRetryable(err) {
		t.Fatalf("without the required client certificate: %v (retryable %v)", err, actions.IsRetryable(err))
	}
}

func TestNewValidates(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := saltapi.Config{URL: "https://salt:8000", Username: "u", Password: "p", EAuth: "pam"}
	cases := []struct {
		name string
		cfg  func(*saltapi.Config)
		errs []string
	}{
		{"no url", func(c *saltapi.Config) { c.URL = "" }, []string{"saltapi: url is required"}},
		{"ftp url", func(c *saltapi.Config) { c.URL = "ftp://salt" }, []string{`url "ftp://salt": scheme must be http or https`}},
		{"relative url", func(c *saltapi.Config) { c.URL = "salt:8000" }, []string{"scheme must be http or https"}},
		{"no host", func(c *saltapi.Config) { c.URL = "https:///api" }, []string{"has no host"}},
		{"query", func(c *saltapi.Config) { c.URL = "https://salt/?x=1" }, []string{"must not have a query"}},
		{"user in url", func(c *saltapi.Config) { c.URL = "https://u:p@salt" }, []string{"url must not carry credentials"}},
		{"tls options on http", func(c *saltapi.Config) { c.URL = "http://salt"; c.CAFile = "/ca.pem" }, []string{"TLS settings need an https url"}},
		{"no credentials", func(c *saltapi.Config) { c.Username, c.Password, c.EAuth = "", "", "" }, []string{"username, password and eauth, or a token, are required"}},
		{"no password nor eauth", func(c *saltapi.Config) { c.Password, c.EAuth = "", "" }, []string{"password is required", "eauth is required"}},
		{"password alone", func(c *saltapi.Config) { c.Username = "" }, []string{"username is required"}},
		{"cert without key", func(c *saltapi.Config) { c.CertFile = "/c.pem" }, []string{"cert_file and key_file go together"}},
		{"negative timeout", func(c *saltapi.Config) { c.Timeout = -time.Second }, []string{"timeout -1s is negative"}},
		{"negative max in flight", func(c *saltapi.Config) { c.MaxInFlight = -1 }, []string{"max_in_flight -1 is negative"}},
		{"negative max batch", func(c *saltapi.Config) { c.MaxBatch = -2 }, []string{"max_batch -2 is negative"}},
		{"all collected", func(c *saltapi.Config) { c.URL = ""; c.EAuth = ""; c.Timeout = -1 }, []string{"url is required", "eauth is required", "is negative"}},
		{"missing ca file", func(c *saltapi.Config) { c.CAFile = filepath.Join(dir, "absent.pem") }, []string{"reading ca_file"}},
		{"ca file without PEM", func(c *saltapi.Config) { c.CAFile = notPEM }, []string{"holds no PEM certificate"}},
		{"bad key pair", func(c *saltapi.Config) { c.CertFile, c.KeyFile = notPEM, notPEM }, []string{"loading client certificate"}},
		{"token alone is enough", func(c *saltapi.Config) { c.Username, c.Password, c.EAuth, c.Token = "", "", "", "abc" }, nil},
		{"http is allowed", func(c *saltapi.Config) { c.URL = "http://127.0.0.1:8000/" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.cfg(&cfg)
			d, err := saltapi.New(cfg)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				_ = d.Close(context.Background())
				return
			}
			if err == nil {
				t.Fatal("New accepted the config")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	fake := newFakeSalt()
	srv := fake.start(t)
	d, err := saltapi.New(credentials(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")}
	if _, err := d.Do(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Do(context.Background(), a); !errors.Is(err, saltapi.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

// TestConcurrentDoLogsInOnce starts many dispatches on a fresh driver: they
// share one login, and each lowstate runs once (those that waited for a
// free request went out together, so there may be fewer POSTs).
func TestConcurrentDoLogsInOnce(t *testing.T) {
	fake := newFakeSalt()
	srv := fake.start(t)
	d := newDriver(t, credentials(srv.URL))
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := d.Do(context.Background(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "web*")})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := fake.stats()
	if st.logins != 1 || st.posts < 1 || st.posts > n || len(st.lows) != n {
		t.Fatalf("logins %d posts %d lowstates %d, want 1 login, 1 to %d posts and %d lowstates", st.logins, st.posts, len(st.lows), n, n)
	}
	seen := map[string]bool{}
	for _, low := range st.lows {
		seen[low["client"].(string)] = true
	}
	if !seen["local_async"] || len(seen) != 1 {
		t.Fatalf("clients %v", seen)
	}
}

// TestUnexpectedAnswers covers 200 answers that do not describe a started
// job: none of them is worth retrying.
func TestUnexpectedAnswers(t *testing.T) {
	cases := []struct {
		name, body string
		jid        string
		err        string
	}{
		{"string return", `{"return": ["Exception occurred in runner state.orchestrate: Traceback...\n..."]}`, "", `salt-api answered "Exception occurred in runner state.orchestrate: Traceback..." instead of a job`},
		{"runner return without jid", `{"return": [{}]}`, "", "salt-api answered without a jid: {}"},
		{"no return", `{"return": []}`, "", "the answer holds 0 returns, want 1"},
		{"not JSON", `<html><body>maintenance</body></html>`, "", "decoding the answer"},
		{"jid as a number", `{"return": [{"jid": 20261122031106123456, "tag": "salt/run/20261122031106123456"}]}`, "20261122031106123456", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeSalt()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/login" {
					fake.ServeHTTP(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			res, err := newDriver(t, credentials(srv.URL)).Do(context.Background(), actions.Action{Chunk: reaction("runner", "deploy", "state.orchestrate", "mods", "orch")})
			if tc.err == "" {
				if err != nil || res.JID != tc.jid {
					t.Fatalf("Do = %+v, %v; want jid %s", res, err, tc.jid)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || actions.IsRetryable(err) {
				t.Fatalf("err = %v, want a non-retryable %q", err, tc.err)
			}
		})
	}
}

// TestRequestTimeoutIsRetryable: salt-api that does not answer within
// Config.Timeout is retried, a caller's deadline is not.
func TestRequestTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	a := actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")}

	cfg := credentials(srv.URL)
	cfg.Timeout = 50 * time.Millisecond
	_, err := newDriver(t, cfg).Do(context.Background(), a)
	if !errors.Is(err, context.DeadlineExceeded) || !actions.IsRetryable(err) {
		t.Fatalf("request timeout: %v (retryable %v)", err, actions.IsRetryable(err))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = newDriver(t, credentials(srv.URL)).Do(ctx, a)
	if !errors.Is(err, context.DeadlineExceeded) || actions.IsRetryable(err) {
		t.Fatalf("caller deadline: %v (retryable %v)", err, actions.IsRetryable(err))
	}
}

// TestProbe: Probe logs in with credentials (once: later probes and
// reactions reuse the session), names a refused login, a salt-api that
// does not answer, and with a token only checks that salt-api answers.
func TestProbe(t *testing.T) {
	fake := newFakeSalt()
	srv := fake.start(t)
	d := newDriver(t, credentials(srv.URL))
	for range 2 {
		if err := d.Probe(context.Background()); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	if _, err := d.Do(context.Background(), actions.Action{Chunk: reaction("local", "ping", "test.ping", "tgt", "*")}); err != nil {
		t.Fatal(err)
	}
	if st := fake.stats(); st.logins != 1 {
		t.Errorf("logins %d, want 1 for two probes and a reaction", st.logins)
	}

	bad := credentials(srv.URL)
	bad.Password = "nope"
	if err := newDriver(t, bad).Probe(context.Background()); err == nil || !strings.Contains(err.Error(), `login as "saltdev" with eauth "pam" refused`) {
		t.Errorf("Probe with a wrong password: %v", err)
	}

	if err := newDriver(t, saltapi.Config{URL: srv.URL, Token: "abc"}).Probe(context.Background()); err != nil {
		t.Errorf("Probe with a token: %v", err)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL
	down.Close()
	for _, cfg := range []saltapi.Config{credentials(url), {URL: url, Token: "abc"}} {
		if err := newDriver(t, cfg).Probe(context.Background()); err == nil || !strings.Contains(err.Error(), url) {
			t.Errorf("Probe of a salt-api that is down: %v", err)
		}
	}
}

// TestSaysWhenSent: the driver tells its caller (actions.Sent) once a
// reaction's POST is written, while salt-api has not answered it yet,
// alone or in a batch: salt-api here holds each POST until every one of
// its lowstates was said to be sent, and fails the test after 5 s.
func TestSaysWhenSent(t *testing.T) {
	fake := newFakeSalt()
	const n = 3
	var sent [n]chan struct{}
	var once [n]sync.Once
	for i := range sent {
		sent[i] = make(chan struct{})
	}
	var mu sync.Mutex
	var sizes []int
	hold := make(chan struct{}) // the first POST's answer waits for the others to queue
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var lows []struct {
				Arg []int `json:"arg"`
			}
			if err := json.Unmarshal(body, &lows); err != nil {
				t.Errorf("lowstates %s: %v", body, err)
			}
			mu.Lock()
			sizes = append(sizes, len(lows))
			mu.Unlock()
			for _, l := range lows {
				select {
				case <-sent[l.Arg[0]]:
				case <-time.After(5 * time.Second):
					t.Errorf("reaction %d: not said to be sent while salt-api held its POST", l.Arg[0])
				}
				if l.Arg[0] == 0 {
					<-hold
				}
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := credentials(srv.URL)
	cfg.MaxInFlight = 1 // the second and third wait for the first, then go as one batch
	d := newDriver(t, cfg)
	do := func(i int) chan error {
		done := make(chan error, 1)
		ctx := actions.WithSent(context.Background(), func() { once[i].Do(func() { close(sent[i]) }) })
		go func() {
			_, err := d.Do(ctx, actions.Action{Chunk: reaction("local", "ping", "test.arg", "tgt", "web1", "arg", []any{int64(i)})})
			done <- err
		}()
		return done
	}
	first := do(0)
	select {
	case <-sent[0]:
	case <-time.After(5 * time.Second):
		t.Fatal("the first reaction was never said to be sent")
	}
	rest := []chan error{do(1), do(2)}
	wait.Until(t, 5*time.Second, "both others queued behind the first", func() bool { return d.Queued() == 2 })
	close(hold)
	for _, done := range append([]chan error{first}, rest...) {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{1, 2}) {
		t.Errorf("POSTs of %v lowstates, want [1 2] (one alone, then a batch of two)", sizes)
	}
}
