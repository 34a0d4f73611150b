package engine

import (
	"strings"

	"github.com/reactord/reactord/config"
)

// minionEventCmd is the "cmd" a Salt master leaves in the data of an event
// a minion sent it (salt.daemons.masterapi's _minion_event fires the whole
// request as the event's data: cmd, id, tag, data, pretag). The master
// verified the request's "id" against the minion's key before firing it.
// Events a minion sends in a batch ("events": beacons, syndics) are fired
// with their own data only, and carry neither.
const minionEventCmd = "_minion_event"

// masterOnlyFamilies are the tag families only the master itself fires: a
// minion has no business sending them.
var masterOnlyFamilies = []string{"salt/job", "salt/auth", "salt/key", "salt/run", "salt/wheel", "salt/presence"}

// Origin is who sent an event, as far as its data tells.
type Origin struct {
	// Minion is the verified id of the minion that sent the event; "" for
	// an event the master fired itself, or one that carries no sender (a
	// batched minion event).
	Minion string
	// Forged, for an event a minion sent, says why the event claims more
	// than its sender may: a tag naming another minion, or a family only
	// the master fires. "" otherwise.
	Forged string
	// Family is the tag's family, for logs: its first two segments.
	Family string
}

// OriginOf reads an event's origin from its tag and data.
func OriginOf(tag string, data map[string]any) Origin {
	o := Origin{Family: family(tag)}
	if cmd, _ := data["cmd"].(string); cmd != minionEventCmd {
		return o
	}
	id, _ := data["id"].(string)
	if id == "" {
		o.Minion = "?"
		o.Forged = "a minion event without the sender's id"
		return o
	}
	o.Minion = id
	if rest, ok := strings.CutPrefix(tag, "salt/job/"); ok {
		// A state run's progress (state_events: true): the minion sends
		// salt/job/<jid>/prog/<its id>/<n> itself.
		if parts := strings.Split(rest, "/"); len(parts) >= 3 && parts[1] == "prog" {
			if parts[2] != id {
				o.Forged = "minion " + id + " sent an event naming minion " + parts[2]
			}
			return o
		}
	}
	for _, f := range masterOnlyFamilies {
		if tag == f || strings.HasPrefix(tag, f+"/") {
			o.Forged = "minion " + id + " sent a " + f + " event, which only the master fires"
			return o
		}
	}
	for _, p := range []string{"salt/minion/", "salt/beacon/"} {
		rest, ok := strings.CutPrefix(tag, p)
		if !ok {
			continue
		}
		named, more, ok := strings.Cut(rest, "/")
		if ok && more != "" && named != id {
			o.Forged = "minion " + id + " sent an event naming minion " + named
		}
	}
	return o
}

// family is a tag's first two segments (salt/minion), or fewer.
func family(tag string) string {
	if i := strings.IndexByte(tag, '/'); i >= 0 {
		if j := strings.IndexByte(tag[i+1:], '/'); j >= 0 {
			return tag[:i+1+j]
		}
	}
	return tag
}

// admits reports whether a rule with the from option from reacts to an
// event of origin o, and if not, why.
func (o Origin) admits(from string) (bool, string) {
	switch from {
	case config.FromAny:
		return true, ""
	case config.FromMaster:
		if o.Minion != "" {
			return false, "from: master, and minion " + o.Minion + " sent the event"
		}
	case config.FromMinion:
		if o.Minion == "" {
			return false, "from: minion, and the event carries no sending minion (the master fired it, or it came in a batch)"
		}
	}
	if o.Forged != "" {
		return false, "forged event: " + o.Forged + " (from: any on the rule accepts it)"
	}
	return true, ""
}
