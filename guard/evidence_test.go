package guard

import (
	"testing"
	"time"
)

// TestHeldEvidence: a reaction is held back only from events it caused,
// each on its evidence, and never another reaction; guard: minion widens
// it to every event of the job's minions, guard: off holds nothing.
func TestHeldEvidence(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	revert, alert := Reaction{"revert.sls", "revert"}, Reaction{"alert.sls", "alert"}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ev := func(tag, minion string, d time.Duration) Event { return EventOf(tag, minion, at(d)) }
	const beacon = "salt/beacon/web1/inotify//etc/important_file"
	for _, c := range []struct {
		name     string
		r        Reaction
		mode     string
		ev       Event
		evidence string // "" = not held
		phase    string
	}{
		{"its job's beacon while the job runs", revert, ModeBeacons, ev(beacon, "web1", time.Second), EvidenceBeacon, "job running"},
		{"a beacon of a minion its job does not run on", revert, ModeBeacons, ev("salt/beacon/web2/inotify//etc/important_file", "web2", time.Second), "", ""},
		{"another reaction, the same beacon", alert, ModeBeacons, ev(beacon, "web1", time.Second), "", ""},
		{"its job's progress", revert, ModeBeacons, ev("salt/job/J1/prog/web1/0", "web1", time.Second), EvidenceJob, "job running"},
		{"its job's return, to itself", revert, ModeBeacons, ev("salt/job/J1/ret/web1", "web1", 2*time.Second), EvidenceJob, "settling"},
		{"its job's return, to another reaction", alert, ModeBeacons, ev("salt/job/J1/ret/web1", "web1", 2*time.Second), "", ""},
		{"another job's return on the same minion", revert, ModeBeacons, ev("salt/job/J2/ret/web1", "web1", 2*time.Second), "", ""},
		{"a custom event of the minion", revert, ModeBeacons, ev("myco/step", "web1", time.Second), "", ""},
		{"a custom event of the minion, guard: minion", revert, ModeMinion, ev("myco/step", "web1", time.Second), EvidenceMinion, "job running"},
		{"its job's beacon, guard: off", revert, ModeOff, ev(beacon, "web1", time.Second), "", ""},
		{"the minion's start while its job runs", revert, ModeBeacons, ev("salt/minion/web1/start", "web1", time.Second), EvidenceMinionStart, "job running"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := New(Options{Settle: 2 * time.Second, JobTimeout: time.Minute})
			g.Started("ev1", revert, "J1", []string{"web1"}, t0)
			if c.phase == "settling" {
				g.Returned("J1", "web1", OutcomeOK, at(1500*time.Millisecond))
			}
			h, held := g.Held(c.r, c.mode, c.ev)
			if got := map[bool]string{true: h.Evidence}[held]; got != c.evidence || h.Phase != c.phase {
				t.Fatalf("held %v on %q (%s), want %q (%s)", held, h.Evidence, h.Phase, c.evidence, c.phase)
			}
			if held && h.JID != "J1" {
				t.Fatalf("jid %q, want J1", h.JID)
			}
		})
	}
}

// TestHeldSettleWindow: after its job returned, a reaction stays held back
// from the minion's beacons for the settle window only; a minion's start
// after the return is genuine.
func TestHeldSettleWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	r := Reaction{"revert.sls", "revert"}
	g := New(Options{Settle: 2 * time.Second, JobTimeout: time.Minute})
	g.Started("ev1", r, "J1", []string{"web1"}, t0)
	g.Returned("J1", "web1", OutcomeOK, t0.Add(time.Second))
	beacon := func(d time.Duration) bool {
		_, held := g.Held(r, ModeBeacons, EventOf("salt/beacon/web1/inotify//etc/important_file", "web1", t0.Add(d)))
		return held
	}
	if !beacon(2900 * time.Millisecond) {
		t.Error("a beacon 1.9s after the return (settle 2s) was not held back")
	}
	if beacon(3100 * time.Millisecond) {
		t.Error("a beacon 2.1s after the return (settle 2s) was held back")
	}
	if _, held := g.Held(r, ModeBeacons, EventOf("salt/minion/web1/start", "web1", t0.Add(1500*time.Millisecond))); held {
		t.Error("a minion start after its job returned was held back")
	}
	off := New(Options{Disabled: true})
	off.Started("ev1", r, "J1", []string{"web1"}, t0)
	if _, held := off.Held(r, ModeBeacons, EventOf("salt/job/J1/ret/web1", "web1", t0)); held {
		t.Error("--no-loop-guard held a reaction back")
	}
}
