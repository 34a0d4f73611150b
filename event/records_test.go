package event

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRecordReader reads one-line envelopes, state.event lines and the
// multi-line pretty format, each record with its first line's number
// (issue 10 #9).
func TestRecordReader(t *testing.T) {
	type rec struct {
		line int
		tag  string // "" when the record must not decode
	}
	pretty := "salt/minion/web1/start\t{\n    \"id\": \"web1\",\n    \"s\": \"a } and { and \\\" ]\",\n    \"l\": [\n        1,\n        {}\n    ]\n}\n"
	tests := []struct {
		name string
		in   string
		want []rec
	}{
		{"envelopes", "{\"tag\":\"a\",\"data\":{}}\n\n{\"tag\":\"b\",\"data\":{\"x\":1}}", []rec{{1, "a"}, {3, "b"}}},
		{"state.event lines", "a\t{\"x\": 1}\nb {\"y\": {}}\n", []rec{{1, "a"}, {2, "b"}}},
		{"pretty", pretty + pretty, []rec{{1, "salt/minion/web1/start"}, {9, "salt/minion/web1/start"}}},
		{"mixed with comments", "# event 01ABC\n" + pretty + "# event 01ABD\n{\"tag\":\"b\",\"data\":{}}\nc\t{}\n", []rec{{2, "salt/minion/web1/start"}, {11, "b"}, {12, "c"}}},
		{"pretty without final newline", strings.TrimSuffix(pretty, "\n"), []rec{{1, "salt/minion/web1/start"}}},
		{"CRLF", strings.ReplaceAll(pretty, "\n", "\r\n"), []rec{{1, "salt/minion/web1/start"}}},
		{"unclosed then a record", "a\t{\n    \"x\": 1,\n{\"tag\":\"b\",\"data\":{}}\n", []rec{{1, ""}, {3, "b"}}},
		{"unclosed then blank", "a\t{\n    \"x\": 1,\n\nb\t{}\n", []rec{{1, ""}, {4, "b"}}},
		{"unclosed at the end", "a\t{\n    \"x\": 1,\n", []rec{{1, ""}}},
		{"malformed line", "not an event\nb\t{}\n", []rec{{1, ""}, {2, "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := NewRecordReader(strings.NewReader(tt.in))
			var got []rec
			for {
				b, n, err := rr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				ev, derr := Decode(b)
				r := rec{line: n}
				if derr == nil {
					r.tag = ev.Tag
				}
				got = append(got, r)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("record %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
