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
