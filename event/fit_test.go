package event

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestFit(t *testing.T) {
	bigReturn := `{"file_|-x_|-/etc/x_|-managed":{"comment":"` + strings.Repeat("x", 5000) + `","result":true}}`
	tests := []struct {
		name     string
		body     string
		limit    int
		wantCuts []string // keys cut, in order
		wantErr  bool
	}{
		{name: "fits", body: `{"tag":"a","data":{"x":1}}`, limit: 100},
		{name: "no limit", body: `{"tag":"a","data":{"x":"` + strings.Repeat("y", 500) + `"}}`, limit: 0},
		{
			name:     "return first even when not the largest",
			body:     `{"tag":"salt/job/1/ret/web1","data":{"jid":"1","id":"web1","other":"` + strings.Repeat("o", 6000) + `","return":` + bigReturn + `,"success":true}}`,
			limit:    6500,
			wantCuts: []string{"return"},
		},
		{
			name:     "then the largest others",
			body:     `{"tag":"my/tag","data":{"a":"` + strings.Repeat("a", 3000) + `","b":"` + strings.Repeat("b", 4000) + `","c":1}}`,
			limit:    3300,
			wantCuts: []string{"b"},
		},
		{
			name:    "tag alone too big",
			body:    `{"tag":"` + strings.Repeat("t", 500) + `","data":{"a":"` + strings.Repeat("a", 3000) + `"}}`,
			limit:   300,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, cuts, err := Fit([]byte(tt.body), tt.limit)
			if tt.wantErr {
				if !errors.Is(err, ErrCannotFit) {
					t.Fatalf("err = %v, want ErrCannotFit", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cuts {
				got = append(got, c.Key)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantCuts, ",") {
				t.Fatalf("cut %v, want %v", got, tt.wantCuts)
			}
			if len(cuts) == 0 {
				if string(out) != tt.body {
					t.Fatalf("a fitting event changed: %s", out)
				}
				return
			}
			if len(out) > tt.limit {
				t.Fatalf("%d bytes, over the limit %d", len(out), tt.limit)
			}
			ev, err := Decode(out)
			if err != nil {
				t.Fatalf("result is not an event: %v\n%s", err, out)
			}
			var orig Event
			if orig, err = Decode([]byte(tt.body)); err != nil {
				t.Fatal(err)
			}
			if ev.Tag != orig.Tag {
				t.Errorf("tag %q, want %q", ev.Tag, orig.Tag)
			}
			marks, _ := ev.Data[TruncatedKey].(map[string]any)
			for _, c := range cuts {
				s, _ := ev.Data[c.Key].(string)
				if !strings.Contains(s, "bytes cut") {
					t.Errorf("%s = %v, want the cut marker", c.Key, ev.Data[c.Key])
				}
				raw, _ := json.Marshal(orig.Data[c.Key])
				if c.Bytes < len(raw)-10 || marks[c.Key] == nil {
					t.Errorf("cut %s: recorded %d bytes (%v), original %d", c.Key, c.Bytes, marks[c.Key], len(raw))
				}
			}
			for k, v := range orig.Data {
				if _, cut := marks[k]; cut {
					continue
				}
				a, _ := json.Marshal(v)
				b, _ := json.Marshal(ev.Data[k])
				if string(a) != string(b) {
					t.Errorf("uncut key %s changed: %s → %s", k, a, b)
				}
			}
		})
	}
}
