package store

import (
	"testing"
	"time"
)

func TestJidTimes(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 34, 56, 789012000, time.Local)
	jid := "20250301123456789012"
	for _, j := range []string{jid, jid + "_1234"} {
		if got, ok := jidTime(j); !ok || !got.Equal(ts) {
			t.Errorf("jidTime(%s) = %v, %v", j, got, ok)
		}
	}
	for _, j := range []string{"req", "2025030112345678901", "2025030112345678901x", jid + "1", "20251301123456789012"} {
		if _, ok := jidTime(j); ok {
			t.Errorf("jidTime(%s) parsed", j)
		}
	}
	// _stamp wins over the jid; each form of _stamp parses.
	for stamp, want := range map[string]time.Time{
		`"2025-03-01T10:00:00.5"`:     time.Date(2025, 3, 1, 10, 0, 0, 5e8, time.UTC),
		`"2025-03-01T10:00:00"`:       time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		`"2025-03-01T10:00:00+00:00"`: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		`17`:                          ts,
		`"garbage"`:                   ts,
	} {
		if got := JobTime(jid, []byte(`{"_stamp": `+stamp+`}`)); !got.Equal(want) {
			t.Errorf("JobTime with _stamp %s = %v, want %v", stamp, got, want)
		}
	}
}
