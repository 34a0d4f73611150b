package daemon

import (
	"errors"
	"testing"

	"github.com/reactord/reactord/reactor"
)

// TestRuleBookCounts: a rule's reactions are counted by what was decided:
// a note or a queued event is not held back, a retry is a dispatch.
func TestRuleBookCounts(t *testing.T) {
	b := newRuleBook("conf")
	b.counts["r1"] = &RuleStatus{}
	b.report.Rules = []RuleStatus{{ID: "r1", Glob: "a/*"}}
	for _, d := range []reactor.Decision{
		{Reason: reactor.Noted, RuleID: "r1"},
		{Reason: reactor.Concurrency, RuleID: "r1"},
		{Reason: reactor.Collected, RuleID: "r1"},
		{Reason: reactor.Dispatched, RuleID: "r1"},
		{Reason: reactor.Retried, RuleID: "r1"},
		{Reason: reactor.Throttle, RuleID: "r1"},
		{Reason: reactor.LoopGuard + "minion_start", RuleID: "r1"},
		{Reason: reactor.Failed, RuleID: "r1", Err: errors.New("x")},
		{Reason: reactor.Dispatched, RuleID: "removed"},
		{Reason: reactor.Dispatched},
	} {
		b.Decided(d)
	}
	r := b.Report().Rules[0]
	if r.Dispatched != 2 || r.Held != 2 || r.Failed != 1 || r.Last.IsZero() {
		t.Fatalf("counts %+v, want 2 dispatched, 2 held, 1 failed", r)
	}
	if b2 := newRuleBook("conf"); !b2.Report().LoadedAt.IsZero() || len(b2.Report().Rules) != 0 {
		t.Fatalf("an empty book: %+v", b2.Report())
	}
}
