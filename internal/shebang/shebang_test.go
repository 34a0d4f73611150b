package shebang

import "testing"

func TestPipeline(t *testing.T) {
	for _, tc := range []struct {
		src, pipe string
		ok        bool
	}{
		{"#!jinja|yaml\na: 1\n", "jinja|yaml", true},
		{"#!jinja | yaml\r\na: 1\n", "jinja|yaml", true},
		{"#! gotmpl|yaml", "gotmpl|yaml", true},
		{"#!\na: 1\n", "", true},
		{"a: 1\n#!yaml\n", "", false},
	} {
		if pipe, ok := Pipeline(tc.src); pipe != tc.pipe || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.src, pipe, ok, tc.pipe, tc.ok)
		}
	}
}
