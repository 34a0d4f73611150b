package event

import "strings"

// JobTag is the tag of a Salt job's event, taken apart: salt/job/<jid>/new
// (a job published), salt/job/<jid>/ret/<minion> (a minion's return),
// salt/run/<jid>/... and salt/wheel/<jid>/... (a runner or wheel job of
// the master's client mixin, whose end is .../ret). It is the one reader
// of Salt's job tags: ordering, the loop guard and the audit store use it.
type JobTag struct {
	// Kind is "job", "run" or "wheel".
	Kind string
	// JID is the job's id.
	JID string
	// Rest is what follows the jid: "new", "ret/<minion>", "ret", "args"...
	Rest string
}

// ParseJobTag takes a job tag apart; ok is false for any other tag.
func ParseJobTag(tag string) (t JobTag, ok bool) {
	rest, ok := strings.CutPrefix(tag, "salt/")
	if !ok {
		return JobTag{}, false
	}
	t.Kind, rest, ok = strings.Cut(rest, "/")
	if !ok || (t.Kind != "job" && t.Kind != "run" && t.Kind != "wheel") {
		return JobTag{}, false
	}
	t.JID, t.Rest, ok = strings.Cut(rest, "/")
	if !ok || t.JID == "" {
		return JobTag{}, false
	}
	return t, true
}

// Return reports whether the tag is a job's return, and whose:
// salt/job/<jid>/ret/<minion> gives the minion; salt/run/<jid>/ret and
// salt/wheel/<jid>/ret, the end of a runner or wheel job, give "" (the
// whole job returned).
func (t JobTag) Return() (minion string, ok bool) {
	if t.Kind != "job" {
		return "", t.Rest == "ret"
	}
	minion, ok = strings.CutPrefix(t.Rest, "ret/")
	if !ok || minion == "" {
		return "", false
	}
	return minion, true
}
