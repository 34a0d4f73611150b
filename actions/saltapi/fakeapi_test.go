package saltapi_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSalt is a salt-api (rest_cherrypy) speaking the documented protocol:
// POST /login with {"username", "password", "eauth"} mints a session token
// with an expiry; POST / takes a JSON list of lowstates with the token in
// X-Auth-Token and runs the async clients against a fixed set of minions.
// Its clock can be moved forward to expire tokens.
type fakeSalt struct {
	// Set before the server starts.
	users    map[string]string // username -> password
	eauths   map[string]bool   // enabled eauth backends
	lifetime time.Duration     // token lifetime (token_expire)
	minions  []string          // accepted minion keys
	denied   map[string]bool   // functions the eauth user may not run
	crash    map[string]int    // functions that raise, answered with this status
	tornado  bool              // refuse a session as rest_tornado does: 302 to /login

	mu       sync.Mutex
	offset   time.Duration        // added to the server clock
	sessions map[string]time.Time // token -> expiry
	failures []int                // statuses for the next lowstate POSTs
	lastJID  *big.Int
	logins   int
	posts    int                 // lowstate POSTs, rejected ones included
	tokens   []string            // X-Auth-Token of each lowstate POST
	batches  []int               // lowstates in each POST that reached the handler
	lows     []map[string]any    // lowstates that were run
	problems []string            // protocol violations by the client
	issued   []map[string]string // login bodies
}

func newFakeSalt() *fakeSalt {
	return &fakeSalt{
		users:    map[string]string{"saltdev": "s3cret"},
		eauths:   map[string]bool{"pam": true, "auto": true},
		lifetime: 12 * time.Hour, // Salt's default token_expire
		minions:  []string{"db1", "web1", "web2"},
		denied:   map[string]bool{},
		crash:    map[string]int{},
		sessions: map[string]time.Time{},
	}
}

// start serves f over plain HTTP until the test ends.
func (f *fakeSalt) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeSalt) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Add(f.offset)
}

// advance moves the server clock forward.
func (f *fakeSalt) advance(d time.Duration) {
	f.mu.Lock()
	f.offset += d
	f.mu.Unlock()
}

// restart forgets every session, as a salt-api restart does.
func (f *fakeSalt) restart() {
	f.mu.Lock()
	f.sessions = map[string]time.Time{}
	f.mu.Unlock()
}

// addSession registers a token minted elsewhere.
func (f *fakeSalt) addSession(tok string) {
	f.mu.Lock()
	f.sessions[tok] = time.Now().Add(f.offset + f.lifetime)
	f.mu.Unlock()
}

// failNext makes the next lowstate POSTs answer with these statuses.
func (f *fakeSalt) failNext(status ...int) {
	f.mu.Lock()
	f.failures = append(f.failures, status...)
	f.mu.Unlock()
}

type fakeStats struct {
	logins, posts int
	batches       []int
	tokens        []string
	lows          []map[string]any
	problems      []string
}

func (f *fakeSalt) stats() fakeStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeStats{
		logins:   f.logins,
		posts:    f.posts,
		batches:  append([]int(nil), f.batches...),
		tokens:   append([]string(nil), f.tokens...),
		lows:     append([]map[string]any(nil), f.lows...),
		problems: append([]string(nil), f.problems...),
	}
}

func (f *fakeSalt) problem(format string, args ...any) {
	f.mu.Lock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// answer writes v as salt-api does, JSON with the given status.
func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers like cherrypy.HTTPError rendered by salt-api.
func httpError(w http.ResponseWriter, status int, msg string) {
	answer(w, status, map[string]any{"status": status, "return": msg})
}

func (f *fakeSalt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		// rest_cherrypy's index answers without a token.
		answer(w, http.StatusOK, map[string]any{"return": "Welcome", "clients": []string{"local", "local_async", "runner", "runner_async", "wheel", "wheel_async"}})
		return
	}
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "only POST is spoken here")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.problem("%s: Content-Type %q", r.URL.Path, ct)
		httpError(w, http.StatusNotAcceptable, "Content type not supported")
		return
	}
	if acc := r.Header.Get("Accept"); acc != "application/json" {
		f.problem("%s: Accept %q", r.URL.Path, acc)
	}
	switch r.URL.Path {
	case "/login":
		f.login(w, r)
	case "/":
		f.lowstate(w, r)
	default:
		httpError(w, http.StatusNotFound, "Nothing matches the given URI")
	}
}

func (f *fakeSalt) login(w http.ResponseWriter, r *http.Request) {
	var creds map[string]string
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&creds); err != nil {
		f.problem("/login: body is not a JSON object of strings: %v", err)
		httpError(w, http.StatusBadRequest, "Invalid JSON document")
		return
	}
	for k := range creds {
		if k != "username" && k != "password" && k != "eauth" {
			f.problem("/login: unexpected key %q", k)
		}
	}
	f.mu.Lock()
	f.logins++
	f.issued = append(f.issued, creds)
	f.mu.Unlock()
	pw, known := f.users[creds["username"]]
	if !f.eauths[creds["eauth"]] || !known || pw != creds["password"] {
		httpError(w, http.StatusUnauthorized, "Could not authenticate using provided credentials")
		return
	}
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b) // a cherrypy session id
	start := f.now()
	expire := start.Add(f.lifetime)
	f.mu.Lock()
	f.sessions[tok] = expire
	f.mu.Unlock()
	w.Header().Set("X-Auth-Token", tok)
	answer(w, http.StatusOK, map[string]any{"return": []any{map[string]any{
		"token":  tok,
		"start":  unixFloat(start),
		"expire": unixFloat(expire),
		"user":   creds["username"],
		"eauth":  creds["eauth"],
		"perms":  []any{".*", "@runner", "@wheel", "@jobs"},
	}}})
}

func unixFloat(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

func (f *fakeSalt) lowstate(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("X-Auth-Token")
	now := f.now()
	f.mu.Lock()
	f.posts++
	f.tokens = append(f.tokens, tok)
	expire, ok := f.sessions[tok]
	var fail int
	if ok && now.Before(expire) && len(f.failures) > 0 {
		fail, f.failures = f.failures[0], f.failures[1:]
	}
	f.mu.Unlock()
	if !ok || !now.Before(expire) {
		if f.tornado {
			// SaltAPIHandler.post: self.redirect("/login").
			w.Header().Set("Location", "/login")
			w.WriteHeader(http.StatusFound)
			return
		}
		httpError(w, http.StatusUnauthorized, "Please log in")
		return
	}
	if fail != 0 {
		msg := http.StatusText(fail)
		if fail == http.StatusInternalServerError {
			msg = "An unexpected error occurred"
		}
		httpError(w, fail, msg)
		return
	}
	var lows []map[string]any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&lows); err != nil {
		f.problem("/: body is not a JSON list of lowstates: %v", err)
		httpError(w, http.StatusBadRequest, "Lowstates must be a list")
		return
	}
	f.mu.Lock()
	f.batches = append(f.batches, len(lows))
	f.mu.Unlock()
	// LowDataAdapter.POST runs the list in order; the first lowstate that
	// raises ends the request with its status, after the ones before it
	// have run.
	rets := make([]any, 0, len(lows))
	for _, low := range lows {
		status, ret := f.run(low)
		if status != http.StatusOK {
			httpError(w, status, fmt.Sprint(ret))
			return
		}
		rets = append(rets, ret)
	}
	answer(w, http.StatusOK, map[string]any{"return": rets})
}

// run executes one lowstate the way NetapiClient does: unknown or disabled
// clients and missing arguments are SaltInvocationErrors (400), a function
// outside the user's permissions is an AuthorizationError (401).
func (f *fakeSalt) run(low map[string]any) (int, any) {
	client, _ := low["client"].(string)
	fun, _ := low["fun"].(string)
	if arg, ok := low["arg"]; ok {
		if _, ok := arg.([]any); !ok {
			return http.StatusBadRequest, "arg must be a list"
		}
	}
	if kwarg, ok := low["kwarg"]; ok {
		if _, ok := kwarg.(map[string]any); !ok {
			return http.StatusBadRequest, "kwarg must be a mapping"
		}
	}
	for _, k := range []string{"token", "eauth", "username", "password"} {
		if _, ok := low[k]; ok {
			f.problem("lowstate carries %q", k)
		}
	}
	switch client {
	case "local_async", "runner_async", "wheel_async":
	case "local", "runner", "wheel", "local_subset", "local_batch", "ssh":
		return http.StatusBadRequest, fmt.Sprintf("Client disabled: '%s'. Add to 'netapi_enable_clients' master config option to enable.", client)
	default:
		return http.StatusBadRequest, fmt.Sprintf("Invalid client specified: '%v'", low["client"])
	}
	if fun == "" {
		return http.StatusBadRequest, fmt.Sprintf("%s is missing required argument fun", client)
	}
	if f.denied[fun] {
		return http.StatusUnauthorized, "Authorization error occurred."
	}
	if status := f.crash[fun]; status != 0 {
		return status, "An unexpected error occurred"
	}
	f.mu.Lock()
	f.lows = append(f.lows, low)
	f.mu.Unlock()
	jid := f.jid()
	switch client {
	case "runner_async":
		return http.StatusOK, map[string]any{"tag": "salt/run/" + jid, "jid": jid}
	case "wheel_async":
		return http.StatusOK, map[string]any{"tag": "salt/wheel/" + jid, "jid": jid}
	}
	tgt, ok := low["tgt"]
	if !ok {
		return http.StatusBadRequest, "local_async is missing required argument tgt"
	}
	tgtType := "glob"
	if tt, ok := low["tgt_type"]; ok {
		tgtType, _ = tt.(string)
	}
	matched, err := f.match(tgt, tgtType)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	if len(matched) == 0 {
		// LocalClient._check_pub_data: "No minions matched the target.
		// No command was sent, no jid was assigned."
		return http.StatusOK, map[string]any{}
	}
	return http.StatusOK, map[string]any{"jid": jid, "minions": matched}
}

func (f *fakeSalt) match(tgt any, tgtType string) ([]string, error) {
	var matched []string
	switch tgtType {
	case "glob":
		pat, ok := tgt.(string)
		if !ok {
			return nil, fmt.Errorf("glob target must be a string, not %T", tgt)
		}
		for _, m := range f.minions {
			if ok, _ := path.Match(pat, m); ok {
				matched = append(matched, m)
			}
		}
	case "list":
		var names []string
		switch x := tgt.(type) {
		case string:
			names = strings.Split(x, ",")
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("list target holds %T", e)
				}
				names = append(names, s)
			}
		default:
			return nil, fmt.Errorf("list target must be a list or a string, not %T", tgt)
		}
		for _, m := range f.minions {
			for _, n := range names {
				if m == strings.TrimSpace(n) {
					matched = append(matched, m)
				}
			}
		}
	default:
		return nil, fmt.Errorf("fake salt-api does not implement tgt_type %q", tgtType)
	}
	return matched, nil
}

// jid mints a Salt job id (%Y%m%d%H%M%S%f), unique like the master's.
func (f *fakeSalt) jid() string {
	n, _ := new(big.Int).SetString(strings.Replace(f.now().UTC().Format("20060102150405.000000"), ".", "", 1), 10)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastJID != nil && n.Cmp(f.lastJID) <= 0 {
		n.Add(f.lastJID, big.NewInt(1))
	}
	f.lastJID = n
	return n.String()
}
