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
