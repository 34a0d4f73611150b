package engine

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/reactions"
)

// reactionTypes are the reaction types Salt's reactor runs (cmd is the
// legacy spelling of local).
var reactionTypes = map[string]bool{"local": true, "runner": true, "wheel": true, "caller": true, "cmd": true}

// knownTypes takes out of one file's reactions (fr) those whose type is
// not a reaction type — `foo.bar`, a typo such as `lcoal.state.apply` —
// which Salt's reactor fails on when it runs them, and which no driver can
// run: each is reported at its position, counted as an error and logged,
// in a FileResult of its own. The others go on.
func (e *Engine) knownTypes(log *slog.Logger, tag string, rule *config.Rule, fr FileResult, rs []reactions.Reaction) ([]reactions.Reaction, []FileResult) {
	var refused []FileResult
	kept := rs[:0]
	for i := range rs {
		r := &rs[i]
		bad := ""
		for j := 0; j < r.Body.Len() && bad == ""; j++ {
			key, _ := r.Body.At(j)
			if strings.HasPrefix(key, "__") {
				continue
			}
			if typ, _, _ := strings.Cut(key, "."); !reactionTypes[typ] {
				bad = key
			}
		}
		if bad == "" {
			kept = append(kept, *r)
			continue
		}
		typ, _, _ := strings.Cut(bad, ".")
		err := &reactions.PosError{Pos: position.Pos{File: r.File, Line: r.Line, Col: r.Col}, Msg: fmt.Sprintf(
			"reaction %v: %q is not a reaction type (%s): write local.<module.function>, runner.<...>, wheel.<...> or caller.<...>", r.ID, typ, bad)}
		e.stats.Errors.Add(1)
		e.noisy(log, slog.LevelError, rule.Glob+"\x00"+fr.Path, "reaction refused: unknown reaction type", "tag", tag, "rule", rule.Glob, "rule_pos", rule.Pos.String(), "err", err)
		refused = append(refused, FileResult{Rule: fr.Rule, Ref: fr.Ref, Path: fr.Path, Err: err})
	}
	return kept, refused
}
