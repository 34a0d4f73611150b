package saltapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/actions"
)

// maxBody bounds how much of a salt-api answer is read. A job start answers
// with a jid and a minion list; 4 MiB leaves room for large fleets.
const maxBody = 4 << 20

// post sends body to path with the token (when not empty) and returns the
// status and body of the answer. Only failures to get an answer are
// returned as errors, classified by transportError. sent reports whether
// the whole request was written to the connection: when it was not,
// salt-api cannot have read the body, so it ran nothing (rest_cherrypy
// reads the whole body before it runs a lowstate). wrote, when not nil, is
// called once the request is written whole, before the answer comes.
func (d *Driver) post(ctx context.Context, path, token string, body []byte, wrote func()) (status int, raw []byte, sent bool, err error) {
	// The request's own deadline is retryable, the caller's is not:
	// transportError looks at the caller's context.
	reqCtx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var written atomic.Bool
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written.Store(true)
				if wrote != nil {
					wrote()
				}
			}
		},
	})
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, d.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, false, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, written.Load(), transportError(ctx, err)
	}
	defer resp.Body.Close()
	// Reading the answer to its end lets the connection be reused.
	raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, true, transportError(ctx, fmt.Errorf("reading the answer to POST %s: %w", path, err))
	}
	if len(raw) > maxBody {
		return 0, nil, true, fmt.Errorf("the answer to POST %s is larger than %d bytes", path, maxBody)
	}
	status = resp.StatusCode
	if loginRedirect(resp) {
		// rest_tornado answers a request without a valid session with a
		// redirect to /login, where rest_cherrypy answers 401: both
		// refuse it before running anything.
		status = http.StatusUnauthorized
	}
	return status, raw, true, nil
}

// loginRedirect reports whether resp sends the client to log in: salt-api's
// rest_tornado redirects POST / without a valid session to /login.
func loginRedirect(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect:
	default:
		return false
	}
	loc, err := resp.Location()
	return err == nil && strings.HasSuffix(loc.Path, "/login") && !strings.HasSuffix(resp.Request.URL.Path, "/login")
}

// checkStatus turns a non-2xx answer into an error: 429 and 5xx (Salt's 503
// for a master that is down, 504 for a timeout, 500 for anything else) are
// retryable, other statuses are not.
func checkStatus(status int, raw []byte) error {
	if status >= 200 && status < 300 {
		return nil
	}
	err := errors.New(statusText(status, raw))
	if status == http.StatusTooManyRequests || status >= 500 {
		return actions.Retryable(err)
	}
	return err
}

// statusText describes an answer by its status and, when salt-api said
// something, its message.
func statusText(status int, raw []byte) string {
	text := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	if msg := errorMessage(raw); msg != "" {
		text += ": " + msg
	}
	return text
}

// errorMessage extracts a short message from an error body: the "return"
// or "message" string of a JSON answer ({"status": 500, "return": "An
// unexpected error occurred"}), else the start of the text.
func errorMessage(raw []byte) string {
	var doc struct {
		Return  any    `json:"return"`
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(raw, &doc) == nil {
		if s, ok := doc.Return.(string); ok {
			msg = s
		} else {
			msg = doc.Message
		}
	} else if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("<")) {
		msg = string(raw)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

// loginRequest is the body of POST /login.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	EAuth    string `json:"eauth"`
}

// loginAnswer is salt-api's answer to POST /login. perms is left out: Salt
// sends a list, or an empty mapping when there are none.
type loginAnswer struct {
	Return []struct {
		Token  string  `json:"token"`
		Start  float64 `json:"start"`
		Expire float64 `json:"expire"`
		User   string  `json:"user"`
		EAuth  string  `json:"eauth"`
	} `json:"return"`
}

// login obtains a new session token.
func (d *Driver) login(ctx context.Context) (session, error) {
	body, err := json.Marshal(loginRequest{Username: d.username, Password: d.password, EAuth: d.eauth})
	if err != nil {
		return session{}, fmt.Errorf("encoding login: %w", err)
	}
	loggedAt := time.Now()
	status, raw, _, err := d.post(ctx, "/login", "", body, nil)
	if err != nil {
		return session{}, fmt.Errorf("login: %w", err)
	}
	if status == http.StatusUnauthorized {
		return session{}, fmt.Errorf("login as %q with eauth %q refused (%s)", d.username, d.eauth, statusText(status, raw))
	}
	if err := checkStatus(status, raw); err != nil {
		return session{}, fmt.Errorf("login: %w", err)
	}
	var ans loginAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return session{}, fmt.Errorf("login: decoding the answer: %w", err)
	}
	if len(ans.Return) != 1 || ans.Return[0].Token == "" {
		return session{}, fmt.Errorf("login: the answer holds no token")
	}
	r := ans.Return[0]
	return session{token: r.Token, renewAt: renewAt(loggedAt, r.Start, r.Expire)}, nil
}

// renewAt is when a token issued at the local time loggedAt is renewed. The
// lifetime is taken from salt-api's own start and expire stamps, so clock
// differences between the hosts do not matter, and the token is renewed
// after nine tenths of it, at most a minute before it expires. Without an
// expiry the token is kept until salt-api refuses it.
func renewAt(loggedAt time.Time, start, expire float64) time.Time {
	if expire <= 0 || math.IsNaN(expire) || math.IsInf(expire, 0) {
		return time.Time{}
	}
	var life time.Duration
	if start > 0 && start <= expire {
		life = time.Duration((expire - start) * float64(time.Second))
	} else {
		life = time.Until(time.Unix(0, int64(expire*1e9)))
	}
	margin := min(life/10, time.Minute)
	return loggedAt.Add(life - margin)
}

// runAnswer is salt-api's answer to a lowstate list: one return per
// lowstate.
type runAnswer struct {
	Return []json.RawMessage `json:"return"`
}

// jobStart is a local_async, runner_async or wheel_async return:
// {"jid": ..., "minions": [...]} for local_async, {"tag": ..., "jid": ...}
// for the others.
type jobStart struct {
	JID     json.RawMessage `json:"jid"`
	Minions []string        `json:"minions"`
	Tag     string          `json:"tag"`
}

// parseRun reads the job id (and minions) from the answer to a POST of
// one lowstate.
func parseRun(client string, raw []byte) (actions.Result, error) {
	var ans runAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return actions.Result{}, fmt.Errorf("decoding the answer: %w", err)
	}
	if len(ans.Return) != 1 {
		return actions.Result{}, fmt.Errorf("the answer holds %d returns, want 1", len(ans.Return))
	}
	return parseReturn(client, ans.Return[0])
}

// parseReturn reads the job id (and minions) from the return of one
// lowstate.
func parseReturn(client string, ret json.RawMessage) (actions.Result, error) {
	ret = bytes.TrimSpace(ret)
	if len(ret) == 0 || ret[0] != '{' {
		// salt-api passes some failures on as a string return.
		var s string
		if json.Unmarshal(ret, &s) == nil && s != "" {
			return actions.Result{}, fmt.Errorf("salt-api answered %q instead of a job", firstLine(s))
		}
		return actions.Result{}, fmt.Errorf("salt-api answered %s instead of a job", firstLine(string(ret)))
	}
	var job jobStart
	if err := json.Unmarshal(ret, &job); err != nil {
		return actions.Result{}, fmt.Errorf("decoding the job: %w", err)
	}
	jid := jidString(job.JID)
	if jid == "" {
		if client == "local" && isEmptyObject(ret) {
			return actions.Result{}, ErrNoMinions
		}
		return actions.Result{}, fmt.Errorf("salt-api answered without a jid: %s", firstLine(string(ret)))
	}
	return actions.Result{JID: jid, Minions: job.Minions}, nil
}

func isEmptyObject(raw []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) == 0
}

// jidString reads a jid sent as a string or, by some proxies, a number.
func jidString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
