package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/store"
)

// Salt's reactor's answers to reactor.add and reactor.delete (its words,
// which scripts may compare).
const (
	saltAdded     = "Reactor added."
	saltExists    = "Reactor already exists."
	saltDeleted   = "Reactor deleted."
	saltNotExists = "Reactor does not exists."
)

// errRuleAnswer carries the comment of a refused add or delete.
type errRuleAnswer struct{ comment string }

func (e errRuleAnswer) Error() string { return e.comment }

// masterEngine is the reactord Salt engine of the master driver, nil for
// another driver or none.
func masterEngine(drv actions.Driver) *masterdriver.Engine {
	if r, ok := drv.(actions.Router); ok {
		drv = r.Primary
	}
	if m, ok := drv.(*masterdriver.Driver); ok {
		return m.Engine()
	}
	return nil
}

// startManage answers salt-run reactor.* through the master driver's
// Salt engine, which reads and checks the requests inside the master.
func (d *Daemon) startManage(context.Context) error {
	if d.mengine == nil || d.opts.Shadow {
		return nil
	}
	e := d.mengine
	d.background(func(ctx context.Context) { e.Manage(ctx, d.manage) })
	return nil
}

// manage answers one salt-run reactor.* request with the data of Salt's
// reactor's answer event.
func (d *Daemon) manage(ctx context.Context, req masterdriver.ManageRequest) map[string]any {
	// Within the engine's own wait for the answer: a change not made by
	// then is not made at all, so salt-run's "no answer" is never
	// followed by the change.
	ctx, cancel := context.WithTimeout(ctx, manageDeadline)
	defer cancel()
	switch req.Verb {
	case "list":
		return map[string]any{"reactors": d.saltList()}
	case "add", "delete":
		status, comment := true, saltDeleted
		if req.Verb == "add" {
			comment = saltAdded
		}
		if err := d.changeRules(ctx, req); err != nil {
			status, comment = false, err.Error()
		}
		return map[string]any{"reactors": d.saltList(), "result": map[string]any{"status": status, "comment": comment}}
	case "set_leader":
		d.setLeader(ctx, req)
	}
	return map[string]any{"result": !d.paused(req.Master)}
}

// manageDeadline bounds reactord's handling of one salt-run reactor.*
// request: shorter than the 20 s the Salt engine waits for reactord's
// answer before it answers salt-run with an error.
const manageDeadline = 15 * time.Second

// saltList lists the running rules as Salt's reactor does.
func (d *Daemon) saltList() []map[string][]string {
	if p := d.running.Load(); p != nil {
		return p.Engine().Config().SaltList()
	}
	return d.cfg.SaltList()
}

// changeRules adds or deletes a rule as req asks: the change is stored
// (every replica sees it), applied to the running pipeline as a reload
// applies a configuration, logged and written to the ledger. An error's
// text is the answer's comment.
func (d *Daemon) changeRules(ctx context.Context, req masterdriver.ManageRequest) error {
	glob, _ := req.Data["event"].(string)
	if glob == "" {
		return errRuleAnswer{"reactord: the request names no event (tag glob)"}
	}
	var files []string
	if req.Verb == "add" {
		var err error
		if files, err = reactionFiles(req.Data["reactors"]); err != nil {
			return err
		}
	}
	if d.ruleDoc == nil {
		return errRuleAnswer{"reactord: rule changes are unavailable (see reactord's log)"}
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if dl, ok := ctx.Deadline(); ctx.Err() != nil || (ok && !time.Now().Before(dl)) {
		// Waited behind a reload past the engine's patience (the
		// deadline read too: a context's cancellation reaches its
		// children a moment after its own).
		return errRuleAnswer{fmt.Sprintf("reactord: not changed: waited over %s behind a reload; ask again", manageDeadline)}
	}
	var (
		eng *engine.Engine
		raw []byte
		ch  *ruleChanges
	)
	now := time.Now().UTC()
	rev, err := d.ruleDoc.Update(ctx, func(cur []byte) ([]byte, error) {
		var err error
		if ch, err = parseChanges(cur); err != nil {
			return nil, err
		}
		base, err := config.Load(d.opts.Config)
		if err != nil {
			return nil, errRuleAnswer{"reactord: the configuration does not load: " + err.Error()}
		}
		if err := editChanges(ch, base, req, glob, files, now); err != nil {
			return nil, err
		}
		if eng, err = d.loadEngine(base.Overlaid(ch.Added, ch.globs())); err != nil {
			return nil, errRuleAnswer{"reactord: the rules would not load: " + err.Error()}
		}
		raw, err = json.Marshal(ch)
		return raw, err
	})
	if err != nil {
		var ans errRuleAnswer
		if !errors.As(err, &ans) {
			d.log.Error("salt-run reactor change not stored", "verb", req.Verb, "glob", glob, "err", err)
			return errRuleAnswer{"reactord: " + err.Error()}
		}
		return err
	}
	d.changesRaw, d.changesRev = raw, max(d.changesRev, rev)
	d.changes.Store(ch)
	if err := d.swapEngine(eng); err != nil {
		d.log.Error("salt-run reactor change not applied", "verb", req.Verb, "glob", glob, "err", err)
		return errRuleAnswer{"reactord: stored, not applied: " + err.Error()}
	}
	what := "deleted by salt-run reactor.delete"
	if req.Verb == "add" {
		what = "added by salt-run reactor.add"
	}
	d.log.Info("rule changed by salt-run", "verb", req.Verb, "glob", glob, "files", files, "master", req.Master, "store", d.ruleDoc.Where())
	d.archive.Ledger(store.LedgerEntry{Stage: store.StageRules, Tag: "salt/reactors/manage/" + req.Verb, Rule: glob,
		File: strings.Join(files, ", "), Detail: what + " on master " + req.Master, Time: now})
	return nil
}

// editChanges changes ch as Salt's reactor changes its list: add appends
// a rule unless one has its glob; delete removes the first rule with the
// glob (the configuration's before the added ones).
func editChanges(ch *ruleChanges, base *config.Config, req masterdriver.ManageRequest, glob string, files []string, now time.Time) error {
	conf := base.Overlaid(nil, ch.globs())
	inConf := slices.ContainsFunc(conf.Rules, func(r config.Rule) bool { return r.Glob == glob })
	added := slices.IndexFunc(ch.Added, func(a config.Added) bool { return a.Glob == glob })
	switch {
	case req.Verb == "add" && (inConf || added >= 0):
		return errRuleAnswer{saltExists}
	case req.Verb == "add":
		ch.Added = append(ch.Added, config.Added{Glob: glob, Files: files, At: now, Master: req.Master})
	case inConf:
		ch.Deleted = append(ch.Deleted, deletedRule{Glob: glob, At: now, Master: req.Master})
	case added >= 0:
		ch.Added = slices.Delete(ch.Added, added, added+1)
	default:
		return errRuleAnswer{saltNotExists}
	}
	return nil
}

// reactionFiles reads reactor.add's reactors: a path or a list of them.
func reactionFiles(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		if x != "" {
			return []string{x}, nil
		}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, errRuleAnswer{fmt.Sprintf("reactord: reactors holds %v, not a path", e)}
			}
			out = append(out, s)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, errRuleAnswer{"reactord: reactors names no reaction file"}
}

// setLeader pauses or resumes the reactions of the request's master, as
// Salt's reactor takes set_leader from its own master only.
func (d *Daemon) setLeader(ctx context.Context, req masterdriver.ManageRequest) {
	id, _ := req.Data["id"].(string)
	value, ok := req.Data["value"].(bool)
	if id != req.Master || !ok {
		d.log.Warn("salt-run reactor.set_leader ignored", "id", id, "master", req.Master, "value", req.Data["value"],
			"detail", "it names another master, or its value is not True or False")
		return
	}
	if d.ruleDoc == nil {
		d.log.Warn("salt-run reactor.set_leader ignored", "id", id, "detail", "rule changes are unavailable")
		return
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	var ch *ruleChanges
	var raw []byte
	old := d.changes.Load()
	rev, err := d.ruleDoc.Update(ctx, func(cur []byte) ([]byte, error) {
		var err error
		if ch, err = parseChanges(cur); err != nil {
			return nil, err
		}
		_, paused := ch.Paused[id]
		switch {
		case value && paused:
			delete(ch.Paused, id)
		case !value && !paused:
			if ch.Paused == nil {
				ch.Paused = map[string]time.Time{}
			}
			ch.Paused[id] = time.Now().UTC()
		}
		raw, err = json.Marshal(ch)
		return raw, err
	})
	if err != nil {
		d.log.Error("salt-run reactor change not stored", "verb", req.Verb, "master", id, "err", err)
		return
	}
	d.changesRaw, d.changesRev = raw, max(d.changesRev, rev)
	d.changes.Store(ch)
	d.notePause(old, ch)
	d.archive.Ledger(store.LedgerEntry{Stage: store.StageRules, Tag: "salt/reactors/manage/set_leader",
		Detail: fmt.Sprintf("master %s: leader %v (salt-run reactor.set_leader)", id, value)})
}

// ownMaster is the id of the master this replica reacts for: its Salt
// engine's, else --master-id.
func (d *Daemon) ownMaster() string {
	if d.mengine != nil {
		if m := d.mengine.Master(); m != "" {
			return m
		}
	}
	return d.opts.MasterID
}

// paused reports whether master's reactions are paused.
func (d *Daemon) paused(master string) bool {
	ch := d.changes.Load()
	if ch == nil {
		return false
	}
	_, ok := ch.Paused[master]
	return ok
}

// reactionsPaused is the pipeline's Paused: this replica's master is.
func (d *Daemon) reactionsPaused() bool { return d.paused(d.ownMaster()) }

// notePause logs the pause or resume of this replica's master, once.
func (d *Daemon) notePause(old, cur *ruleChanges) {
	own := d.ownMaster()
	_, was := old.Paused[own]
	_, is := cur.Paused[own]
	switch {
	case is && !was:
		d.log.Warn("reactions paused: salt-run reactor.set_leader False", "master", own,
			"detail", "no event is reacted to; reactord_suppressed_total{reason=\"not_leader\"} counts them",
			"fix", "salt-run reactor.set_leader True")
	case was && !is:
		d.log.Info("reactions resumed: salt-run reactor.set_leader True", "master", own)
	}
}
