package yaml11

import (
	"math/rand"
	"strings"
	"testing"
)

var plainCases = []struct {
	s    string
	want bool
}{
	{"", true},
	{"web1", true},
	{"salt/job/123/ret/web1", true},
	{"salt/minion/*/start", true},
	{"hello world", true},
	{"a  b", true},
	{"a\tb", true},
	{"1", true},
	{"010", true},
	{"yes", true},
	{"null", true},
	{"<<", true},
	{"=", true},
	{"1:30", true},
	{"http://example.com:8080/x/y=1&z=2#frag", true},
	{"http://example.com/x?y=1", false},
	{"a :b", false},
	{"a:b", true},
	{"a#b", true},
	{"a!b", true},
	{"a&b*c", true},
	{"a'b\"c", true},
	{"a|b>c", true},
	{"a%b@c`d", true},
	{"-1", true},
	{"-x", true},
	{"--", true},
	{"-.inf", true},
	{".5", true},
	{"..", true},
	{"é ünïcödé ✓ 😀", true},
	{"a\u00a0b", true},
	{"\u00a0", true},
	{"C:\\path\\x", true},
	{"key=value", true},
	{"a - b", true},
	{"a ? b", false},
	{"a ~ b", true},

	{" a", false},
	{"a ", false},
	{"\ta", false},
	{"a\t", false},
	{"a\nb", false},
	{"a\rb", false},
	{"a\r\nb", false},
	{"a\u0085b", false},
	{"a\u2028b", false},
	{"a\u2029b", false},
	{"a\x00b", false},
	{"a\x1bb", false},
	{"a\x7fb", false},
	{"a\u0080b", false},
	{"a\ufeffb", false},
	{"\ufeffa", false},
	{"a\uffffb", false},
	{"a\xffb", false},
	{"a: b", false},
	{"a:\tb", false},
	{"a:", false},
	{":", false},
	{"a #b", false},
	{"a\t#b", false},
	{"#a", false},
	{"-", false},
	{"- a", false},
	{"-\ta", false},
	{"---", false},
	{"--- a", false},
	{"---a", false},
	{"...", false},
	{"...a", false},
	{"?", false},
	{"?a", false},
	{":a", false},
	{",a", false},
	{"a,b", false},
	{"[a]", false},
	{"a[0]", false},
	{"a]", false},
	{"{{ x }}", false},
	{"a}", false},
	{"&a", false},
	{"*a", false},
	{"!a", false},
	{"|", false},
	{">", false},
	{"'a'", false},
	{"\"a\"", false},
	{"%a", false},
	{"@a", false},
	{"`a", false},
}

func TestPlainSafe(t *testing.T) {
	for _, c := range plainCases {
		if got := PlainSafe(c.s); got != c.want {
			t.Errorf("PlainSafe(%q) = %v, want %v", c.s, got, c.want)
		}
		checkPlainSafe(t, c.s)
	}
}

// TestPlainSafeRandom round-trips random strings built from characters that
// matter to YAML through go.yaml.in/yaml/v3.
func TestPlainSafeRandom(t *testing.T) {
	alphabet := []string{
		"a", "b", "1", "0", " ", " ", "\t", ":", "#", "-", "?", ",", "[", "]", "{", "}", "&", "*", "!", "|",
		">", "'", "\"", "%", "@", "`", "\n", "\r", ".", "~", "<", "=", "\\", "/", "é", "\u00a0", "\u0085",
		"\u2028", "\ufeff", "\x00", "\x7f", "😀",
	}
	rng := rand.New(rand.NewSource(1))
	safe := 0
	for i := 0; i < 30000; i++ {
		var b strings.Builder
		for n := rng.Intn(7); n >= 0; n-- {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		s := b.String()
		if PlainSafe(s) {
			safe++
		}
		checkPlainSafe(t, s)
		if t.Failed() {
			return
		}
	}
	if safe < 200 {
		t.Errorf("only %d random strings were plain-safe", safe)
	}
}
