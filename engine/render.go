package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/reactions"
)

// RenderOptions adjust how a matched event's reaction files render.
type RenderOptions struct {
	// Collected, when set, are the events a rule's collect option gathered
	// ({"tag", "data"} maps, in order; the event rendered is the last):
	// the files render with them as events.
	Collected []any
}

// Render renders the reaction files of the admitted rules, with the
// configuration the event was matched with, and compiles them into low
// chunks as Salt's reactor does. Each chunk carries the rule whose file
// made it (Result.ChunkRules). It fails only when ctx ends.
func (m *Match) Render(ctx context.Context, opts RenderOptions) (*Result, error) {
	res := m.Result
	if res.Skipped != "" || len(m.Admitted) == 0 {
		return res, nil
	}
	var high reactions.High
	// owner is, by the file and ID of a reaction, the rule that rendered
	// it: a later file replacing an ID replaces its owner too.
	owner := map[chunkKey]int{}
	for _, a := range m.Admitted {
		for _, sls := range a.Rule.SLS {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m.renderRef(ctx, a, sls, opts, &high, owner)
		}
	}
	return m.compile(&high, owner), nil
}

// chunkKey names a reaction by its file and ID, as its chunks carry them
// (__sls__, __id__).
type chunkKey struct{ file, id string }

// renderRef renders the files one SLS reference of rule a names, adding
// their reactions to high.
func (m *Match) renderRef(ctx context.Context, a Admitted, sls config.SLS, opts RenderOptions, high *reactions.High, owner map[chunkKey]int) {
	e, res, tag := m.eng, m.Result, m.Result.Tag
	var paths []string
	if sls.Pattern != "" {
		paths = e.lib.Glob(sls.Pattern)
	}
	if len(paths) == 0 {
		fr := FileResult{Rule: a.Index, Ref: sls.Ref, Err: &reactions.PosError{Pos: sls.Pos,
			Msg: fmt.Sprintf("can not render SLS %s for tag %s: file missing or not found", sls.Ref, tag)}}
		res.Files = append(res.Files, fr)
		e.fileError(m.log, tag, a.Rule, fr.Err)
		return
	}
	for _, p := range paths {
		fr := FileResult{Rule: a.Index, Ref: sls.Ref, Path: p}
		rs, refused, err := m.renderFile(ctx, a, p, opts, &fr)
		for _, r := range rs {
			if id, ok := r.ID.(string); ok {
				owner[chunkKey{p, id}] = a.Index
			}
		}
		high.Add(rs)
		if err != nil {
			fr.Err = err
			e.fileError(m.log, tag, a.Rule, err)
		}
		res.Files = append(res.Files, fr)
		res.Files = append(res.Files, refused...)
	}
}

// renderFile renders one file of rule a: its reactions, those refused
// (unknown types, literal_target), and the file's error.
func (m *Match) renderFile(ctx context.Context, a Admitted, p string, opts RenderOptions, fr *FileResult) ([]reactions.Reaction, []FileResult, error) {
	e, res, tag := m.eng, m.Result, m.Result.Tag
	f, err := e.lib.File(p)
	if err != nil {
		return nil, nil, err
	}
	ro := reactions.RenderOptions{Events: opts.Collected}
	if ro.Events == nil && a.Rule.Options.Collect.Within > 0 {
		// render, check, explain: a collection of this one event.
		ro.Events = []any{map[string]any{"tag": tag, "data": m.Data}}
	}
	if f.SaltCalls > 0 {
		ro.Salt = e.saltCalls.Session(ctx)
	}
	rs, err := f.RenderWith(tag, m.Data, ro)
	if calls := ro.Salt.Calls(); len(calls) > 0 {
		res.SaltCalls = append(res.SaltCalls, FileSaltCalls{Path: p, Calls: calls})
	}
	rs, refused := e.knownTypes(m.log, tag, a.Rule, *fr, rs)
	if e.literal[a.Index] {
		var more []FileResult
		rs, more = e.literalTargets(m.log, tag, a.Rule, *fr, rs)
		refused = append(refused, more...)
	}
	fr.Reactions = len(rs)
	for _, r := range rs {
		for _, w := range r.Warnings {
			res.Warnings = append(res.Warnings, w)
			e.noisy(m.log, slog.LevelWarn, a.Rule.Glob+"\x00"+fr.Path, "reaction dropped silently by Salt's rules", "tag", tag, "rule", a.Rule.Glob, "warning", w)
		}
	}
	return rs, refused, err
}

// compile verifies and compiles the reactions rendered, as Salt does,
// into the result's chunks and the rule of each.
func (m *Match) compile(high *reactions.High, owner map[chunkKey]int) *Result {
	e, res, log, tag := m.eng, m.Result, m.log, m.Result.Tag
	res.Overwritten = high.Overwritten
	for _, o := range high.Overwritten {
		log.Debug("reaction ID overwritten by a later file", "tag", tag, "id", o.ID, "old", fmt.Sprintf("%s:%d", o.Old.File, o.Old.Line), "new", fmt.Sprintf("%s:%d", o.New.File, o.New.Line))
	}
	if high.Len() == 0 {
		return res
	}
	if errs := high.Verify(); len(errs) > 0 {
		res.VerifyErrors = errs
		e.stats.Errors.Add(1)
		e.noisy(log, slog.LevelError, "", "unable to render reactions for event: all dropped, as Salt does", "tag", tag, "err", errors.Join(errs...))
		return res
	}
	res.Chunks = high.Compile()
	res.ChunkRules = make([]int, len(res.Chunks))
	for i, c := range res.Chunks {
		ri, ok := owner[chunkKey{c.Str("__sls__"), c.Str("__id__")}]
		if !ok {
			ri = -1
		}
		res.ChunkRules[i] = ri
		if c.Has("expr_form") {
			w := fmt.Errorf("%s: reaction %q uses expr_form, which Salt ignores since 2019.2.0 (the job targets with tgt_type, default glob); use tgt_type", c.Str("__sls__"), c.Str("__id__"))
			res.Warnings = append(res.Warnings, w)
			e.noisy(log, slog.LevelWarn, c.Str("__sls__")+"\x00"+c.Str("__id__"), "deprecated option", "tag", tag, "warning", w)
		}
	}
	e.stats.Reactions.Add(int64(len(res.Chunks)))
	return res
}

// RuleOf returns the rule whose file made chunk i of the result, nil when
// none is known.
func (r *Result) RuleOf(i int) *config.Rule {
	if r.Config == nil || i >= len(r.ChunkRules) || r.ChunkRules[i] < 0 {
		return nil
	}
	return &r.Config.Rules[r.ChunkRules[i]]
}
