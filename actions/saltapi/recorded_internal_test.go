package saltapi

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordedAnswers reads what a real salt-api (Salt 3007.1,
// rest_cherrypy) answered: one POST holding a local_async, a runner_async,
// a wheel_async and a local_async that matched no minion
// (testdata/salt/3007.1/api_batch_*.json), and a single local_async.
func TestRecordedAnswers(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "salt", "3007.1")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var req []map[string]any
	if err := json.Unmarshal(read("api_batch_request.json"), &req); err != nil {
		t.Fatal(err)
	}
	var ans runAnswer
	if err := json.Unmarshal(read("api_batch_response.json"), &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Return) != len(req) {
		t.Fatalf("%d returns for %d lowstates", len(ans.Return), len(req))
	}
	for i, low := range req {
		client := strings.TrimSuffix(low["client"].(string), "_async")
		res, err := parseReturn(client, ans.Return[i])
		if low["tgt"] == "nomatch*" {
			if !errors.Is(err, ErrNoMinions) {
				t.Errorf("lowstate %d (no match): err = %v, want ErrNoMinions", i, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("lowstate %d (%s): %v", i, client, err)
			continue
		}
		if len(res.JID) != 20 {
			t.Errorf("lowstate %d (%s): jid %q", i, client, res.JID)
		}
		if client == "local" && (len(res.Minions) != 1 || res.Minions[0] != "web1") {
			t.Errorf("lowstate %d: minions %v, want [web1]", i, res.Minions)
		}
	}
	res, err := parseRun("local", read("api_local_async.json"))
	if err != nil || res.JID == "" || len(res.Minions) == 0 {
		t.Errorf("single local_async: %+v, %v", res, err)
	}
}
