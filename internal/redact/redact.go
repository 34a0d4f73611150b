// Package redact hides secrets in the URLs reactord logs and prints: NATS
// servers, stores, salt-api.
package redact

import (
	"net/url"
	"strings"
)

// secretParams are query parameters that carry secrets (PostgreSQL's
// password and sslpassword, tokens).
var secretParams = []string{"password", "sslpassword", "token", "pass", "pwd"}

// URLs returns s, a URL or a comma-separated list of them, with every
// password (user information, or a secret query parameter) replaced by
// "xxxxx". Text that does not parse as a URL is cut to its scheme when it
// holds an '@', since it may still carry a password.
func URLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = one(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

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
