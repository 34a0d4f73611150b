package natsbus

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

func TestSubjectMapping(t *testing.T) {
	cases := []struct{ tag, subject string }{
		{"salt/auth", "salt.evt.salt.auth"},
		{"salt/job/20261122010001144547/ret/web1", "salt.evt.salt.job.20261122010001144547.ret.web1"},
		{"salt/beacon/web1/inotify//etc/important_file", "salt.evt.salt.beacon.web1.inotify.%.etc.important_file"},
		{"20261122010001144547", "salt.evt.20261122010001144547"},
		{"salt/beacon/db1/diskusage/", "salt.evt.salt.beacon.db1.diskusage.%"},
		{"/leading", "salt.evt.%.leading"},
		{"a.b c*>%", "salt.evt.a%2Eb%20c%2A%3E%25"},
		{"é", "salt.evt.%C3%A9"},
		{"//", "salt.evt.%.%.%"},
	}
	for _, c := range cases {
		if got := Subject(DefaultPrefix, c.tag); got != c.subject {
			t.Errorf("Subject(%q) = %q, want %q", c.tag, got, c.subject)
		}
		if got, err := Tag(DefaultPrefix, c.subject); err != nil || got != c.tag {
			t.Errorf("Tag(%q) = %q, %v; want %q", c.subject, got, err, c.tag)
		}
	}
	for _, bad := range []string{"other.x", "salt.evt.", "salt.evt.a%2", "salt.evt.a%zz", "salt.evt.a b"} {
		if _, err := Tag(DefaultPrefix, bad); err == nil {
			t.Errorf("Tag(%q) accepted", bad)
		}
	}
}

// validSubject checks NATS's rules for a literal publish subject.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for _, r := range tok {
			if unicode.IsSpace(r) || r == '*' || r == '>' || r > 126 || r < 33 {
				return false
			}
		}
	}
	return true
}

func FuzzSubjectRoundTrip(f *testing.F) {
	for _, s := range []string{"salt/auth", "salt/beacon/web1/inotify//etc/important_file", "a.b", " ", "*", ">", "%", "/", "\x00", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		if tag == "" {
			return
		}
		subj := Subject(DefaultPrefix, tag)
		if !validSubject(subj) {
			t.Fatalf("Subject(%q) = %q is not a valid NATS subject", tag, subj)
		}
		if len(subj) > MaxSubject {
			t.Fatalf("Subject(%q) is %d bytes, over MaxSubject", tag, len(subj))
		}
		back, err := Tag(DefaultPrefix, subj)
		if errors.Is(err, ErrCutSubject) {
			if len(subject(DefaultPrefix, tag)) <= MaxSubject {
				t.Fatalf("Subject(%q) cut a subject that fits", tag)
			}
			return
		}
		if err != nil || back != tag {
			t.Fatalf("round trip %q -> %q -> %q, %v", tag, subj, back, err)
		}
	})
}

// TestLongTagSubject: an over-long tag gets a bounded subject that keeps its
// leading tokens and differs from another long tag's.
func TestLongTagSubject(t *testing.T) {
	a := "salt/beacon/web1/inotify/" + strings.Repeat(".", 2000)
	b := a + "x"
	sa, sb := Subject(DefaultPrefix, a), Subject(DefaultPrefix, b)
	for _, s := range []string{sa, sb} {
		if len(s) > MaxSubject || !validSubject(s) || !strings.HasPrefix(s, "salt.evt.salt.beacon.web1.inotify.") {
			t.Errorf("subject %q (%d bytes)", s, len(s))
		}
		if _, err := Tag(DefaultPrefix, s); !errors.Is(err, ErrCutSubject) {
			t.Errorf("Tag(%q) = %v, want ErrCutSubject", s, err)
		}
	}
	if sa == sb {
		t.Error("two long tags share a subject")
	}
	if one := Subject(DefaultPrefix, strings.Repeat("x", 3000)); len(one) > MaxSubject || !validSubject(one) {
		t.Errorf("one long token: %q", one)
	}
}

// TestKeyedSubject: a keyed subject carries the key's fixed-width hash
// after the prefix, maps back to its tag, and stays under the prefix.
func TestKeyedSubject(t *testing.T) {
	for _, c := range []struct{ tag, key, subject string }{
		{"salt/minion/web1.example.com/start", "web1.example.com", "salt.evt.%K." + KeyToken("web1.example.com") + ".salt.minion.web1%2Eexample%2Ecom.start"},
		{"salt/auth", "salt/auth", "salt.evt.%K." + KeyToken("salt/auth") + ".salt.auth"},
		{"", "", "salt.evt.%K." + KeyToken("") + ".%"},
	} {
		got := KeyedSubject(DefaultPrefix, c.tag, c.key)
		if got != c.subject {
			t.Errorf("KeyedSubject(%q, %q) = %q, want %q", c.tag, c.key, got, c.subject)
		}
		if tag, err := Tag(DefaultPrefix, got); err != nil || tag != c.tag {
			t.Errorf("Tag(%q) = %q, %v; want %q", got, tag, err, c.tag)
		}
	}
	if tok := KeyToken("web1"); len(tok) != 8 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Errorf("KeyToken(web1) = %q, want 8 hex digits", tok)
	}
	// Pinned: a change would move minions between partitions on upgrade.
	if got := KeyToken("web1"); got != "93c3efe0" {
		t.Errorf("KeyToken(web1) = %q, the value was 93c3efe0", got)
	}
	long := strings.Repeat("x/", 800)
	if s := KeyedSubject(DefaultPrefix, long, "k"); len(s) > MaxSubject || !strings.HasPrefix(s, "salt.evt.%K."+KeyToken("k")+".x.") {
		t.Errorf("keyed subject of an over-long tag: %d bytes, %q…", len(s), s[:40])
	}
	if _, err := Tag(DefaultPrefix, "salt.evt.%K.0011aabb"); !errors.Is(err, ErrNotEventSubject) {
		t.Errorf("Tag of a keyed subject without a tag: %v, want ErrNotEventSubject", err)
	}
}
