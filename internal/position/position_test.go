package position

import (
	"errors"
	"io"
	"testing"
)

func TestError(t *testing.T) {
	for _, c := range []struct {
		err  *Error
		want string
	}{
		{At("reactor.conf", 3, 5, "unknown option", nil), "reactor.conf:3:5: unknown option"},
		{At("", 1, 7, "unexpected token", nil), "1:7: unexpected token"},
		{At("a.sls", 2, 0, "bad", nil), "a.sls:2: bad"},
		{At("a.sls", 0, 0, "missing", nil), "a.sls: missing"},
		{At("", 0, 0, "no place", nil), "no place"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.err, got, c.want)
		}
	}
	if err := At("f", 1, 1, "read", io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Error("Unwrap does not reach the cause")
	}
}

// TestSplit: a printed problem reads back into its position and message.
func TestSplit(t *testing.T) {
	cases := []struct {
		text string
		want Pos
		msg  string
		ok   bool
	}{
		{"a/b.sls:3:7: bad thing: here", Pos{File: "a/b.sls", Line: 3, Col: 7}, "bad thing: here", true},
		{"C:/x.sls:1:2: m", Pos{File: "C:/x.sls", Line: 1, Col: 2}, "m", true},
		{"no position: at all", Pos{}, "no position: at all", false},
		{"f.sls:3: line only", Pos{}, "f.sls:3: line only", false},
	}
	for _, c := range cases {
		p, msg, ok := Split(c.text)
		if p != c.want || msg != c.msg || ok != c.ok {
			t.Errorf("Split(%q) = %v, %q, %v; want %v, %q, %v", c.text, p, msg, ok, c.want, c.msg, c.ok)
		}
		if ok && (&Error{Pos: p, Msg: msg}).Error() != c.text {
			t.Errorf("Split(%q) does not print back", c.text)
		}
	}
}
