package store

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestJIDTime(t *testing.T) {
	for jid, want := range map[string]string{
		"20261123101215710850":        "2026, Nov 23 10:12:15.710850",
		"20260101000000000000":        "2026, Jan 01 00:00:00.000000",
		"20261123101215710850_12345":  "2026, Nov 23 10:12:15.710850",
		"20261123101215710850_":       "",
		"2026112310121571085":         "",
		"202611231012157108501":       "",
		"20261323101215710850":        "",
		"20260023101215710850":        "2026,  23 10:12:15.710850",
		"req":                         "",
		"":                            "",
		"2026xx23101215710850":        "",
		"20261223235959999999_1_tail": "2026, Dec 23 23:59:59.999999",
	} {
		if got := JIDTime(jid); got != want {
			t.Errorf("JIDTime(%q) = %q, want %q", jid, got, want)
		}
	}
}

func TestListing(t *testing.T) {
	const jid = "20261123102304655343"
	for _, tc := range []struct {
		name, load, want string
	}{
		{"local job", `{"jid": "20261123102304655343", "tgt_type": "list", "tgt": ["web1", "web2"], "user": "root", "fun": "test.ping", "arg": [], "minions": ["web1", "web2"]}`,
			`{"Function":"test.ping","Arguments":[],"Target":["web1","web2"],"Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"runner job", `{"fun": "runner.test.arg", "id": "vm_master", "jid": "20261123102304655343", "tgt": "vm_master", "user": "root"}`,
			`{"Function":"runner.test.arg","Arguments":[],"Target":"vm_master","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"empty load", `{}`,
			`{"Function":"unknown-function","Arguments":[],"Target":"unknown-target","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"not an object", `"x"`,
			`{"Function":"unknown-function","Arguments":[],"Target":"unknown-target","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"metadata", `{"fun": "test.ping", "arg": [1, {"a": "<b>"}], "metadata": {"k": "v"}, "kwargs": {"metadata": "ignored"}}`,
			`{"Function":"test.ping","Arguments":[1,{"a":"<b>"}],"Target":"unknown-target","Target-type":"list","User":"root","Metadata":{"k":"v"},"StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"metadata of kwargs", `{"fun": "test.ping", "kwargs": {"metadata": [1]}}`,
			`{"Function":"test.ping","Arguments":[],"Target":"unknown-target","Target-type":"list","User":"root","Metadata":[1],"StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"null metadata", `{"fun": "test.ping", "metadata": null}`,
			`{"Function":"test.ping","Arguments":[],"Target":"unknown-target","Target-type":"list","User":"root","Metadata":null,"StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"arg a string", `{"fun": "test.ping", "arg": "ab"}`,
			`{"Function":"test.ping","Arguments":["a","b"],"Target":"unknown-target","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"arg an object", `{"fun": "test.ping", "arg": {"x": 1, "y": 2}}`,
			`{"Function":"test.ping","Arguments":["x","y"],"Target":"unknown-target","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
		{"arg null", `{"fun": "test.ping", "arg": null}`,
			`{"Function":"test.ping","Arguments":[],"Target":"unknown-target","Target-type":"list","User":"root","StartTime":"2026, Nov 23 10:23:04.655343"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(Job{JID: jid, Load: raw(tc.load)}.Listing())
			if err != nil {
				t.Fatal(err)
			}
			// Key order counts: it is Salt's.
			if !jsonEqual(got, raw(tc.want)) || !sameKeyOrder(t, got, raw(tc.want)) {
				t.Errorf("listing:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// sameKeyOrder reports whether two JSON objects have the same top-level keys
// in the same order.
func sameKeyOrder(t *testing.T, a, b []byte) bool {
	t.Helper()
	keys := func(doc []byte) []string {
		var out []string
		d := json.NewDecoder(bytes.NewReader(doc))
		if _, err := d.Token(); err != nil {
			t.Fatal(err)
		}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, k.(string))
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	ka, kb := keys(a), keys(b)
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}
