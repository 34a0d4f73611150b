package guard

import (
	"strings"
	"time"

	"github.com/reactord/reactord/event"
)

// The loop guard's modes, a rule's guard option (config.GuardBeacons...).
const (
	// ModeBeacons, the default, holds a reaction back only on evidence
	// that the reaction itself caused the event (see Guard.Held).
	ModeBeacons = "beacons"
	// ModeMinion holds a reaction back from every event of its job's
	// minions until the job returned and the settle window passed.
	ModeMinion = "minion"
	// ModeOff holds nothing back: the hop limit alone applies.
	ModeOff = "off"
)

// The evidence a reaction is held back on: the reason label of
// reactord_suppressed_total is "loop_guard_" and one of these.
const (
	// EvidenceJob: an event of a job the reaction started (its return,
	// its progress), matched by jid.
	EvidenceJob = "job"
	// EvidenceBeacon: a beacon of a minion while a job the reaction
	// started runs there, or within the settle window after it returned.
	EvidenceBeacon = "beacon"
	// EvidenceMinionStart: a minion's start while a job the reaction
	// started on it has not returned (the job restarted it).
	EvidenceMinionStart = "minion_start"
	// EvidenceMinion: any event of a minion a job of the reaction runs
	// on or just settled (guard: minion).
	EvidenceMinion = "minion"
)

// ModeFor is a reaction's mode: its rule's guard option when it has one;
// else ModeMinion for a runner that starts jobs on minions itself
// (orchestration, salt.cmd), whose sub-jobs the guard cannot link to it;
// else ModeBeacons.
func ModeFor(option, state, fun string) string {
	if option != "" {
		return option
	}
	if state == "runner" {
		switch fun {
		case "state.orchestrate", "state.orch", "state.orchestrate_single", "state.orchestrate_high", "state.orchestrate_show_sls",
			"salt.cmd", "salt.execute", "state.event":
			return ModeMinion
		}
	}
	return ModeBeacons
}

// Reaction names one reaction: the stable ID of the rule whose file gave
// it (config.Rule.ID: the same on every replica and across reloads,
// whatever the files' paths) and its reaction ID (__id__).
type Reaction struct{ Rule, ID string }

// Event is what the guard weighs of an arriving event.
type Event struct {
	Tag, Minion string
	// JID is the job of a salt/job|run|wheel/<jid>/... event, and JobKind
	// its family: "job", "run" or "wheel".
	JID, JobKind string
	// Beacon and Start tell salt/beacon/<id>/... and salt/minion/<id>/start.
	Beacon, Start bool
	// At is when it arrived.
	At time.Time
}

// EventOf classifies an event by its tag; minion is the event's minion
// (event.MinionOf).
func EventOf(tag, minion string, at time.Time) Event {
	ev := Event{Tag: tag, Minion: minion, At: at}
	if jt, ok := event.ParseJobTag(tag); ok {
		ev.JID, ev.JobKind = jt.JID, jt.Kind
	}
	ev.Beacon = strings.HasPrefix(tag, "salt/beacon/")
	if rest, ok := strings.CutPrefix(tag, "salt/minion/"); ok {
		id, what, _ := strings.Cut(rest, "/")
		ev.Start = what == "start" && id != ""
	}
	return ev
}

// Hold says why a reaction is held back from an event.
type Hold struct {
	// Evidence is one of EvidenceJob, EvidenceBeacon, ...
	Evidence string
	// JID is the reaction's job the evidence links to ("" for a driver
	// that gives none).
	JID string
	// Phase is "job running" or "settling".
	Phase string
}

// held is Guard.Held's job-linked part. A minion's start it holds back
// ends the job on that minion, as its return would (a restarted minion
// never returns the job it was running): the next start is genuine.
func (j *jobs) held(r Reaction, mode string, ev Event) (Hold, bool) {
	h, ok, restarted := j.weigh(r, mode, ev)
	if restarted != "" {
		j.ret(restarted, ev.Minion, OutcomeUnknown, ev.At)
	}
	return h, ok
}

// weigh is held's look at the evidence, under the lock; restarted is the
// jid a start of the minion ends.
func (j *jobs) weigh(r Reaction, mode string, ev Event) (h Hold, ok bool, restarted string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ev.JID != "" {
		for _, k := range j.byJID[ev.JID] {
			if k.rule == r.Rule && k.id == r.ID {
				return Hold{Evidence: EvidenceJob, JID: ev.JID, Phase: j.entries[k].phase()}, true, ""
			}
		}
	}
	if ev.Minion == "" {
		return Hold{}, false, ""
	}
	e := j.entries[jobKey{r.Rule, r.ID, ev.Minion}]
	if e == nil || !ev.At.Before(e.until) {
		return Hold{}, false, ""
	}
	h = Hold{JID: e.jid, Phase: e.phase()}
	switch {
	case ev.Start && !e.returned && e.jid != "":
		h.Evidence, restarted = EvidenceMinionStart, e.jid
		if mode == ModeMinion {
			h.Evidence = EvidenceMinion
		}
	case mode == ModeMinion:
		h.Evidence = EvidenceMinion
	case ev.Beacon:
		h.Evidence = EvidenceBeacon
	default:
		return Hold{}, false, ""
	}
	return h, true, restarted
}

// phase is "job running" before the job returned, then "settling".
func (e *jobEntry) phase() string {
	if e == nil || e.returned {
		return "settling"
	}
	return "job running"
}
