package shadow

import (
	"strings"
	"testing"
	"time"
)

// TestReportUnknownVerdict: a verdict of a later version is counted
// and listed after the known ones, before unreadable, and said in words.
func TestReportUnknownVerdict(t *testing.T) {
	t.Parallel()
	e := func(sec int, detail string) Stored {
		return Stored{EventID: "ev", Rule: "r", Detail: detail, Time: time.Date(2025, 3, 1, 10, 0, sec, 0, time.UTC)}
	}
	rep := NewReport([]Stored{
		e(0, `{"verdict":"zz-new"}`), e(1, `{}`), e(2, `{"verdict":"held-hops"}`), e(3, `{"verdict":"agree"}`), e(4, `{"verdict":"aa-new"}`),
	}, time.Time{}, time.Time{}, "", 0)
	if got, want := strings.Join(countOrder(rep.Verdicts), " "), "agree held-hops aa-new zz-new unreadable"; got != want {
		t.Errorf("verdict order %q, want %q", got, want)
	}
	if rep.Unread != 1 || !strings.Contains(rep.FirstUnread, "no verdict") {
		t.Errorf("unreadable %d (%s), want 1 (no verdict)", rep.Unread, rep.FirstUnread)
	}
	if len(rep.Disagreements) != 3 || rep.Disagreements[0].Verdict != "aa-new" || rep.Disagreements[2].Verdict != "zz-new" {
		t.Errorf("disagreements %+v, want aa-new, held-hops, zz-new", rep.Disagreements)
	}
	sum := strings.Join(rep.summary(), "\n")
	for _, want := range []string{"agree 1 of 4 decisions (25.0%)", "1 zz-new (a verdict this version does not know)", "at the hop limit (held-hops)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
