package matchers

import (
	"strings"
	"testing"
)

// fnmatchCases were produced by CPython 3.11.7's fnmatch.fnmatch on Linux
// (python3 -c 'import fnmatch; fnmatch.fnmatch(s, p)') and pasted here as
// literals. They must never be edited by hand.
var fnmatchCases = []struct {
	pattern, s string
	want       bool
}{
	{"salt/auth", "salt/auth", true},
	{"salt/auth", "salt/auth/", false},
	{"salt/auth", "salt/aut", false},
	{"", "", true},
	{"", "a", false},
	{"salt/auth", "Salt/auth", false},
	{"SALT/*", "salt/x", false},
	{"salt/*", "SALT/x", false},
	{"myco/*/done", "myco/app/deploy/prod/done", true},
	{"myco/*/done", "myco/app/done", true},
	{"myco/*/done", "myco//done", true},
	{"myco/*/done", "myco/done", false},
	{"myco/*/done", "myco/app/done/", false},
	{"*", "", true},
	{"*", "anything/at/all", true},
	{"*", "line1\nline2", true},
	{"**", "x", true},
	{"a**b", "ab", true},
	{"a**b", "axxb", true},
	{"a*", "a", true},
	{"*a", "a", true},
	{"*a", "ba\n", false},
	{"a*b*c", "abc", true},
	{"a*b*c", "aXbYc", true},
	{"a*b*c", "acb", false},
	{"a*b*c", "abcbc", true},
	{"a*b*c", "abcb", false},
	{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", true},
	{"*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	{"salt/job/*/ret/*", "salt/job/20261122010001144547/ret/web1", true},
	{"salt/job/*/ret/*", "salt/job/2026/new", false},
	{"salt/job/*/ret/*", "salt/job/1/ret/", true},
	{"salt/job/*/ret/*", "salt/job//ret/x/y", true},
	{"*/ret/*", "salt/job/1/ret/web1", true},
	{"*ret", "salt/ret", true},
	{"*ret", "salt/rets", false},
	{"salt/beacon/*/inotify//etc/important_file", "salt/beacon/web1/inotify//etc/important_file", true},
	{"salt/beacon/*/inotify//etc/important_file", "salt/beacon/web1/inotify/etc/important_file", false},
	{"?", "a", true},
	{"?", "", false},
	{"?", "ab", false},
	{"?", "/", true},
	{"?", "\n", true},
	{"a?c", "a/c", true},
	{"a?c", "a\nc", true},
	{"??", "é", false},
	{"?", "é", true},
	{"?", "😀", true},
	{"??", "😀", false},
	{"a?", "a😀", true},
	{"*?", "", false},
	{"*?", "x", true},
	{"?*?", "x", false},
	{"?*?", "xy", true},
	{"alert?", "alert1", true},
	{"alert?", "alert", false},
	{"alert?", "alert12", false},
	{"[abc]", "a", true},
	{"[abc]", "d", false},
	{"[abc]", "", false},
	{"[abc]", "ab", false},
	{"[a-c]", "b", true},
	{"[a-c]", "d", false},
	{"[a-c]", "-", false},
	{"[^0-9]", "^", true},
	{"[^0-9]", "5", true},
	{"[^0-9]", "a", false},
	{"[^0-9]", "-", false},
	{"[^]", "^", true},
	{"[^]", "]", false},
	{"[!0-9]", "5", false},
	{"[!0-9]", "a", true},
	{"[!0-9]", "!", true},
	{"[!0-9]", "/", true},
	{"[!0-9]", "\n", true},
	{"[!0-9]", "", false},
	{"[]]", "]", true},
	{"[]]", "a", false},
	{"[]]]", "]]", true},
	{"[]a]", "a", true},
	{"[]a]", "]", true},
	{"[!]]", "]", false},
	{"[!]]", "a", true},
	{"[!]]", "!", true},
	{"[]-]", "]", true},
	{"[]-]", "-", true},
	{"[]-]", "a", false},
	{"[]-a]", "^", true},
	{"[]-a]", "a", true},
	{"[]-a]", "b", false},
	{"[]-a]", "-", false},
	{"[a-]", "a", true},
	{"[a-]", "-", true},
	{"[a-]", "b", false},
	{"[-a]", "-", true},
	{"[-a]", "a", true},
	{"[-a]", "b", false},
	{"[-]", "-", true},
	{"[!-]", "-", false},
	{"[!-]", "a", true},
	{"[--/]", "-", true},
	{"[--/]", ".", true},
	{"[--/]", "/", true},
	{"[--/]", "0", false},
	{"[!--/]", ".", false},
	{"[!--/]", "a", true},
	{"[abc", "[abc", true},
	{"[abc", "a", false},
	{"[abc*", "[abcdef", true},
	{"[", "[", true},
	{"[!", "[!", true},
	{"[]", "[]", true},
	{"[!]", "[!]", true},
	{"[!]", "!", false},
	{"a[b", "a[b", true},
	{"[[]", "[", true},
	{"[[]]", "[]", true},
	{"[*]", "*", true},
	{"[*]", "a", false},
	{"[?]", "?", true},
	{"[?]", "a", false},
	{"[z-a]", "z", false},
	{"[z-a]", "a", false},
	{"[z-a]", "-", false},
	{"[z-a]", "", false},
	{"x[z-a]", "x", false},
	{"[!z-a]", "z", true},
	{"[!z-a]", "q", true},
	{"[!z-a]", "\n", true},
	{"[!z-a]", "", false},
	{"[!z-a]", "ab", false},
	{"[z-a!b]", "b", false},
	{"[z-a!b]", "c", true},
	{"[z-a!b]", "!", true},
	{"[z-a!]", "q", true},
	{"[c-bz-a]", "b", false},
	{"[a--b]", "b", true},
	{"[a--b]", "a", false},
	{"[a--b]", "-", false},
	{"[a-c-e]", "b", true},
	{"[a-c-e]", "-", true},
	{"[a-c-e]", "d", false},
	{"[a-c-e]", "e", true},
	{"[a-a]", "a", true},
	{"[!a-a]", "a", false},
	{"[b-a]", "b", false},
	{"[b-ac]", "c", true},
	{"[b-ac]", "b", false},
	{"[ab-a]", "a", true},
	{"[ab-a]", "b", false},
	{"[%--]", "+", true},
	{"[%--]", "-", true},
	{"[---]", "-", true},
	{"[---]", ",", false},
	{"[----]", "-", true},
	{"[a-z0-9_]", "_", true},
	{"[a-z0-9_]", "Q", false},
	{"[A-Z]", "a", false},
	{"[a-z]", "A", false},
	{"[!a-z]", "A", true},
	{"[[:alpha:]]", "a", false},
	{"[[:alpha:]]", "a]", true},
	{"[[:alpha:]]", ":]", true},
	{"[[:alpha:]]", "[]", true},
	{"[&&]", "&", true},
	{"[~~]", "~", true},
	{"[||]", "|", true},
	{"[a&&b]", "&", true},
	{"[a-c&&b]", "&", true},
	{"[&-~]", "a", true},
	{"[\\]", "\\", true},
	{"[\\]", "]", false},
	{"[\\]]", "\\]", true},
	{"[\\-a]", "\\", true},
	{"[\\-a]", "[", false},
	{"[\\-a]", "a", true},
	{"[\\-a]", "-", false},
	{"[!\\]", "\\", false},
	{"[!\\]", "a", true},
	{"[\\d]", "5", false},
	{"[\\d]", "d", true},
	{"[\\n]", "\n", false},
	{"[\\n]", "n", true},
	{"[\n]", "\n", true},
	{"[/]", "/", true},
	{"[!/]", "/", false},
	{"[\u0000-\u001f]", "\t", true},
	{"[é]", "é", true},
	{"[à-ü]", "é", true},
	{"[à-ü]", "e", false},
	{"[!é]", "e", true},
	{"[!é]", "é", false},
	{"[😀-🙏]", "😐", true},
	{"[a-😀]", "é", true},
	{"\\*", "\\anything", true},
	{"\\*", "*", false},
	{"\\*", "\\", true},
	{"\\?", "\\x", true},
	{"\\?", "?", false},
	{"a\\b", "a\\b", true},
	{"\\", "\\", true},
	{"\\\\", "\\", false},
	{"\\[a]", "\\a", true},
	{"\\[a]", "[a]", false},
	{"*\\", "x\\", true},
	{".", ".", true},
	{".", "a", false},
	{"a.b", "axb", false},
	{"a+", "a+", true},
	{"a+", "aa", false},
	{"(a)", "(a)", true},
	{"a|b", "a|b", true},
	{"a|b", "a", false},
	{"$", "$", true},
	{"^a", "^a", true},
	{"^a", "a", false},
	{"a{2}", "a{2}", true},
	{"a{2}", "aa", false},
	{"#", "#", true},
	{" ", " ", true},
	{"a\nb", "a\nb", true},
	{"*", "\n", true},
	{"a*", "a\n", true},
	{"a", "a\n", false},
	{"a*b", "a\n\nb", true},
	{"?", "\r", true},
	{"café", "café", true},
	{"café", "cafe", false},
	{"caf?", "café", true},
	{"*é*", "ééé", true},
	{"日本*", "日本語", true},
	{"日?語", "日本語", true},
	{"日?語", "日語", false},
	{"salt/ß/*", "salt/ß/x", true},
	{"É", "é", false},
}

func TestMatchCPythonCases(t *testing.T) {
	for _, tc := range fnmatchCases {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestMatchInvalidUTF8 covers strings Python cannot represent: every byte
// that is not part of valid UTF-8 is one character with the value U+FFFD.
func TestMatchInvalidUTF8(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"?", "\xff", true},
		{"??", "\xff", false},
		{"??", "\xe2\x82", true},
		{"?", "\xe2\x82", false},
		{"?", "\xe2\x82\xac", true},
		{"\xff", "\xfe", true},
		{"\xff", "\uFFFD", true},
		{"\uFFFD", "\xff", true},
		{"\uFFFD", "\uFFFD", true},
		{"\uFFFD", "a", false},
		{"a\xffb", "a\x80b", true},
		{"a\xffb", "ab", false},
		{"*\xff", "xyz\xc0", true},
		{"*\xff*", "xyz\xc0abc", true},
		{"*\xff*", "xyzabc", false},
		{"[\xff]", "\x80", true},
		{"[!\xff]", "\x80", false},
		{"[!\xff]", "a", true},
		{"[a-\xff]", "\xc3", true},
		{"[a-\xff]", "\U0001F600", false},
		{"*?", "\xf0\x9f\x98", true},
		{"*?x", "\xf0\x9f\x98x", true},
		{"???x", "\xf0\x9f\x98x", true},
		{"??x", "\xf0\x9f\x98x", false},
		{"*\xe2\x82\xac", "\xe2\xe2\x82\xac", true},
		{"?\xe2\x82\xac", "\xe2\xe2\x82\xac", true},
		{"\xe2*", "\xe2\xe2\x82\xac", true},
		{"\xe2?", "\xe2\xe2\x82\xac", true},
		{"\xe2??", "\xe2\xe2\x82\xac", false},
		{"a*", "a\xff", true},
		{"*a", "\xffa", true},
	}
	for _, tc := range cases {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestGlobString(t *testing.T) {
	for _, p := range []string{"", "salt/*", "[!]a-]", "\\*", "[abc"} {
		if got := Compile(p).String(); got != p {
			t.Errorf("Compile(%q).String() = %q", p, got)
		}
	}
}

// TestNoBacktrackingBlowup makes sure patterns with many stars stay fast on
// long inputs that almost match.
func TestNoBacktrackingBlowup(t *testing.T) {
	g := Compile(strings.Repeat("*a", 30) + "*b")
	s := strings.Repeat("a", 10000)
	if g.Match(s) {
		t.Fatal("unexpected match")
	}
	if !g.Match(s + "b") {
		t.Fatal("expected match")
	}
	q := Compile(strings.Repeat("*?", 30) + "*[b]")
	if q.Match(s) {
		t.Fatal("unexpected match")
	}
	if !q.Match(s + "b") {
		t.Fatal("expected match")
	}
}

func TestGlobMatchAllocs(t *testing.T) {
	g := Compile("myco/svc7/[ab]*/alert?")
	allocs := testing.AllocsPerRun(100, func() {
		if !g.Match("myco/svc7/api/x/alert9") {
			t.Fatal("expected match")
		}
	})
	if allocs != 0 {
		t.Fatalf("Glob.Match allocates %v times per call", allocs)
	}
}
