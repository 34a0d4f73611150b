package redact

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseError(t *testing.T) {
	bad := []string{"http://salt:S3cret@127.0.0.1:notaport"} // an invalid port
	_, err := url.Parse(bad[0])
	if err == nil || !strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("url.Parse error %v: expected it to quote the URL", err)
	}
	if e := ParseError(err); e == nil || strings.Contains(e.Error(), "S3cret") {
		t.Fatalf("ParseError = %v", e)
	}
	other := errors.New("other")
	if ParseError(other) != other {
		t.Fatal("another error changed")
	}
}

// TestURL: a single URL keeps a comma as part of it, in the password or
// in a query value, where URLs would split a list there.
func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want, secret string }{
		{"mysql://u:p,ss@db:3306/x", "mysql://u:xxxxx@db:3306/x", "p,ss"},
		{"postgres://db/x?password=a,b&sslmode=disable", "postgres://db/x?password=xxxxx&sslmode=disable", ",b"},
		{"https://salt:8000", "https://salt:8000", ""},
	} {
		if got := URL(tc.in); got != tc.want || (tc.secret != "" && strings.Contains(got, tc.secret)) {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLs(t *testing.T) {
	for _, tc := range []struct{ in, want, secret string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222", ""},
		{"nats://user:s3cret@nats1:4222,nats://user:s3cret@nats2:4222", "nats://user:xxxxx@nats1:4222,nats://user:xxxxx@nats2:4222", "s3cret"},
		{"nats://tok3n@host:4222", "nats://xxxxx@host:4222", "tok3n"},      // a token as user name: NATS's own convention
		{"postgres://reactord@db/test", "postgres://reactord@db/test", ""}, // a user name elsewhere is no secret
		{"mysql://root:p@ss@w0rd@127.0.0.1:3306/test", "mysql://root:xxxxx@127.0.0.1:3306/test", "p@ss"},
		{"postgres://pg:pa/ss?x@db:5432/test?sslmode=disable", "postgres://pg:xxxxx@db:5432/test?sslmode=disable", "pa/ss"},
		{"postgres://db:5432/test?sslmode=disable&password=hunter2", "postgres://db:5432/test?password=xxxxx&sslmode=disable", "hunter2"},
		{"postgres://u@db/test?sslpassword=k3y", "postgres://u@db/test?sslpassword=xxxxx", "k3y"},
		{"sqlite:///var/lib/reactord/reactord.db", "sqlite:///var/lib/reactord/reactord.db", ""},
		{"https://salt:8000", "https://salt:8000", ""},
	} {
		got := URLs(tc.in)
		if got != tc.want {
			t.Errorf("URLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.secret != "" && strings.Contains(got, tc.secret) {
			t.Errorf("URLs(%q) leaks %q", tc.in, tc.secret)
		}
	}
}
