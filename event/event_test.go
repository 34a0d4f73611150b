package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// stdDecode is the reference: encoding/json with UseNumber, then
// NormalizeNumbers.
func stdDecode(raw []byte) (map[string]any, error) {
	if !json.Valid(raw) {
		return nil, errSyntax
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errSyntax
	}
	if _, err := dec.Token(); err == nil {
		return nil, errSyntax
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errSyntax
	}
	NormalizeNumbers(m)
	return m, nil
}

func TestDecodeData(t *testing.T) {
	cases := []struct {
		name, in string
		want     map[string]any
		err      string
	}{
		{"ints", `{"a": 1, "b": -2, "c": 0}`, map[string]any{"a": int64(1), "b": int64(-2), "c": int64(0)}, ""},
		{"big int", `{"a": 123456789012345678901234567890}`, map[string]any{"a": json.Number("123456789012345678901234567890")}, ""},
		{"floats", `{"a": 1.5, "b": 1e3, "c": -0.25E-2}`, map[string]any{"a": 1.5, "b": 1000.0, "c": -0.0025}, ""},
		{"strings", `{"a": "x\ny", "b": "\u00e9", "c": "é", "d": "\ud83d\ude00"}`, map[string]any{"a": "x\ny", "b": "é", "c": "é", "d": "😀"}, ""},
		{"nested", `{"a": {"b": [1, "x", null, true, false, {}]}}`, map[string]any{"a": map[string]any{"b": []any{int64(1), "x", nil, true, false, map[string]any{}}}}, ""},
		{"empty", `{}`, map[string]any{}, ""},
		{"null data", `null`, map[string]any{}, ""},
		{"list", `[1]`, nil, "Salt requires a dictionary"},
		{"string", `"x"`, nil, "Salt requires a dictionary"},
		{"trailing", `{} x`, nil, "trailing"},
		{"bad number", `{"a": 01}`, nil, "invalid"},
		{"unterminated", `{"a": "x`, nil, "unterminated"},
		{"control char", "{\"a\": \"x\x01\"}", nil, "control"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeData([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want it to contain %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestDecodeEnvelope(t *testing.T) {
	cases := []struct {
		name, in, tag string
		data          map[string]any
		err           string
	}{
		{"json", `{"tag": "salt/auth", "data": {"id": "web1"}}`, "salt/auth", map[string]any{"id": "web1"}, ""},
		{"data first", `{"data": {"id": "web1"}, "tag": "a/b"}`, "a/b", map[string]any{"id": "web1"}, ""},
		{"escaped tag", `{"tag": "a\/b\u0021", "data": {}}`, "a/b!", map[string]any{}, ""},
		{"no data", `{"tag": "x"}`, "x", map[string]any{}, ""},
		{"extra members", `{"tag": "x", "headers": {"a": [1, 2]}, "data": {"k": 1}}`, "x", map[string]any{"k": int64(1)}, ""},
		{"state.event line", "salt/job/1/new\t{\"jid\": \"1\"}", "salt/job/1/new", map[string]any{"jid": "1"}, ""},
		{"no tag", `{"data": {}}`, "", nil, "no tag"},
		{"empty tag", `{"tag": "", "data": {}}`, "", nil, "no tag"},
		{"tag not string", `{"tag": 5, "data": {}}`, "", nil, "tag is not a string"},
		{"broken", `{"tag": "x", "data": {`, "", nil, "malformed"},
		{"data not object", `{"tag": "x", "data": [1]}`, "", nil, "dictionary"},
		{"garbage", `hello`, "", nil, "neither"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Decode([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want it to contain %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Tag != c.tag || !reflect.DeepEqual(ev.Data, c.data) {
				t.Fatalf("got %q %#v", ev.Tag, ev.Data)
			}
		})
	}
}

func FuzzDecoderMatchesStdlib(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,2.5,"x",null,true]}`, `{"a":{"b":"\u00e9\n"}}`, `{"a":1e400}`, `{"a":-0}`, `{}`, `[]`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1,}`, `{"a" 1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeData([]byte(s))
		want, werr := stdDecode(bytes.TrimSpace([]byte(s)))
		if strings.TrimSpace(s) == "" || strings.TrimSpace(s) == "null" {
			return
		}
		if errors.Is(err, ErrInvalidUTF8) {
			// Refused on purpose where encoding/json substitutes U+FFFD:
			// the stdlib must have accepted it only by substituting.
			if werr == nil && utf8.ValidString(s) && !strings.Contains(fmt.Sprint(want), "\uFFFD") {
				t.Fatalf("%q: refused as invalid UTF-8, stdlib decodes %#v without substitution", s, want)
			}
			return
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: fast err %v, stdlib err %v", s, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %#v, stdlib %#v", s, got, want)
		}
	})
}

// TestInvalidUTF8 checks that a string that is not valid UTF-8 anywhere in
// an event makes it malformed, whichever way it is read.
func TestInvalidUTF8(t *testing.T) {
	cases := []struct {
		name, in string
		bad      bool
	}{
		{"tag raw byte", "{\"tag\": \"web\xff\xfe\", \"data\": {}}", true},
		{"tag truncated sequence", "{\"tag\": \"web\xc3\", \"data\": {}}", true},
		{"data value", "{\"tag\": \"a/b\", \"data\": {\"id\": \"web\xff\"}}", true},
		{"data key", "{\"tag\": \"a/b\", \"data\": {\"i\xffd\": 1}}", true},
		{"nested list", "{\"tag\": \"a/b\", \"data\": {\"x\": [1, {\"y\": [\"\xed\xa0\x80\"]}]}}", true},
		{"other member", "{\"tag\": \"a/b\", \"headers\": {\"h\": \"\x80\"}, \"data\": {}}", true},
		{"overlong encoding", "{\"tag\": \"a/\xc0\xaf\", \"data\": {}}", true},
		{"lone low surrogate escape", `{"tag": "a/b", "data": {"id": "web\udc80"}}`, true},
		{"lone high surrogate escape", `{"tag": "a/\ud83d", "data": {}}`, true},
		{"high surrogate then letter", `{"tag": "a/b", "data": {"id": "\ud83dx"}}`, true},
		{"two high surrogates", `{"tag": "a/b", "data": {"id": "\ud83d\ud83d"}}`, true},
		{"state.event line tag", "web\xff/start\t{}", true},
		{"state.event line data", "a/b\t{\"id\": \"\xff\"}", true},
		{"valid multibyte", `{"tag": "web/été/😀", "data": {"id": "日本"}}`, false},
		{"surrogate pair escape", `{"tag": "a/\ud83d\ude00", "data": {"x": "\uD83D\uDE00"}}`, false},
		{"escaped replacement character", `{"tag": "a/\ufffd", "data": {"x": "\ufffd"}}`, false},
		{"escaped backslash then u", `{"tag": "a/b", "data": {"x": "\\udc80"}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.in))
			if !c.bad {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidUTF8) {
				t.Fatalf("Decode: err = %v, want ErrInvalidUTF8", err)
			}
			if c.in[0] == '{' {
				if _, _, err := SplitEnvelope([]byte(c.in)); !errors.Is(err, ErrInvalidUTF8) {
					t.Fatalf("SplitEnvelope: err = %v, want ErrInvalidUTF8", err)
				}
			}
		})
	}
}

func TestMapOrderAndJSON(t *testing.T) {
	m := NewMap(2)
	m.Set("b", int64(1))
	m.Set("a", []any{"x", 1.5, nil, true})
	m.Set("b", "again")
	sub := NewMap(1)
	sub.Set("k", 1.0)
	m.Set("c", sub)
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":"again","a":["x",1.5,null,true],"c":{"k":1.0}}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	c := m.Clone()
	c.Delete("b")
	if m.Len() != 3 || c.Len() != 2 || c.Keys()[0] != "a" {
		t.Fatalf("clone/delete: %q %q", m.Keys(), c.Keys())
	}
}

func FuzzSplitEnvelopeMatchesStdlib(f *testing.F) {
	for _, s := range []string{`{"tag":"a","data":{"x":[1,{"y":"\u00e9"}]}}`, `{"tag":"a","other":{"x":"\q"}}`, `{"tag":"a","other":[1,]}`, `{"tag":"a","other":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, err := SplitEnvelope([]byte(s))
		var v map[string]any
		werr := json.Unmarshal([]byte(s), &v)
		if err == nil && werr != nil {
			t.Fatalf("%q: accepted, stdlib says %v", s, werr)
		}
	})
}

func TestMinionOf(t *testing.T) {
	cases := []struct {
		tag, data, want string
	}{
		{"salt/job/2026/ret/web1", `{}`, "web1"},
		{"salt/job/2026/new", `{"id": "x"}`, "x"},
		{"salt/minion/web2/start", `{}`, "web2"},
		{"salt/beacon/db1/inotify//etc/x", `{}`, "db1"},
		{"salt/auth", `{"act": "pend", "nested": {"id": "no"}, "id": "web3"}`, "web3"},
		{"salt/auth", `{"id": 5}`, ""},
		{"custom", `not json`, ""},
	}
	for _, c := range cases {
		if got := MinionOf(c.tag, []byte(c.data)); got != c.want {
			t.Errorf("MinionOf(%q, %s) = %q, want %q", c.tag, c.data, got, c.want)
		}
	}
}

// TestHugeIntegerRefused: an integer beyond Python's 4,300 digits makes
// the envelope malformed at once, as Python's json.loads refuses it,
// instead of costing seconds of CPU each time a template prints it.
func TestHugeIntegerRefused(t *testing.T) {
	for _, c := range []struct {
		digits int
		neg    bool
		ok     bool
	}{{4300, false, true}, {4300, true, true}, {4301, false, false}, {1000000, true, false}} {
		n := strings.Repeat("7", c.digits)
		if c.neg {
			n = "-" + n
		}
		line := []byte(`{"tag": "myco/n", "data": {"id": "web1", "n": ` + n + `}}`)
		_, _, err := SplitEnvelope(line)
		if (err == nil) != c.ok {
			t.Errorf("%d digits (negative %v): %v, want ok=%v", c.digits, c.neg, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "4300 digits") {
			t.Errorf("%d digits: error %q does not name the limit", c.digits, err)
		}
		if _, err := Decode(line); (err == nil) != c.ok {
			t.Errorf("Decode, %d digits: %v, want ok=%v", c.digits, err, c.ok)
		}
	}
}

// TestDuplicateKeysLastWins: a key given twice means its last value
// everywhere, as Python's json (and so Salt) reads it: the event's minion
// (lanes, the loop guard, partitions) agrees with what templates see.
func TestDuplicateKeysLastWins(t *testing.T) {
	line := []byte(`{"tag": "myco/x", "data": {"id": "a", "n": 1, "id": "b"}}`)
	tag, raw, err := SplitEnvelope(line)
	if err != nil {
		t.Fatal(err)
	}
	if m := MinionOf(tag, raw); m != "b" {
		t.Errorf("MinionOf = %q, want b (the last id)", m)
	}
	ev, err := Decode(line)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Data["id"] != "b" {
		t.Errorf("decoded id = %v, want b", ev.Data["id"])
	}
	if m := MinionOf("myco/x", []byte(`{"id": "a\u0062"}`)); m != "ab" {
		t.Errorf("an escaped id: %q, want ab", m)
	}
}
