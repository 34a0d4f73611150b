package reactor

import (
	"strings"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// firedTag returns the tag an event-sending reaction will fire, if the
// chunk is one (event.send / event.fire_master).
func firedTag(c *event.Chunk) string {
	switch c.Str("fun") {
	case "event.send", "event.fire_master", "event.fire":
	default:
		return ""
	}
	call, err := actions.CallFor(c)
	if err != nil {
		return ""
	}
	if v, ok := call.Kwarg.Get("tag"); ok {
		s, _ := v.(string)
		return s
	}
	if len(call.Arg) > 0 {
		s, _ := call.Arg[0].(string)
		return s
	}
	if v, ok := c.Get("tag"); ok { // legacy runner body: - tag: x
		s, _ := v.(string)
		return s
	}
	return ""
}

// targetsOf returns the minions a dispatched chunk's job runs on: what the
// driver reported, else a literal target, else the event's minion.
func targetsOf(c *event.Chunk, r actions.Result, eventMinion string) []string {
	if len(r.Minions) > 0 {
		return r.Minions
	}
	tgtType := c.Str("tgt_type")
	if tgtType != "" && tgtType != "glob" && tgtType != "list" {
		// nodegroup, grain, compound...: the minions are not known here.
		if eventMinion != "" {
			return []string{eventMinion}
		}
		return nil
	}
	switch t, _ := c.Get("tgt"); tt := t.(type) {
	case string:
		if tgtType == "list" {
			var out []string
			for _, m := range strings.Split(tt, ",") {
				if m = strings.TrimSpace(m); m != "" {
					out = append(out, m)
				}
			}
			if len(out) > 0 {
				return out
			}
		} else if tt != "" && !strings.ContainsAny(tt, "*?[]@,: ") {
			return []string{tt}
		}
	case []any:
		var out []string
		for _, e := range tt {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	if eventMinion != "" {
		return []string{eventMinion}
	}
	return nil
}
