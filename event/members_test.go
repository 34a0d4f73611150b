package event

import (
	"encoding/json"
	"testing"
)

func TestMembers(t *testing.T) {
	keys := []string{"fun", "tag", "_stamp"}
	for _, tc := range []struct {
		name, raw string
		ok        bool
		want      []string // raw values; "" for absent
	}{
		{"plain", `{"fun": "test.ping", "id": "web1", "_stamp": "2026-11-23T01:02:03.000004"}`, true, []string{`"test.ping"`, "", `"2026-11-23T01:02:03.000004"`}},
		{"nested values skipped", `{"return": {"fun": "no", "tag": [1, {"tag": 2}]}, "tag": null}`, true, []string{"", "null", ""}},
		{"last of a repeated key", `{"fun": 1, "fun": {"a": [true]}}`, true, []string{`{"a": [true]}`, "", ""}},
		{"escaped key", `{"f\u0075n": "x", "t\u00e9g": 1}`, true, []string{`"x"`, "", ""}},
		{"empty object", ` { } `, true, []string{"", "", ""}},
		{"exact case only", `{"Fun": 1, "TAG": 2}`, true, []string{"", "", ""}},
		{"not an object", `["fun", 1]`, false, []string{"", "", ""}},
		{"malformed", `{"fun": 1,}`, false, nil},
		{"trailing bytes", `{"fun": 1} x`, false, nil},
		{"unterminated", `{"fun": "x`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([][]byte, len(keys))
			if ok := Members([]byte(tc.raw), keys, out); ok != tc.ok {
				t.Fatalf("Members = %v, want %v", ok, tc.ok)
			}
			if tc.ok != json.Valid([]byte(tc.raw)) && tc.raw != `["fun", 1]` {
				t.Fatalf("test case: ok %v but json.Valid %v", tc.ok, json.Valid([]byte(tc.raw)))
			}
			for i, w := range tc.want {
				if string(out[i]) != w || (w == "") != (out[i] == nil) {
					t.Errorf("%s = %q, want %q", keys[i], out[i], w)
				}
			}
		})
	}
}
