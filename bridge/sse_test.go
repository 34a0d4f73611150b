package bridge

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type sseWant struct {
	tag, data string
	hasTag    bool
	hasData   bool
}

func readAll(t *testing.T, r *sseReader) ([]sseWant, error) {
	t.Helper()
	var out []sseWant
	for {
		ev, err := r.next()
		if err != nil {
			return out, err
		}
		out = append(out, sseWant{tag: ev.tag, data: string(ev.data), hasTag: ev.hasTag, hasData: ev.hasData})
	}
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []sseWant
		retry   time.Duration
		partial bool
	}{
		{
			name: "salt-api layout: retry glued to the first event",
			in:   "retry: 400\ntag: a/b\ndata: {\"tag\": \"a/b\"}\n\ntag: c\ndata: {}\n\n",
			want: []sseWant{
				{tag: "a/b", data: `{"tag": "a/b"}`, hasTag: true, hasData: true},
				{tag: "c", data: `{}`, hasTag: true, hasData: true},
			},
			retry: 400 * time.Millisecond,
		},
		{
			name:  "documented layout: retry in a block of its own",
			in:    "retry: 400\n\ntag: a\ndata: {}\n\n",
			want:  []sseWant{{tag: "a", data: "{}", hasTag: true, hasData: true}},
			retry: 400 * time.Millisecond,
		},
		{
			name: "CRLF, CR, comments, no space after colon, multi-line data",
			in:   ": hello\r\ntag:x\r\ndata: 1\rdata:2\r\ndata\r\n\r\n:only a comment\n\n",
			want: []sseWant{{tag: "x", data: "1\n2\n", hasTag: true, hasData: true}},
		},
		{
			name: "only the first space is stripped; unknown fields ignored",
			in:   "event: x\nid: 7\nfoo: bar\ndata:  two spaces\n\n",
			want: []sseWant{{data: " two spaces", hasData: true}},
		},
		{
			name:  "invalid retry ignored",
			in:    "retry: 4x\n\nretry: 12\nretry: -1\n\n",
			retry: 12 * time.Millisecond,
		},
		{
			name: "tag without data is still reported",
			in:   "tag: lonely\n\n",
			want: []sseWant{{tag: "lonely", hasTag: true}},
		},
		{
			name:    "cut off inside the data line",
			in:      "tag: a\ndata: {}\n\ntag: b\ndata: {\"ta",
			want:    []sseWant{{tag: "a", data: "{}", hasTag: true, hasData: true}},
			partial: true,
		},
		{
			name:    "cut off before the blank line",
			in:      "tag: b\ndata: {}\n",
			partial: true,
		},
		{
			name:    "cut off after retry only",
			in:      "retry: 400\n",
			retry:   400 * time.Millisecond,
			partial: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time, to cross every buffer boundary (CR then LF).
			r := newSSEReader(iotest.OneByteReader(strings.NewReader(tc.in)))
			got, err := readAll(t, r)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("error %v, want io.EOF", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if r.retry != tc.retry {
				t.Errorf("retry %v, want %v", r.retry, tc.retry)
			}
			if _, ok := r.partial(); ok != tc.partial {
				t.Errorf("partial %v, want %v", ok, tc.partial)
			}
		})
	}
}

func TestSSEReaderLineTooLong(t *testing.T) {
	huge := "data: " + strings.Repeat("x", maxLineBytes+1) + "\n\n"
	r := newSSEReader(strings.NewReader(huge))
	if _, err := r.next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("error %v, want a too-long error", err)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	tag, data, err := decodeEnvelope(sseEvent{tag: "line/tag", hasTag: true, hasData: true,
		data: []byte("{\"tag\": \"json/tag\",\n \"data\": {\"b\": 1.50, \"a\": [1, 2], \"n\": 12345678901234567890}}")})
	if err != nil {
		t.Fatal(err)
	}
	if tag != "json/tag" || string(data) != `{"b":1.50,"a":[1,2],"n":12345678901234567890}` {
		t.Errorf("got %q %s", tag, data)
	}
	if got := string(encodeEnvelope("a<b>&c", data)); got != `{"tag":"a<b>&c","data":{"b":1.50,"a":[1,2],"n":12345678901234567890}}` {
		t.Errorf("envelope %s", got)
	}
	// The tag line is the fallback when the JSON has no tag.
	if tag, _, err := decodeEnvelope(sseEvent{tag: "line/tag", hasTag: true, hasData: true, data: []byte(`{"data": {}}`)}); err != nil || tag != "line/tag" {
		t.Errorf("fallback tag %q, %v", tag, err)
	}
	for _, bad := range []string{`{"tag": "x"}`, `{"tag": "x", "data": null}`, `{"tag": "x", "data": [1]}`,
		`{"data": {}}`, `[]`, `{"tag": 1, "data": {}}`, `{"tag": "x", "data": {}} {}`, `{"tag": "x", "data": {"a": NaN}}`} {
		if _, _, err := decodeEnvelope(sseEvent{hasData: true, data: []byte(bad)}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
