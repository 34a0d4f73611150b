package sqlstore

import (
	"context"
	"fmt"
	"github.com/reactord/reactord/store"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactord/reactord/internal/syncbuf"
	"github.com/reactord/reactord/internal/wait"
)

// logLines splits what buf holds into lines.
func logLines(buf *syncbuf.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// captureCuts returns a Cuts of the given interval that reports to the
// buffer it returns; its pending summary is stopped at the end of the test.
func captureCuts(t *testing.T, interval time.Duration) (*Cuts, *syncbuf.Buffer) {
	t.Helper()
	buf := &syncbuf.Buffer{}
	cuts := NewCuts(slog.New(slog.NewTextHandler(buf, nil)))
	cuts.rep.interval = interval
	t.Cleanup(func() {
		cuts.rep.mu.Lock()
		if cuts.rep.timer != nil {
			cuts.rep.timer.Stop()
		}
		cuts.rep.mu.Unlock()
	})
	return cuts, buf
}

// cutCounts reads every column's counter.
func cutCounts(cuts *Cuts) map[string]int64 {
	out := map[string]int64{}
	for _, c := range CutColumns() {
		out[c] = cuts.Count(c)
	}
	return out
}

// TestValuesCutCountedAndLoggedOnce writes many records whose tag, jid and
// minion id are 300 characters: they are stored cut to 255, every cut is
// counted under its column, and the log has one line for the first cut,
// then one summary for all the others.
func TestValuesCutCountedAndLoggedOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		cuts, buf := captureCuts(t, time.Hour)
		s := db.openWith(t, Options{Cuts: cuts})
		before := cutCounts(cuts)
		const n = 40
		tag := "salt/beacon/" + strings.Repeat("t", 288)
		minion := strings.Repeat("m", 300)
		jids := make([]string, n)
		for i := range n {
			jids[i] = jidString(at(i)) + "_" + strings.Repeat("j", 279)
			write(t, s, store.Batch{
				Events:  []store.Event{{ID: fmt.Sprintf("ev-%d", i), Tag: tag, Data: raw(`{}`)}},
				Jobs:    []store.Job{{JID: jids[i], Load: raw(`{"fun": "test.ping"}`)}},
				Returns: []store.Return{{JID: jids[i], MinionID: minion, Fun: "test.ping", Return: raw(`true`), Success: true}},
			})
		}
		after := cutCounts(cuts)
		for col, want := range map[string]int64{"salt_events.tag": n, "jids.jid": n, "salt_returns.jid": n, "salt_returns.id": n} {
			if got := after[col] - before[col]; got != want {
				t.Errorf("Count(%q) grew by %d, want %d", col, got, want)
			}
		}
		for _, col := range []string{"salt_events.master_id", "reactord_event_ids.event_id", "reactord_ledger.tag"} {
			if got := after[col] - before[col]; got != 0 {
				t.Errorf("Count(%q) grew by %d, want 0", col, got)
			}
		}
		if cuts.Count("no.such") != 0 {
			t.Error("the count of an unknown column is not 0")
		}

		// Stored cut.
		evs, err := s.Events(ctx, time.Time{}, "salt/beacon/*", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != n {
			t.Fatalf("%d events read back, want %d", len(evs), n)
		}
		for _, e := range evs {
			if e.Tag != tag[:255] {
				t.Fatalf("tag read back with %d characters, want the first 255", len(e.Tag))
			}
		}
		jobs, err := s.Jobs(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != n || jobs[0].JID != jids[n-1][:255] {
			t.Fatalf("jobs read back: %d, first %.40q…; want %d cut to 255", len(jobs), jobs[0].JID, n)
		}
		rets, err := s.Lookup(ctx, jids[0][:255])
		if err != nil || len(rets) != 1 || rets[0].MinionID != minion[:255] {
			t.Fatalf("lookup of the cut jid: %+v, %v", rets, err)
		}

		// Logged once, then summarised once.
		lines := logLines(buf)
		if len(lines) != 1 {
			t.Fatalf("%d log lines for %d cuts, want 1:\n%s", len(lines), 4*n, strings.Join(lines, "\n"))
		}
		for _, want := range []string{"level=WARN", "table=jids", "column=jid", "length=300", "width=255"} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("first line lacks %q: %s", want, lines[0])
			}
		}
		cuts.rep.summary()
		lines = logLines(buf)
		if len(lines) != 2 {
			t.Fatalf("%d log lines after the summary, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		for _, want := range []string{fmt.Sprintf("count=%d", 4*n-1), "jids.jid=39", "salt_events.tag=40", "salt_returns.id=40", "longest=300"} {
			if !strings.Contains(lines[1], want) {
				t.Errorf("summary lacks %q: %s", want, lines[1])
			}
		}
		cuts.rep.summary()
		if got := len(logLines(buf)); got != 2 {
			t.Errorf("an empty summary logged a line (%d lines)", got)
		}
	})
}

// TestValuesCutLedger counts cuts in reactord_ledger's columns, in a batch
// of one record.
func TestValuesCutLedger(t *testing.T) {
	cuts, _ := captureCuts(t, time.Hour)
	s := newSQLiteDB(t).openWith(t, Options{Cuts: cuts})
	before := cutCounts(cuts)
	long := strings.Repeat("x", 300)
	write(t, s, store.Batch{Ledger: []store.LedgerEntry{{EventID: long, Tag: long, Stage: long, JID: long, Minion: long, Rule: "r"}}})
	after := cutCounts(cuts)
	for _, col := range []string{"reactord_ledger.event_id", "reactord_ledger.tag", "reactord_ledger.stage", "reactord_ledger.jid", "reactord_ledger.minion"} {
		if got := after[col] - before[col]; got != 1 {
			t.Errorf("Count(%q) grew by %d, want 1", col, got)
		}
	}
	if got := after["reactord_ledger.rule"] - before["reactord_ledger.rule"]; got != 0 {
		t.Errorf("Count(reactord_ledger.rule) grew by %d, want 0", got)
	}
}

// TestCutSummaryTimer: cuts held after the first line are summarised once
// the interval has passed, without another write; a cut after a quiet
// interval is logged at once again. Its clock is a bubble's.
func TestCutSummaryTimer(t *testing.T) { synctest.Test(t, testCutSummaryTimer) }

func testCutSummaryTimer(t *testing.T) {
	cuts, buf := captureCuts(t, 50*time.Millisecond)
	var tally cutTally
	for range 5 {
		tally.add(colEventsTag, strings.Repeat("t", 300))
	}
	for range 10 {
		cuts.rep.report(&cutTally{n: tally.n, longest: tally.longest, start: tally.start, any: true})
	}
	if got := len(logLines(buf)); got != 1 {
		t.Fatalf("%d lines at once, want 1", got)
	}
	wait.Until(t, 5*time.Second, "the summary line", func() bool { return len(logLines(buf)) >= 2 })
	lines := logLines(buf)
	if len(lines) != 2 || !strings.Contains(lines[1], "count=49") || !strings.Contains(lines[1], "salt_events.tag=49") {
		t.Fatalf("want one summary of 49 cuts:\n%s", strings.Join(lines, "\n"))
	}
	time.Sleep(60 * time.Millisecond)
	var one cutTally
	one.add(colReturnsFun, strings.Repeat("f", 60))
	cuts.rep.report(&one)
	lines = logLines(buf)
	if len(lines) != 3 || !strings.Contains(lines[2], "table=salt_returns") || !strings.Contains(lines[2], "column=fun") || !strings.Contains(lines[2], "length=60") {
		t.Fatalf("a cut after a quiet interval is not logged at once:\n%s", strings.Join(lines, "\n"))
	}
	cuts.rep.mu.Lock()
	armed := cuts.rep.timer != nil
	cuts.rep.mu.Unlock()
	if armed {
		t.Error("a summary is pending though nothing was held")
	}
}

// TestCutsAreEachStores: two stores with a Cuts each (two daemons in one
// process) count and report their own cuts only.
func TestCutsAreEachStores(t *testing.T) {
	cutsA, bufA := captureCuts(t, time.Hour)
	cutsB, bufB := captureCuts(t, time.Hour)
	a := newSQLiteDB(t).openWith(t, Options{Cuts: cutsA})
	newSQLiteDB(t).openWith(t, Options{Cuts: cutsB})
	write(t, a, store.Batch{Events: []store.Event{{ID: "ev-1", Tag: strings.Repeat("t", 300), Data: raw(`{}`)}}})
	if got := cutsA.Count("salt_events.tag"); got != 1 {
		t.Errorf("the writing store counted %d cuts, want 1", got)
	}
	if got := cutsB.Count("salt_events.tag"); got != 0 {
		t.Errorf("the other store counted %d cuts, want 0", got)
	}
	if len(logLines(bufA)) != 1 || len(logLines(bufB)) != 0 {
		t.Errorf("cut lines: %d in the writer's log, %d in the other's; want 1 and 0", len(logLines(bufA)), len(logLines(bufB)))
	}
}
