package yaml11

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

func TestNodes(t *testing.T) {
	src := `%TAG !e! tag:example.com,2000:
---
plain: web1
sq: 'a''b'
dq: "x\ty"
lit: |
  l1
tagged: !!str 010
local: !foo x
verb: !<tag:yaml.org,2002:int> "7"
ns: ! "010"
ns2: &a ! '1'
ns3: ! &b |
  2
ext: !e!thing y
flow: [1, {k: v}]
block:
  - 1
`
	n, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if n.Kind != MappingNode || n.Style != Plain || n.Line != 3 || n.Column != 1 {
		t.Fatalf("root = %+v", n)
	}
	want := []struct {
		key        string
		kind       Kind
		style      Style
		tag, text  string
		line, col  int
		keyL, keyC int
	}{
		{"plain", ScalarNode, Plain, "", "web1", 3, 8, 3, 1},
		{"sq", ScalarNode, SingleQuoted, "", "a'b", 4, 5, 4, 1},
		{"dq", ScalarNode, DoubleQuoted, "", "x\ty", 5, 5, 5, 1},
		{"lit", ScalarNode, Literal, "", "l1\n", 6, 6, 6, 1},
		{"tagged", ScalarNode, Plain, TagStr, "010", 8, 9, 8, 1},
		{"local", ScalarNode, Plain, "!foo", "x", 9, 8, 9, 1},
		{"verb", ScalarNode, DoubleQuoted, TagInt, "7", 10, 7, 10, 1},
		{"ns", ScalarNode, DoubleQuoted, "!", "010", 11, 5, 11, 1},
		{"ns2", ScalarNode, SingleQuoted, "!", "1", 12, 6, 12, 1},
		{"ns3", ScalarNode, Literal, "!", "2\n", 13, 6, 13, 1},
		{"ext", ScalarNode, Plain, "tag:example.com,2000:thing", "y", 15, 6, 15, 1},
		{"flow", SequenceNode, Flow, "", "", 16, 7, 16, 1},
		{"block", SequenceNode, Plain, "", "", 18, 3, 17, 1},
	}
	if len(n.Content) != 2*len(want) {
		t.Fatalf("got %d pairs", len(n.Content)/2)
	}
	for i, w := range want {
		k, v := n.Content[2*i], n.Content[2*i+1]
		if k.Text != w.key || k.Line != w.keyL || k.Column != w.keyC {
			t.Errorf("key %d = %q at %d:%d, want %q at %d:%d", i, k.Text, k.Line, k.Column, w.key, w.keyL, w.keyC)
		}
		if v.Kind != w.kind || v.Style != w.style || v.Tag != w.tag || v.Text != w.text || v.Line != w.line || v.Column != w.col {
			t.Errorf("%s = {%v %v %q %q %d:%d}, want {%v %v %q %q %d:%d}", w.key, v.Kind, v.Style, v.Tag, v.Text, v.Line, v.Column,
				w.kind, w.style, w.tag, w.text, w.line, w.col)
		}
	}
	for i, want := range map[int]any{0: "web1", 1: "a'b", 4: "010", 6: int64(7), 7: int64(10), 8: int64(1), 9: int64(2)} {
		if got := mustValue(t, n.Content[2*i+1]); got != want {
			t.Errorf("%s = %#v, want %#v", want, got, want)
		}
	}
	if _, err := n.Content[2*5+1].Value(); err == nil || !strings.Contains(err.Error(), "could not determine a constructor for the tag '!foo'") {
		t.Errorf("!foo: %v", err)
	}
}

func TestNonSpecificTagOnCollections(t *testing.T) {
	for src, want := range map[string]string{
		"! [a]":              "!",
		"! {a: 1}":           "!",
		"!\na: 1\n":          "!",
		"&x !\na: 1\n":       "!",
		"! a: 1\n":           "",
		"&k ! a: 1\n":        "",
		"!!map\na: 1\n":      TagMap,
		"- ! [a]\n":          "",
		"[a]":                "",
		"# ! c\n[a]":         "",
		"&a # c\n! # c\n[a]": "!",
	} {
		n, err := Parse([]byte(src))
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if n.Tag != want {
			t.Errorf("Parse(%q).Tag = %q, want %q", src, n.Tag, want)
		}
	}
	n, err := Parse([]byte("! a: 1\n"))
	if err != nil || n.Content[0].Tag != "!" {
		t.Errorf("key tag: %v %v", n, err)
	}
	n, err = Parse([]byte("- ! [a]\n"))
	if err != nil || n.Content[0].Tag != "!" {
		t.Errorf("item tag: %v %v", n, err)
	}
}

func mustValue(t *testing.T, n *Node) any {
	t.Helper()
	v, err := n.Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAliasesShareNodes(t *testing.T) {
	n, err := Parse([]byte("a: &x {k: [1, 2]}\nb: *x\nc: [*x, *x]\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := n.Content[1], n.Content[3]
	if a != b || n.Content[5].Content[0] != a || n.Content[5].Content[1] != a {
		t.Fatal("aliases are not the anchored node")
	}
	if b.Line != 1 || b.Column != 4 {
		t.Errorf("alias position %d:%d, want the anchor's 1:4", b.Line, b.Column)
	}
	m := mustValue(t, n).(*Map)
	va, _ := m.Get("a")
	vb, _ := m.Get("b")
	if va.(*Map) != vb.(*Map) {
		t.Error("shared nodes should give the shared value")
	}
}

func TestAliasBomb(t *testing.T) {
	// 2^40 leaves if expanded naively.
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x]\n")
	for i := 1; i <= 40; i++ {
		b.WriteString("l" + itoa(i) + ": &l" + itoa(i) + " [*l" + itoa(i-1) + ", *l" + itoa(i-1) + "]\n")
	}
	n, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Value(); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }

func TestMergeKeyNodes(t *testing.T) {
	src := "b1: &b1 {a: 1, z: 0}\nb2: &b2 {b: 2, a: 9}\nx:\n  <<: [*b1, *b2]\n  z: 5\n  c: 3\n"
	n, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	x := n.Content[5]
	var keys []string
	for i := 0; i < len(x.Content); i += 2 {
		keys = append(keys, x.Content[i].Text)
	}
	// Salt: merged pairs first (later mappings of the list first), minus
	// the keys written explicitly, then the explicit pairs.
	if got := strings.Join(keys, ","); got != "b,a,a,z,c" {
		t.Errorf("flattened keys %s", got)
	}
	if _, err := x.Value(); err == nil || err.Error() != "yaml: line 1, column 10: found conflicting ID 'a'" {
		t.Errorf("merged duplicate: %v", err)
	}
	// The merge sources keep their content; a merged key node is the
	// source's node.
	if x.Content[0] != n.Content[3].Content[0] {
		t.Error("merged key is not the source node")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		// go.yaml.in/yaml/v3 only tells a line, for parser errors the line
		// of the enclosing context; Parse finds the problem (PyYAML's
		// problem mark, or the key a parser problem stops at), the open
		// bracket or quote, the tab.
		{"{: a, ~: b}", 1, 1, "did not find expected node content"},
		{"a: 1\nb: [1, 2\nc: 3\n", 2, 4, "did not find expected ',' or ']' (the [ opened here is not closed)"},
		{"a:\n  b: 1\n c: 2\n", 3, 2, "did not find expected key"},
		{"a: 1\n  b: 2\n", 2, 4, "mapping values are not allowed in this context"},
		{"x: 1\ny: \"abc\n", 2, 4, "unclosed quote: the string this \" starts is never closed (found unexpected end of stream); close it on line 2"},
		{"a: b: c", 1, 5, "mapping values are not allowed in this context"},
		{"- a\nb: 1", 2, 1, "did not find expected '-' indicator"},
		{"x:\n  - a\n  b: 1\n", 3, 3, "did not find expected '-' indicator"},
		{"x: \x01", 1, 4, "control characters are not allowed"},
		{"x: 1\ny: é\xff", 2, 5, "invalid leading UTF-8 octet"},
		{"a: 1\n\tb: 2", 2, 1, "found a tab character that violates indentation: YAML does not allow tabs here; indent with spaces"},
		{"a: !<x y", 1, 6, "did not find the expected '>'"},
		{"a: '", 1, 4, "unclosed quote: the string this ' starts is never closed (found unexpected end of stream); close it on line 1"},
		{"a: 1\nb: [x, *nope]\n", 2, 8, "found undefined alias 'nope'"},
		{"a: 1\n---\nb: 2\n", 2, 1, "expected a single document in the stream, but found another document"},
		{"a: 1\n---\n", 2, 1, "expected a single document in the stream, but found another document"},
		{"...\n", 1, 3, "did not find expected node content"},
		{"a: 1\n--- [\n", 3, 1, "did not find expected node content"},
		{"a: &x [1, *x]\n", 1, 11, "found recursive alias 'x' (a node containing itself is not supported)"},
		{"a: &x {b: *x}\n", 1, 11, "found recursive alias 'x' (a node containing itself is not supported)"},
		{"c:\n  <<: 1", 2, 7, "expected a mapping or list of mappings for merging, but found scalar"},
		{"c:\n  <<: [{a: 1}, [2]]", 2, 16, "expected a mapping for merging, but found sequence"},
	}
	for _, c := range cases {
		n, err := Parse([]byte(c.src))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, %v; want *Error", c.src, n, err)
			continue
		}
		if e.Line != c.line || e.Column != c.col || e.Msg != c.msg {
			t.Errorf("Parse(%q) error = %d:%d %q, want %d:%d %q", c.src, e.Line, e.Column, e.Msg, c.line, c.col, c.msg)
		}
	}
}

// TestNewcomerSyntaxErrors: the mistakes a new operator makes are reported
// where they are, with the fix (issue 10 #15).
func TestNewcomerSyntaxErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // "line:col message"
	}{
		{"quote left open runs into a later quote",
			"reactor:\n  - 'salt/minion/*/start':\n    - a.sls\n  - \"salt/auth:\n    - b.sls\n  - \"salt/x\":\n    - c.sls\n",
			"4:5 unclosed quote: the string this \" starts runs on to line 6 (mapping values are not allowed in this context); close it on line 4"},
		{"quote left open past a blank line",
			"a:\n  - 'b.sls\n\n  - 'c.sls':\n",
			"2:5 unclosed quote: the string this ' starts runs on to line 4 (mapping values are not allowed in this context); close it on line 2"},
		{"quote never closed",
			"reactor:\n  - 'salt/auth':\n    - \"a.sls\n    - b.sls\n",
			"3:7 unclosed quote: the string this \" starts is never closed (found unexpected end of stream); close it on line 3"},
		{"a multi-line quoted string is not blamed",
			"a: \"one\n  two\"\nb: [1\n",
			"3:4 did not find expected ',' or ']' (the [ opened here is not closed)"},
		{"quote in a plain scalar is text",
			"a: it's \"x\nb: c: d\n",
			"2:5 mapping values are not allowed in this context"},
		{"quote in a block scalar is text",
			"a: |\n  it \"is\nb: c: d\n",
			"3:5 mapping values are not allowed in this context"},
		{"tab indents a list item",
			"reactor:\n  - 'salt/minion/*/start':\n\t- a.sls\n",
			"3:1 found a tab character that cannot start any token: YAML does not allow tabs here; indent with spaces"},
		{"tab after spaces",
			"reactor:\n  - 'salt/minion/*/start':\n  \t- a.sls\n",
			"3:3 found a tab character that cannot start any token: YAML does not allow tabs here; indent with spaces"},
		{"tab where a key's indentation is",
			"a: 1\n\tb: 2\n",
			"2:1 found a tab character that violates indentation: YAML does not allow tabs here; indent with spaces"},
		{"reserved character",
			"a:\n  - @web\n",
			"2:5 found character '@' that cannot start any token; quote the value"},
		{"mis-indented list item: at the item, not the mapping",
			"restart:\n  local.service.restart:\n    - tgt: web1\n   - arg: [nginx]\n",
			"4:4 did not find expected key"},
		{"unquoted alias", "reactor:\n  - *start:\n    - a.sls\n", "2:5 found undefined alias 'start'"},
		{"star alone", "reactor:\n  - */start:\n    - a.sls\n", "2:5 did not find expected alphabetic or numeric character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v; want *Error", err)
			}
			if got := fmt.Sprintf("%d:%d %s", e.Line, e.Column, e.Msg); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestEmptyDocuments(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# just a comment\n", "---\n", "--- # c\n", "---\n...\n", "--- &a\n"} {
		n, err := Parse([]byte(src))
		if n != nil || err != nil {
			t.Errorf("Parse(%q) = %+v, %v; want nil, nil", src, n, err)
		}
	}
	for src, want := range map[string]any{"--- ~\n": nil, "--- !!str\n": "", "--- ''\n": "", "--- 1": int64(1)} {
		n, err := Parse([]byte(src))
		if err != nil || n == nil {
			t.Errorf("Parse(%q) = %v, %v", src, n, err)
			continue
		}
		if v := mustValue(t, n); v != want {
			t.Errorf("Parse(%q).Value() = %#v, want %#v", src, v, want)
		}
	}
}

func TestErrorString(t *testing.T) {
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{Line: 2, Column: 3, Msg: "m"}, "yaml: line 2, column 3: m"},
		{Error{Line: 2, Msg: "m"}, "yaml: line 2: m"},
		{Error{Msg: "m"}, "yaml: m"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v.Error() = %q, want %q", c.e, got, c.want)
		}
	}
}

func TestMapGet(t *testing.T) {
	n, err := Parse([]byte("{1: int, 2.5: float, no: bool, ~: none, s: str, 99999999999999999999: big, 1e3: x, .nan: nan}"))
	if err != nil {
		t.Fatal(err)
	}
	m := mustValue(t, n).(*Map)
	if m.Len() != 8 || len(m.KeyNodes) != 8 || m.KeyNodes[1].Text != "2.5" {
		t.Fatalf("map = %+v", m)
	}
	for _, c := range []struct {
		k    any
		want any
	}{
		{1, "int"}, {int64(1), "int"}, {1.0, "int"}, {true, "int"}, {0, "bool"}, {false, "bool"}, {0.0, "bool"},
		{2.5, "float"}, {nil, "none"}, {"s", "str"}, {"1e3", "x"},
		{bigInt("99999999999999999999"), "big"}, {float64(99999999999999999999), nil}, {1e20, nil},
		{"1", nil}, {"no", nil}, {math.NaN(), nil}, {[]any{}, nil},
	} {
		got, ok := m.Get(c.k)
		if c.want == nil {
			if ok {
				t.Errorf("Get(%#v) = %#v, want none", c.k, got)
			}
			continue
		}
		if !ok || got != c.want {
			t.Errorf("Get(%#v) = %#v, %v; want %#v", c.k, got, ok, c.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	// Python 3.11 repr() of the same doubles.
	for _, c := range []struct {
		f    float64
		want string
	}{
		{math.Float64frombits(0x0000000000000000), "0.0"},
		{math.Float64frombits(0x8000000000000000), "-0.0"},
		{math.Float64frombits(0x3ff0000000000000), "1.0"},
		{math.Float64frombits(0xbff8000000000000), "-1.5"},
		{math.Float64frombits(0x3fb999999999999a), "0.1"},
		{math.Float64frombits(0x4341c37937e08000), "1e+16"},
		{math.Float64frombits(0x430c6bf526340000), "1000000000000000.0"},
		{math.Float64frombits(0x42dc12218377de66), "123456789012345.6"},
		{math.Float64frombits(0x43118b54f22aeb00), "1234567890123456.0"},
		{math.Float64frombits(0x4345ee2a2eb5a5c4), "1.2345678901234568e+16"},
		{math.Float64frombits(0x3f1a36e2eb1c432d), "0.0001"},
		{math.Float64frombits(0x3ee4f8b588e368f1), "1e-05"},
		{math.Float64frombits(0x3f202e4b6ce5dc68), "0.00012345"},
		{math.Float64frombits(0x3e8421f5f40d8376), "1.5e-07"},
		{math.Float64frombits(0x0000000000000001), "5e-324"},
		{math.Float64frombits(0x7fefffffffffffff), "1.7976931348623157e+308"},
		{math.Float64frombits(0x4340000000000000), "9007199254740992.0"},
		{math.Float64frombits(0x43e0000000000000), "9.223372036854776e+18"},
		{math.Float64frombits(0x4480f0cf064dd592), "1e+22"},
		{math.Float64frombits(0x54b249ad2594c37d), "1e+100"},
		{math.Float64frombits(0x4341c37937e08000), "1e+16"},
		{math.Float64frombits(0x3fd3333333333334), "0.30000000000000004"},
		{math.Float64frombits(0x4164d8399f767c45), "10928588.983213553"},
		{math.Float64frombits(0x45440009e52a4221), "4.835739785214588e+25"},
		{math.Float64frombits(0xf1446beab0c11fde), "-4.155614901379009e+237"},
		{math.Float64frombits(0x436e550f711f2561), "6.8302192896453384e+16"},
		{math.Float64frombits(0x87b0b125ec1d7da0), "-1.2342180766211395e-271"},
		{math.Float64frombits(0xc0f6ff6f44fd74c2), "-94198.95434327706"},
		{math.Float64frombits(0xf17fd374c6a53877), "-5.18106033707157e+238"},
		{math.Float64frombits(0xbb82f6070f2b431b), "-5.018946878764845e-22"},
		{math.Float64frombits(0x2827688de6a16a3b), "2.9704598186234577e-115"},
		{math.Float64frombits(0xc1279ba82431f754), "-773588.0706937113"},
		{math.Float64frombits(0x3f1f65a8de527100), "0.0001197704619521657"},
		{math.Float64frombits(0xbc1198d6a9b7557a), "-2.384841659104697e-19"},
		{math.Float64frombits(0x3fd4235992edcf45), "0.3146575865605324"},
		{math.Float64frombits(0xbda569d8cd82cec6), "-9.737716208221956e-12"},
		{math.Float64frombits(0x478c281d687c966c), "4.6783340280605544e+36"},
		{math.Float64frombits(0xc65410583c64893c), "-6.358486724444426e+30"},
		{math.Float64frombits(0x63b229f1c4069545), "1.7548715433165102e+172"},
		{math.Float64frombits(0xc5819919c9f91ab0), "-6.807915752839235e+26"},
		{math.Float64frombits(0x238642ea126a1e48), "1.4954922073108653e-137"},
		{math.Float64frombits(0x40a26d0c224f4338), "2358.523699261623"},
		{math.Float64frombits(0x21da8978206f5c66), "1.3282314387596086e-145"},
		{math.Float64frombits(0xc65f7142df94b9b7), "-9.964502755949308e+30"},
		{math.Float64frombits(0x359eeefb015c33b2), "2.066950350806262e-50"},
		{math.Float64frombits(0x3cf8a4a42a97b8ef), "5.471874060553484e-15"},
		{math.Float64frombits(0x2a9eba0cdf561d80), "2.1435728770450893e-103"},
		{math.Float64frombits(0xbd5da714d2f90e8f), "-4.213896645061471e-13"},
		{math.Float64frombits(0xe049548e8a0a8c96), "-6.792475937705741e+155"},
		{math.Float64frombits(0x3d8f48c5d0602548), "3.5566095450118467e-12"},
		{math.Float64frombits(0xf0e3cd972e81d66d), "-6.296504843759791e+235"},
		{math.Float64frombits(0x3d707c625cce8dee), "9.371135486758045e-13"},
		{math.Float64frombits(0xf7108e96f770c226), "-3.3367034274052276e+265"},
		{math.Float64frombits(0x3ee083c4e1d08be7), "7.874833551529569e-06"},
		{math.Float64frombits(0x5c76f18a0585a01c), "2.668197312831474e+137"},
		{math.Float64frombits(0xc70a38ad46067a82), "-1.7018657675450969e+34"},
		{math.Float64frombits(0x43892dfc254cb864), "2.26797932753915e+17"},
		{math.Float64frombits(0xbee23d46da9ffb34), "-8.697205732486475e-06"},
		{math.Float64frombits(0x9a656aafd1412584), "-1.6128949952946178e-181"},
		{math.Float64frombits(0x42af5687a53b8452), "17228251700674.16"},
		{math.Float64frombits(0xb52a43abad8d194a), "-1.3710624349377491e-52"},
		{math.Float64frombits(0xbecb3246dafaeefc), "-3.2420627674426975e-06"},
		{math.Float64frombits(0xd18a669a5af84e6b), "-6.410999856942676e+84"},
		{math.Float64frombits(0xc400d23d0e1b7c25), "-3.878714817651334e+19"},
		{math.Float64frombits(0x2f4d4c8650d7d13f), "7.721876539108463e-81"},
		{math.Float64frombits(0xc4004a5b23554515), "-3.7563227526272295e+19"},
		{math.Float64frombits(0x0e979cf32d1634b4), "2.2663980288163243e-238"},
		{math.Float64frombits(0xc7577a94f0dc3b25), "-4.8763632811457596e+35"},
		{math.Float64frombits(0xf3001cee05da8467), "-8.801629211661505e+245"},
		{math.Float64frombits(0x4619390ccbe1b493), "4.995900445825464e+29"},
		{math.Float64frombits(0x04a012e8677fd139), "2.111223827400629e-286"},
		{math.Float64frombits(0x4023a05a55630cda), "9.813189190236177"},
		{math.Float64frombits(0x60597bdc5dbe4409), "1.3667292600092578e+156"},
		{math.Float64frombits(0x3ac84ce70d72a5db), "1.5703765811374925e-25"},
		{math.Float64frombits(0x0bf64ef773ec28d0), "4.868478773210517e-251"},
		{math.Float64frombits(0x42f79e8fa2c74da8), "415516513301722.5"},
		{math.Float64frombits(0xf453324ef486ab73), "-2.199068853563827e+252"},
		{math.Float64frombits(0xc4e010e5f718d45c), "-6.069566589739837e+23"},
		{math.Float64frombits(0xedfde4163eff8b3f), "-6.753000067310371e+221"},
		{math.Float64frombits(0x40ef33544445e310), "63898.63333410595"},
		{math.Float64frombits(0x8332f05a58296818), "-2.9653672777871535e-293"},
		{math.Float64frombits(0xc1b14f5c15e25955), "-290413589.8841756"},
		{math.Float64frombits(0xc68deb5d403a960a), "-7.585466955632267e+31"},
		{math.Float64frombits(0xc2659fd136a5cb38), "-743004812590.3506"},
		{math.Float64frombits(0xc7eec61bbf9703c0), "-3.2724381964729985e+38"},
		{math.Float64frombits(0x4652c1f4b9e74afd), "5.944533551826657e+30"},
		{math.Float64frombits(0x0960afe94bbdbb01), "1.6560599914035002e-263"},
		{math.Float64frombits(0xbbcfa69f20d39f71), "-1.3404662987887604e-20"},
		{math.Float64frombits(0x573ac59a355f2af4), "1.6095977027522042e+112"},
		{math.Float64frombits(0x3f651a4949e5c140), "0.0025760108393841075"},
		{math.Float64frombits(0x25f02628eb07c30d), "5.964157714197508e-126"},
		{math.Float64frombits(0xc718a87bcf7f20d8), "-3.2008094674831078e+34"},
		{math.Float64frombits(0x8b8e8f4eb3de08f9), "-5.210316280638388e-253"},
		{math.Float64frombits(0xc3dc4e3ba70bd174), "-8.158533079557067e+18"},
		{math.Float64frombits(0x4e613a365119cdcc), "3.71559640715053e+69"},
		{math.Float64frombits(0xbbf309d16c359be8), "-6.45044448990023e-20"},
		{math.Float64frombits(0x261c374ba07657d6), "4.16828325856563e-125"},
		{math.Float64frombits(0x3ed28cd6bd9497aa), "4.422700805839088e-06"},
		{math.Float64frombits(0x7bd9e8a1ff297d0e), "3.945134848359692e+288"},
		{math.Float64frombits(0xbb8992f8e994eaa7), "-6.769410711507675e-22"},
		{math.Float64frombits(0xfc98500014b9adb5), "-1.516370937221044e+292"},
		{math.Float64frombits(0x470f03d2a536dc7f), "2.012984236110856e+34"},
		{math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"},
	} {
		if got := event.PyFloatRepr(c.f); got != c.want {
			t.Errorf("event.PyFloatRepr(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func TestPyRepr(t *testing.T) {
	for in, want := range map[string]string{
		"abc": "'abc'", "it's": `"it's"`, `a'"b`: `'a\'"b'`, "a\nb\t\\": `'a\nb\t\\'`,
		"\x00\x7f\u00a0é\u2028": `'\x00\x7f\xa0é\u2028'`, "": "''",
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	if got := pyBytesRepr("hi'\x00\xff"); got != `b"hi'\x00\xff"` {
		t.Errorf("pyBytesRepr = %s", got)
	}
}
