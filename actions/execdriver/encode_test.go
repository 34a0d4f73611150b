package execdriver

import (
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

func omap(kv ...any) *event.Map {
	m := event.NewMap(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Set(kv[i].(string), kv[i+1])
	}
	return m
}

// TestArgText pins the text of each kind of value. What Salt makes of these
// texts (parse_input + yamlify_arg under PyYAML) was checked against PyYAML
// when the table was written; the comments give the Python value.
func TestArgText(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"plain word", "web1", "web1"},
		{"path", "/srv/salt/top.sls", "/srv/salt/top.sls"},
		{"salt url", "salt://top.sls", "salt://top.sls"},
		{"command with spaces", "ls -l /tmp", "ls -l /tmp"},
		{"state name", "pkg.installed", "pkg.installed"},
		{"glob", "web*", "web*"},
		{"empty string", "", `""`},
		{"digits stay a string", "123", `"123"`},
		{"float-looking string", "1.5", `"1.5"`},
		{"yaml bool word", "yes", `"yes"`},
		{"yaml bool word off", "Off", `"Off"`},
		{"None word", "None", `"None"`},
		{"null word", "null", `"null"`},
		{"key=value string stays positional", "x=y", `"x=y"`},
		{"leading dash", "-rf", `"-rf"`},
		{"hash", "a#b", `"a\x23b"`},
		{"tab", "a\tb", `"a\tb"`},
		{"newline", "a\nb", `"a\nb"`},
		{"quote and backslash", `say "hi" \o/`, `"say \"hi\" \\o/"`},
		{"colon space", "a: b", `"a: b"`},
		{"trailing colon", "a:", `"a:"`},
		{"leading space", " a", `" a"`},
		{"bracket", "[1]", `"[1]"`},
		{"brace", "{a: 1}", `"{a: 1}"`},
		{"non-ascii", "café", `"café"`},
		{"control char", "a\x01b", `"a\x01b"`},
		{"nel", "a\u0085b", `"a\x85b"`},
		{"line separator", "a\u2028b", `"a\u2028b"`},
		{"timestamp-looking", "2026-11-22", `"2026-11-22"`},
		{"underscored digits", "1_000", `"1_000"`},
		{"int", int64(5), "5"},
		{"negative int", int64(-7), "-7"},
		{"big json int", json.Number("123456789012345678901234567890"), "123456789012345678901234567890"},
		{"json float", json.Number("2.50"), "2.5"},
		{"big int", new(big.Int).Lsh(big.NewInt(1), 70), "1180591620717411303424"},
		{"float", 1.5, "1.5"},
		{"integral float", 2.0, "2.0"},
		{"large float", 1e16, "1.0e+16"},
		{"small float", 1e-05, "1.0e-05"},
		{"inf", math.Inf(1), ".inf"},
		{"-inf", math.Inf(-1), "-.inf"},
		{"nan", math.NaN(), ".nan"},
		{"true", true, "true"},
		{"false", false, "false"},
		{"nil", nil, "null"},
		{"list", []any{"a", int64(1), true, nil, "x#y"}, `["a", 1, true, null, "x\x23y"]`},
		{"empty list", []any{}, "[]"},
		{"mapping", omap("k", "v", "n", int64(2), "l", []any{1.5}), `{"k": "v", "n": 2, "l": [1.5]}`},
		{"empty mapping", omap(), "{}"},
		{"go map sorted", map[string]any{"b": int64(1), "a": "x"}, `{"a": "x", "b": 1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := argText(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("argText(%#v) = %s, want %s", c.in, got, c.want)
			}
			if strings.ContainsAny(got, "\t\r\n#") {
				t.Fatalf("argText(%#v) = %q holds a character yamlify_arg treats specially", c.in, got)
			}
		})
	}
}

func TestArgTextRefuses(t *testing.T) {
	for _, in := range []any{"\xff\xfe", struct{}{}, []any{make(chan int)}} {
		if got, err := argText(in); err == nil {
			t.Errorf("argText(%#v) = %q, want an error", in, got)
		}
	}
	deep := any("x")
	for range maxDepth + 2 {
		deep = []any{deep}
	}
	if _, err := argText(deep); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
}

func TestKwargText(t *testing.T) {
	for _, c := range []struct{ key, val any }{
		{"runas", "root"}, {"timeout", int64(30)}, {"pillar", omap("x", "1")}, {"_private.k-1", "v"}, {"clé", "v"},
	} {
		got, err := kwargText(c.key.(string), c.val)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := argText(c.val)
		if got != c.key.(string)+"="+want {
			t.Errorf("kwargText(%v, %v) = %q", c.key, c.val, got)
		}
	}
	for _, key := range []string{"", "1st", "a b", "-x", "a=b", "x/y"} {
		if _, err := kwargText(key, "v"); err == nil {
			t.Errorf("kwargText(%q) accepted", key)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 8}
	for _, s := range []string{"abc", "defgh", "ij", "0123456789AB"} {
		_, _ = tb.Write([]byte(s))
	}
	if got := string(tb.Bytes()); got != "456789AB" {
		t.Fatalf("tail = %q", got)
	}
	tb = &tailBuffer{max: 8}
	_, _ = tb.Write([]byte("abcdef"))
	_, _ = tb.Write([]byte("ghij"))
	if got := string(tb.Bytes()); got != "cdefghij" {
		t.Fatalf("tail = %q", got)
	}
}

func TestLastLines(t *testing.T) {
	got := lastLines([]byte("one\n\n  two  \nthree\nfour\n"), 3)
	if got != "two | three | four" {
		t.Fatalf("lastLines = %q", got)
	}
}
