package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"
)

func TestMsgIDVector(t *testing.T) {
	sum := sha256.Sum256([]byte("salt/job/1/ret/web1\x00" + `{"a":"é<>","b":[1,2.50],"c":{"_stamp":"nested"}}`))
	want := hex.EncodeToString(sum[:])[:32]
	for _, data := range []string{
		`{"_stamp": "2026-11-22T01:00:00.000001", "b": [1, 2.50], "a": "é<>", "c": {"_stamp": "nested"}}`,
		`{"c":{"_stamp":"nested"},"a":"\u00e9\u003c\u003e","b":[1,2.50],"_stamp":"2026-11-22T09:09:09.999999"}`,
		"{\n  \"a\": \"é<>\",\n  \"b\": [ 1, 2.50 ],\n  \"c\": { \"_stamp\": \"nested\" }\n}",
	} {
		if got := MsgID("salt/job/1/ret/web1", json.RawMessage(data)); got != want {
			t.Errorf("MsgID(%s) = %s, want %s", data, got, want)
		}
	}
}

func TestMsgIDDistinguishes(t *testing.T) {
	base := MsgID("a/b", json.RawMessage(`{"x": 1, "_stamp": "s1"}`))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(base) {
		t.Fatalf("id %q is not 32 lowercase hex digits", base)
	}
	for name, id := range map[string]string{
		"other tag":         MsgID("a/c", json.RawMessage(`{"x": 1, "_stamp": "s1"}`)),
		"other value":       MsgID("a/b", json.RawMessage(`{"x": 2, "_stamp": "s1"}`)),
		"other number text": MsgID("a/b", json.RawMessage(`{"x": 1.0, "_stamp": "s1"}`)),
		"extra key":         MsgID("a/b", json.RawMessage(`{"x": 1, "y": null, "_stamp": "s1"}`)),
		"nested stamp":      MsgID("a/b", json.RawMessage(`{"x": 1, "d": {"_stamp": "s1"}}`)),
		"tag/data boundary": MsgID("a/b{", json.RawMessage(`{"x": 1}`)),
	} {
		if id == base {
			t.Errorf("%s: same id as the base event", name)
		}
	}
	if MsgID("n", json.RawMessage(`{"n": 12345678901234567891}`)) == MsgID("n", json.RawMessage(`{"n": 12345678901234567890}`)) {
		t.Error("integers beyond float64 precision collapse")
	}
	if MsgID("a/b", json.RawMessage(`{"x": 1, "_stamp": "s2"}`)) != base {
		t.Error("_stamp changes the id")
	}
	// Not JSON: the raw bytes are hashed, deterministically.
	broken := MsgID("a", json.RawMessage(`{oops`))
	if broken != MsgID("a", []byte(`{oops`)) || broken == MsgID("a", json.RawMessage(`{oops2`)) {
		t.Error("fallback for invalid JSON is not a hash of the bytes")
	}
	if MsgID("a", json.RawMessage(`{} {}`)) == MsgID("a", json.RawMessage(`{}`)) {
		t.Error("trailing data ignored")
	}
}

// TestMsgIDTestdata: every testdata event keeps its id when another master
// restamps and re-lays it out.
func TestMsgIDTestdata(t *testing.T) {
	for i, ev := range loadEvents(t, testdataFile) {
		other := restamp(t, ev, "1999-01-01T00:00:00.000000")
		if MsgID(ev.Tag, ev.Data) != MsgID(other.Tag, other.Data) {
			t.Errorf("event %d (%s): id changes with _stamp/layout", i, ev.Tag)
		}
	}
}
