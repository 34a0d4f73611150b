package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/syncbuf"
)

// TestSaltAPIProbedAtStart: with the saltapi driver the daemon logs in to
// salt-api (a real HTTP server) at start; when it cannot, it starts
// anyway, logs why once, and /healthz names the driver.
func TestSaltAPIProbedAtStart(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"return": [{"token": "t0k", "start": 1, "expire": 43201, "user": "reactord", "eauth": "pam"}]}`)
	}))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	defer api.Close()
	for _, tc := range []struct {
		url     string
		healthy bool
	}{{api.URL, true}, {down.URL, false}} {
		o := testOptions(t)
		o.DryRun, o.Driver = false, "saltapi"
		o.Drivers.APIURL, o.Drivers.APIUser, o.Drivers.APIPassword, o.Drivers.APIEAuth = tc.url, "reactord", "pw", "pam"
		d, _ := runDaemon(t, o)
		err := d.Health()
		if tc.healthy && err != nil {
			t.Errorf("salt-api up: health %v", err)
		}
		if !tc.healthy && (err == nil || !strings.Contains(err.Error(), "driver saltapi") || !strings.Contains(err.Error(), down.URL)) {
			t.Errorf("salt-api down: health %v, want the driver named", err)
		}
		logs := o.Stderr.(*syncbuf.Buffer).String()
		if got := strings.Count(logs, "driver cannot reach Salt"); got != map[bool]int{true: 0, false: 1}[tc.healthy] {
			t.Errorf("salt-api at %s: %d log line(s) saying it cannot be reached:\n%s", tc.url, got, logs)
		}
	}
}
