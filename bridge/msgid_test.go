package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestMsgIDVector: the id is sha256(tag NUL canonical data with _stamp),
// whatever the JSON layout (Salt's socket via msgpack, salt-api's JSON).
func TestMsgIDVector(t *testing.T) {
	sum := sha256.Sum256([]byte("salt/job/1/ret/web1\x00" + `{"_stamp":"2026-11-22T01:00:00.000001","a":"é<>","b":[1,2.50],"c":{"_stamp":"nested"}}`))
	want := hex.EncodeToString(sum[:])[:32]
	for _, data := range []string{
		`{"_stamp": "2026-11-22T01:00:00.000001", "b": [1, 2.50], "a": "é<>", "c": {"_stamp": "nested"}}`,
		`{"c":{"_stamp":"nested"},"a":"\u00e9\u003c\u003e","b":[1,2.50],"_stamp":"2026-11-22T01:00:00.000001"}`,
		"{\n  \"a\": \"é<>\",\n  \"_stamp\": \"2026-11-22T01:00:00.000001\",\n  \"b\": [ 1, 2.50 ],\n  \"c\": { \"_stamp\": \"nested\" }\n}",
	} {
		if got := MsgID("salt/job/1/ret/web1", json.RawMessage(data)); got != want {
			t.Errorf("MsgID(%s) = %s, want %s", data, got, want)
		}
	}
}

// TestMsgIDOneEmission: the same emission has one id; a repeat stamped
// later by the master (or a second master's copy) has another.
func TestMsgIDOneEmission(t *testing.T) {
	const tag = "salt/beacon/web1/inotify//etc/important_file"
	ev := `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000001"}`
	base := MsgID(tag, json.RawMessage(ev))
	if !hex32.MatchString(base) {
		t.Fatalf("id %q is not 32 lowercase hex digits", base)
	}
	if again := MsgID(tag, json.RawMessage(ev)); again != base {
		t.Errorf("same emission: %s then %s", base, again)
	}
	seen := map[string]string{base: "base"}
	for name, data := range map[string]string{
		"10 s later":           `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:10.000001"}`,
		"1 µs later":           `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000002"}`,
		"other value":          `{"change": "IN_DELETE", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000001"}`,
		"other number text":    `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000001", "n": 1.0}`,
		"extra key":            `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000001", "y": null}`,
		"nested stamp differs": `{"change": "IN_MODIFY", "id": "web1", "path": "/etc/important_file", "_stamp": "2026-11-22T01:00:00.000001", "d": {"_stamp": "x"}}`,
	} {
		id := MsgID(tag, json.RawMessage(data))
		if prev, dup := seen[id]; dup {
			t.Errorf("%s: same id as %s", name, prev)
		}
		seen[id] = name
	}
	if MsgID(tag+"x", json.RawMessage(ev)) == base {
		t.Error("other tag: same id")
	}
	if MsgID("a/b{", json.RawMessage(`{"_stamp":"s"}`)) == MsgID("a/b", json.RawMessage(`{{"_stamp":"s"}`)) {
		t.Error("tag/data boundary")
	}
	if MsgID("n", json.RawMessage(`{"_stamp":"s","n": 12345678901234567891}`)) == MsgID("n", json.RawMessage(`{"_stamp":"s","n": 12345678901234567890}`)) {
		t.Error("integers beyond float64 precision collapse")
	}
}

// TestMsgIDWithoutStamp: data with no master stamp has no id, and the
// bridge gives each receipt its own random one.
func TestMsgIDWithoutStamp(t *testing.T) {
	for _, data := range []string{
		`{"x": 1}`, `{"x": 1, "_stamp": ""}`, `{"x": 1, "_stamp": 5}`, `{"x": {"_stamp": "nested"}}`,
		`[1, 2]`, `"text"`, `{oops`, `{"_stamp": "s"} {}`,
	} {
		if id := MsgID("a/b", json.RawMessage(data)); id != "" {
			t.Errorf("MsgID(%s) = %q, want \"\"", data, id)
		}
	}
	a, b := receiptID("a/b", json.RawMessage(`{"x": 1}`)), receiptID("a/b", json.RawMessage(`{"x": 1}`))
	if !hex32.MatchString(a) || !hex32.MatchString(b) || a == b {
		t.Errorf("receipt ids of an unstamped event: %q, %q: want two different random ids", a, b)
	}
	stamped := json.RawMessage(`{"x": 1, "_stamp": "2026-11-22T01:00:00.000001"}`)
	if receiptID("a/b", stamped) != MsgID("a/b", stamped) {
		t.Error("a stamped event's receipt id is not its MsgID")
	}
}

// TestMsgIDTestdata: every testdata event keeps its id when re-laid out with
// its own stamp, and changes it when restamped.
func TestMsgIDTestdata(t *testing.T) {
	for i, ev := range loadEvents(t, testdataFile) {
		var d map[string]any
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		stamp, _ := d["_stamp"].(string)
		if stamp == "" {
			t.Fatalf("event %d (%s) has no _stamp", i, ev.Tag)
		}
		id := MsgID(ev.Tag, ev.Data)
		if same := restamp(t, ev, stamp); MsgID(same.Tag, same.Data) != id || id == "" {
			t.Errorf("event %d (%s): id changes with the JSON layout", i, ev.Tag)
		}
		if other := restamp(t, ev, "1999-01-01T00:00:00.000000"); MsgID(other.Tag, other.Data) == id {
			t.Errorf("event %d (%s): id ignores _stamp", i, ev.Tag)
		}
	}
}

// TestCopyKey: two masters' copies of one event (same tag and data, each
// with its own _stamp) have one key and their stamps; other data, another
// tag or no stamp do not match.
func TestCopyKey(t *testing.T) {
	const tag = "salt/beacon/web1/inotify//etc/f"
	a, sa, ok1 := CopyKey(tag, json.RawMessage(`{"id": "web1", "change": "IN_MODIFY", "_stamp": "2026-11-23T10:00:00.123456"}`))
	b, sb, ok2 := CopyKey(tag, json.RawMessage(`{"_stamp": "2026-11-23T10:00:00", "change": "IN_MODIFY", "id": "web1"}`))
	if !ok1 || !ok2 || a != b || !hex32.MatchString(a) {
		t.Fatalf("copies: %q %v, %q %v", a, ok1, b, ok2)
	}
	if d := sa.Sub(sb); d != 123456*time.Microsecond {
		t.Fatalf("stamps %v and %v", sa, sb)
	}
	if a == MsgID(tag, json.RawMessage(`{"id": "web1", "change": "IN_MODIFY", "_stamp": "2026-11-23T10:00:00.123456"}`)) {
		t.Error("CopyKey equals MsgID: the stamp was kept")
	}
	for name, data := range map[string]string{
		"other data": `{"id": "web1", "change": "IN_DELETE", "_stamp": "2026-11-23T10:00:00"}`,
		"no stamp":   `{"id": "web1", "change": "IN_MODIFY"}`,
		"bad stamp":  `{"id": "web1", "change": "IN_MODIFY", "_stamp": "yesterday"}`,
	} {
		if k, _, ok := CopyKey(tag, json.RawMessage(data)); ok && k == a {
			t.Errorf("%s: same key", name)
		}
	}
	if k, _, _ := CopyKey(tag+"x", json.RawMessage(`{"id": "web1", "change": "IN_MODIFY", "_stamp": "2026-11-23T10:00:00"}`)); k == a {
		t.Error("other tag: same key")
	}
}

// TestMsgIDClusterCopies: the members of a Salt 3007 master cluster each
// fire every event; a peer's copy keeps the data and _stamp of the member
// that fired it first and adds "__peer_id" (seen on real Salt 3007.1: the
// return of web2, connected to 127.0.0.3, on all three members). The
// copies have one MsgID and one CopyKey; a nested "__peer_id", another
// stamp or other data still tell events apart.
func TestMsgIDClusterCopies(t *testing.T) {
	const tag = "salt/job/20261128201345680243/ret/web2"
	origin := `{"id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": false, "retcode": 1, "_stamp": "2026-11-28T20:13:48.008905"}`
	id := MsgID(tag, json.RawMessage(origin))
	key, _, ok := CopyKey(tag, json.RawMessage(origin))
	if id == "" || !ok {
		t.Fatalf("origin copy: MsgID %q, CopyKey ok %v", id, ok)
	}
	for _, tc := range []struct {
		name, data string
		same       bool
	}{
		{"a peer's copy", `{"id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": false, "retcode": 1, "_stamp": "2026-11-28T20:13:48.008905", "__peer_id": "127.0.0.3"}`, true},
		{"another peer's copy", `{"__peer_id": "127.0.0.4", "_stamp": "2026-11-28T20:13:48.008905", "id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": false, "retcode": 1}`, true},
		{"nested __peer_id", `{"id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": false, "retcode": 1, "_stamp": "2026-11-28T20:13:48.008905", "x": {"__peer_id": "127.0.0.3"}}`, false},
		{"a later emission", `{"id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": false, "retcode": 1, "_stamp": "2026-11-28T20:13:49.008905", "__peer_id": "127.0.0.3"}`, false},
		{"other data", `{"id": "web2", "jid": "20261128201345680243", "fun": "state.apply", "success": true, "retcode": 0, "_stamp": "2026-11-28T20:13:48.008905", "__peer_id": "127.0.0.3"}`, false},
	} {
		gotID := MsgID(tag, json.RawMessage(tc.data))
		if (gotID == id) != tc.same {
			t.Errorf("%s: MsgID %s, origin's %s: want same %v", tc.name, gotID, id, tc.same)
		}
		k, _, _ := CopyKey(tag, json.RawMessage(tc.data))
		if wantKey := tc.same || tc.name == "a later emission"; (k == key) != wantKey {
			t.Errorf("%s: CopyKey %s, origin's %s: want same %v", tc.name, k, key, wantKey)
		}
	}
}
