package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/suggest"
)

// saltTagFamilies are the second parts of the tags Salt's master, minions
// and their beacons, engines and runners emit under salt/ (salt/minion/…,
// salt/job/…): Salt's own TAGS table and the tags built elsewhere.
var saltTagFamilies = []string{"auth", "beacon", "cloud", "cluster", "engines", "event", "fileserver", "job", "key", "master",
	"minion", "netapi", "presence", "queue", "run", "scheduler", "stats", "syndic", "wheel"}

// jobTagKinds are what follows salt/job/<jid>/: a publish, a return, a
// state run's progress, a syndic's sub-job.
var jobTagKinds = []string{"new", "ret", "prog", "sub"}

// tagProblems reports a rule's glob that matches no tag Salt emits (a
// `*` could stretch over a minion id that spells the missing part, which
// no real estate does):
// a misspelt family under salt/ (salt/minon/*/start), a job event kind
// that does not exist, an inotify beacon path without the slash Salt keeps
// after the beacon's name (salt/beacon/*/inotify//etc/file).
func tagProblems(r config.Rule) []error {
	segs := strings.Split(r.Glob, "/")
	if len(segs) < 2 || segs[0] != "salt" || hasMagic(segs[1]) {
		return nil
	}
	never := func(why string) []error {
		return []error{&config.Error{Pos: r.Pos, Msg: fmt.Sprintf("tag glob %q matches no event Salt emits: %s", r.Glob, why)}}
	}
	family := segs[1]
	if !slices.Contains(saltTagFamilies, family) {
		why := fmt.Sprintf("Salt has no salt/%s/ tags", family)
		if near := suggest.Closest(family, saltTagFamilies); near != "" {
			why += fmt.Sprintf(" (did you mean salt/%s/?)", near)
		}
		return never(why)
	}
	switch {
	case family == "job" && len(segs) >= 4 && !hasMagic(segs[3]) && !slices.Contains(jobTagKinds, segs[3]):
		why := fmt.Sprintf("a job's events are salt/job/<jid>/new, /ret/<minion> and /prog/<minion>/<n>, not /%s", segs[3])
		if near := suggest.Closest(segs[3], jobTagKinds); near != "" {
			why += fmt.Sprintf(" (did you mean /%s?)", near)
		}
		return never(why)
	case family == "beacon" && len(segs) >= 5 && segs[3] == "inotify" && segs[4] != "" && !hasMagic(segs[4][:1]):
		return never("an inotify beacon's tag carries the watched path with its leading slash, after a double slash: salt/beacon/<minion>/inotify//" + strings.Join(segs[4:], "/"))
	}
	return nil
}

// hasMagic reports whether s holds a glob character.
func hasMagic(s string) bool { return strings.ContainsAny(s, "*?[") }
