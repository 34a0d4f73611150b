package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// scripted answers each Update with the next error of its script.
type scripted struct{ errs []error }

func (s *scripted) Update(context.Context, string, time.Duration, func([]byte) ([]byte, bool)) (bool, error) {
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err == nil, err
}

// TestWriteProbe: one refused heartbeat (a leader election) is not an
// outage; two in a row are, logged once, until one goes through.
func TestWriteProbe(t *testing.T) {
	full := errors.New("insufficient storage")
	for _, tc := range []struct {
		name    string
		errs    []error
		failing []bool // after each beat
		logs    []string
	}{
		{"healthy", []error{nil, nil}, []bool{false, false}, nil},
		{"one refusal", []error{full, nil, full, nil}, []bool{false, false, false, false}, nil},
		{"an outage and its end", []error{full, full, full, nil, nil}, []bool{false, true, true, false, false},
			[]string{"JetStream refuses writes", "JetStream takes writes again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := newWriteProbe(&scripted{errs: tc.errs}, slog.New(slog.NewTextHandler(&buf, nil)))
			now := time.Now()
			for i, want := range tc.failing {
				p.beat(context.Background(), now.Add(time.Duration(i)*p.every))
				if p.failing.Load() != want || (p.health() != nil) != want {
					t.Fatalf("after beat %d: failing %v, health %v; want failing %v", i+1, p.failing.Load(), p.health(), want)
				}
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.logs) {
				t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(tc.logs), buf.String())
			}
			for i, want := range tc.logs {
				if !strings.Contains(lines[i], want) {
					t.Errorf("line %d %q lacks %q", i+1, lines[i], want)
				}
			}
		})
	}
}
