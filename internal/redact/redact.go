// Package redact hides secrets in the URLs reactord logs and prints: NATS
// servers, stores, salt-api.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// secretParams are query parameters that carry secrets (PostgreSQL's
// password and sslpassword, tokens).
var secretParams = []string{"password", "sslpassword", "token", "pass", "pwd"}

// natsSchemes are the URL schemes of NATS servers, whose user information
// may be a token alone.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// URLs returns s, a URL or a comma-separated list of them, with every
// password (user information, or a secret query parameter) and every token
// given as a NATS URL's user name replaced by "xxxxx". Text that does not
// parse as a URL is cut to its scheme when it holds an '@', since it may
// still carry a password.
func URLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = one(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// URL returns s, a single URL (a store's, salt-api's), with its password
// and secret query parameters replaced by "xxxxx" as URLs does; a comma is
// part of it (a password may hold one), not a list separator.
func URL(s string) string { return one(strings.TrimSpace(s)) }

func one(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	// The user information ends at the last '@' before the path: a
	// password may itself hold '@', '/' or '?'.
	hostStart := 0
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		if hasPass {
			rest = user + ":xxxxx" + rest[at:]
		} else if natsSchemes[strings.ToLower(scheme)] {
			// NATS reads a user name without a password as a token.
			rest = "xxxxx" + rest[at:]
		}
		hostStart = strings.LastIndex(rest, "@") + 1
	}
	q := strings.IndexByte(rest[hostStart:], '?')
	if q < 0 {
		return scheme + "://" + rest
	}
	q += hostStart
	vals, err := url.ParseQuery(rest[q+1:])
	if err != nil {
		return scheme + "://" + rest[:q] + "?xxxxx"
	}
	changed := false
	for k := range vals {
		for _, secret := range secretParams {
			if strings.EqualFold(k, secret) {
				vals.Set(k, "xxxxx")
				changed = true
			}
		}
	}
	if !changed {
		return scheme + "://" + rest
	}
	return scheme + "://" + rest[:q] + "?" + vals.Encode()
}

// ParseError returns the error url.Parse gave for a URL without the URL
// itself, which its message quotes whole, password included: the
// *url.Error's inner error. Other errors are returned as they are.
func ParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Op == "parse" {
		return ue.Err
	}
	return err
}
