package matchers

import (
	"errors"
	"testing"
)

func TestConditions(t *testing.T) {
	data := map[string]any{"change": "IN_MODIFY", "id": "web1", "retcode": int64(3), "nested": map[string]any{"app": "shop"}}
	cases := []struct {
		src  string
		want bool
	}{
		{`data.change == "IN_MODIFY"`, true},
		{`data.change == "IN_IGNORED"`, false},
		{`tag startsWith "salt/beacon/"`, true},
		{`data.retcode > 0 && data.id matches "^web"`, true},
		{`data.nested.app == "shop"`, true},
		{`data.missing == nil`, true},
	}
	for _, c := range cases {
		e, err := CompileCondition(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := e.True("salt/beacon/web1/inotify//etc/x", data)
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.src, got, err, c.want)
		}
	}
	k, _ := CompileKey("data.id")
	if got, _ := k.Key("t", data); got != "web1" {
		t.Errorf("key = %q", got)
	}
}

func TestConditionErrorsArePositioned(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
	}{
		{`data.change ==`, 1, 15},
		{`data.x == "a" &&& true`, 1, 16},
		{`1 + "a"`, 1, 3},
	}
	for _, c := range cases {
		_, err := CompileCondition(c.src)
		var ee *ExprError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: err = %v", c.src, err)
		}
		if ee.Line != c.line {
			t.Errorf("%s: line %d, want %d (%v)", c.src, ee.Line, c.line, err)
		}
	}
}
