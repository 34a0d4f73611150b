// Package engine is reactord's pipeline for one event, as Salt's reactor
// runs it, without executing anything: Match (Salt's pre-filters, the tag
// globs, each rule's `from` and `when`) and then Match.Render (the
// admitted rules' reaction files rendered and compiled into low chunks,
// each chunk with its rule). The daemon applies its rule options that hold
// events back (throttle, debounce, concurrency, collect) between the two;
// check, render, explain and replay call Process, which does both.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/matchers"
	"github.com/reactord/reactord/reactions"
)

// ReactorUser is the data.user value Salt's reactor stamps on the runner and
// wheel jobs it starts; events carrying it are skipped to avoid loops.
const ReactorUser = "Reactor"

// Skip reasons reported in Result.Skipped.
const (
	SkipReactorUser = "event fired by the reactor itself (data.user == \"Reactor\")"
	SkipManageTag   = "salt/reactors/manage request (not matched: the reactord Salt engine checks its key and hands it over)"
)

// Engine matches events against a configuration and compiles the reactions
// they trigger. It is safe for concurrent use.
type Engine struct {
	cfg   *config.Config
	table *matchers.Table
	lib   *reactions.Library
	log   *slog.Logger
	when  []*matchers.Expr // per rule; nil when the rule has no condition
	keys  []*matchers.Expr // per rule; nil: the event's minion
	// literal is, per rule, its literal_target option (or the
	// reactord-wide default).
	literal []bool
	// limit keeps lines that could repeat once per event to one a
	// minute per message and key.
	limit *ratelog.Keyed
	// saltCalls serves the files' Salt calls while rendering (nil: none).
	saltCalls *reactions.SaltCalls

	// opts are the options the engine was built with (a check's engine
	// is built with the same).
	opts Options

	stats Stats
}

// Stats are running counters.
type Stats struct {
	Events    atomic.Int64
	Matched   atomic.Int64
	Reactions atomic.Int64
	Errors    atomic.Int64
	Malformed atomic.Int64
}

// Options are what an engine is built with besides its configuration:
// everything it needs, given once (an engine is never changed after New; a
// reload builds a new one).
type Options struct {
	// Renderer, when set, is how reaction files are read instead of the
	// configuration's renderer (config.Settings.Renderer): one of
	// config.Renderers, as --renderer or --jinja chose it.
	Renderer string
	// SaltCalls serves the reaction files' Salt calls while rendering
	// (nil: a render reaching one fails, naming it).
	SaltCalls *reactions.SaltCalls
	// Limits bound each render of a reaction file (zero fields:
	// reactions.DefaultLimits).
	Limits reactions.Limits
	// Log receives the engine's lines (nil: discarded).
	Log *slog.Logger
	// OnCompile, when set, is told of each reaction file compiled (read
	// from disk and parsed): each file once, then once per change on disk.
	OnCompile func(path string)
	// Settle is how long a changed reaction file must have stayed
	// unchanged before it replaces the version in use
	// (reactions.Library.Settle; zero: reactions.DefaultSettle).
	Settle time.Duration
	// Files, when set, are the compiled reaction files of an engine of
	// the same configuration (Engine.Files), read as that engine's
	// Renderer and Limits said (these then do not apply): the daemon's
	// start checks the files before anything else starts and reacts with
	// the files the check compiled, each compiled once.
	Files *Files
}

// Files are the compiled reaction files of an engine, which another engine
// of the same configuration may take over (Options.Files).
type Files struct{ lib *reactions.Library }

// Files returns the engine's compiled reaction files.
func (e *Engine) Files() *Files { return &Files{lib: e.lib} }

// New builds an engine for a loaded configuration, compiling the rules'
// conditions and keys; their errors are positioned in the configuration.
func New(cfg *config.Config, o Options) (*Engine, error) {
	if o.Files != nil {
		return build(cfg, o, o.Files.lib)
	}
	return build(cfg, o, nil)
}

// build is New with the library of reaction files lib (nil: a new one),
// for a check that shares an engine's files.
func build(cfg *config.Config, o Options, lib *reactions.Library) (*Engine, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	renderer := o.Renderer
	if renderer == "" {
		renderer = cfg.Settings.Renderer
	}
	shared := lib != nil
	if !shared {
		lib = newLibrary(renderer, o.Limits)
		lib.OnCompile = o.OnCompile
	}
	globs := make([]string, len(cfg.Rules))
	e := &Engine{cfg: cfg, lib: lib, log: log, saltCalls: o.SaltCalls, limit: ratelog.NewKeyed(time.Minute, 1024),
		when: make([]*matchers.Expr, len(cfg.Rules)), keys: make([]*matchers.Expr, len(cfg.Rules)), literal: make([]bool, len(cfg.Rules)), opts: o}
	var errs []error
	for i, r := range cfg.Rules {
		globs[i] = r.Glob
		e.literal[i] = cfg.Settings.LiteralTarget
		if r.Options.LiteralTarget != nil {
			e.literal[i] = *r.Options.LiteralTarget
		}
		if r.Options.When != "" {
			x, err := matchers.CompileCondition(r.Options.When)
			if err != nil {
				errs = append(errs, exprError(r.Options.WhenPos, "when", err))
			}
			e.when[i] = x
		}
		if r.Options.Key != "" {
			x, err := matchers.CompileKey(r.Options.Key)
			if err != nil {
				errs = append(errs, exprError(r.Options.KeyPos, "key", err))
			}
			e.keys[i] = x
		}
	}
	if !shared { // the library's first engine says what happens to its files
		e.lib.KeepLastGood = true
		e.lib.Settle = cmp.Or(o.Settle, reactions.DefaultSettle)
		e.lib.OnStale = func(path string, err error) {
			e.log.Error("reaction file changed and does not load: previous version kept", "file", path, "err", err.Error(),
				"fix", "reactord check -c CONF")
		}
	}
	e.table = matchers.NewTable(globs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// BrokenFiles lists, by path, the reaction files of the rules that do not
// load now (not those missing: Salt renders nothing for those), and those
// whose last change did not load, served from their previous version. The
// files are looked at on disk at most once a second.
func (e *Engine) BrokenFiles() map[string]error {
	out := e.lib.Stale()
	for _, r := range e.cfg.Rules {
		for _, sls := range r.SLS {
			if sls.Pattern == "" {
				continue
			}
			for _, p := range e.lib.Glob(sls.Pattern) {
				if _, err := e.lib.File(p); err != nil && !missing(err) {
					out[p] = err
				}
			}
		}
	}
	return out
}

func exprError(p config.Pos, what string, err error) error {
	var ee *matchers.ExprError
	if errors.As(err, &ee) {
		col := ee.Col
		if ee.Line == 1 {
			col += p.Col - 1
		}
		return &config.Error{Pos: config.Pos{File: p.File, Line: p.Line + ee.Line - 1, Col: col}, Msg: what + ": " + ee.Msg}
	}
	return &config.Error{Pos: p, Msg: what + ": " + err.Error()}
}

// newLibrary is a library of reaction files read the renderer's way
// (config.Renderers; "" is config.RendererAuto) and rendered within lim.
func newLibrary(renderer string, lim reactions.Limits) *reactions.Library {
	lib := reactions.NewLibrary()
	lib.Frontend = frontend(renderer)
	lib.Limits = lim
	return lib
}

// MustNew is New for configurations known to be valid (tests).
func MustNew(cfg *config.Config, o Options) *Engine {
	e, err := New(cfg, o)
	if err != nil {
		panic(err)
	}
	return e
}

// StaticTypes returns the reaction types used by reaction files whose
// output does not depend on the event.
func (e *Engine) StaticTypes() []string {
	var out []string
	for _, r := range e.cfg.Rules {
		for _, sls := range r.SLS {
			if sls.Pattern == "" {
				continue
			}
			for _, p := range e.lib.Glob(sls.Pattern) {
				f, err := e.lib.File(p)
				if err != nil || !f.Static() {
					continue
				}
				rs, err := f.Render("", map[string]any{})
				if err != nil {
					continue
				}
				for _, rc := range rs {
					for _, k := range rc.Body.Keys() {
						if !strings.HasPrefix(k, "_") {
							out = append(out, k)
						}
					}
				}
			}
		}
	}
	return out
}

// ReactionFile returns the reaction file at path as the engine loads it
// (converted from Jinja when the configuration says so), from its cache.
func (e *Engine) ReactionFile(path string) (*reactions.File, error) { return e.lib.File(path) }

// Config returns the engine's configuration.
func (e *Engine) Config() *config.Config { return e.cfg }

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// RuleIndex returns the position of the rule with that ID
// (config.Rule.ID) in the engine's configuration, -1 when it has none.
func (e *Engine) RuleIndex(id string) int {
	for i := range e.cfg.Rules {
		if e.cfg.Rules[i].ID == id {
			return i
		}
	}
	return -1
}

// RuleNote says why a matching rule did not react.
type RuleNote struct {
	Rule int
	Note string
}

// FileResult is what one reaction file contributed to an event.
type FileResult struct {
	// Rule is the index of the rule that referenced the file.
	Rule int
	// Ref is the SLS reference as written in the configuration.
	Ref string
	// Path is the file rendered; empty when the reference matched no file.
	Path string
	// Reactions is the number of reaction IDs the file produced.
	Reactions int
	// Err is why the file contributed nothing. A reaction the rule's
	// literal_target option refused (a *reactions.TargetError) is reported
	// in an entry of its own for the same file, after the file's entry,
	// with Reactions 0; the file's other reactions go on.
	Err error
}

// Result is the outcome of one event.
type Result struct {
	// Tag is the event's tag.
	Tag string
	// Skipped is set when a pre-filter dropped the event.
	Skipped string
	// Rules are the indices of matching rules, in configuration order.
	Rules []int
	// Notes explain matching rules that did not react (condition false,
	// throttled, debounced, refused by who sent the event).
	Notes []RuleNote
	// Forged is set when a rule refused the event as forged by the minion
	// that sent it (see OriginOf): why.
	Forged string
	// Files lists each file rendered (or missing) in order.
	Files []FileResult
	// Overwritten lists reaction IDs replaced by a later file.
	Overwritten []reactions.Overwrite
	// Warnings are parts of reactions Salt drops or ignores silently.
	Warnings []error
	// VerifyErrors are Salt's verify_high errors; when present every
	// reaction of the event was discarded, as Salt does.
	VerifyErrors []error
	// Chunks are the low chunks in execution order.
	Chunks []*event.Chunk
	// ChunkRules are, for each chunk, the index of the rule whose file
	// made it (in Config.Rules), -1 when none is known (RuleOf).
	ChunkRules []int
	// Config is the configuration the event was matched and rendered
	// with: Rules, Notes, Files and ChunkRules index its rules.
	Config *config.Config
	// SaltCalls are the Salt calls files made while rendering.
	SaltCalls []FileSaltCalls
}

// FileSaltCalls are the Salt calls one file made while rendering.
type FileSaltCalls struct {
	Path  string
	Calls []reactions.SaltCallRecord
}

// Errors returns every error of the result: file errors then verify errors.
func (r *Result) Errors() []error {
	var errs []error
	for _, f := range r.Files {
		if f.Err != nil {
			errs = append(errs, f.Err)
		}
	}
	return append(errs, r.VerifyErrors...)
}

// MatchTag returns the indices of the rules whose glob matches tag.
func (e *Engine) MatchTag(tag string, dst []int) []int {
	return e.table.Match(tag, dst)
}

// ProcessLine handles one serialized event (a JSON envelope or a
// `TAG<tab>JSON` line), decoding its data only when a rule matches.
func (e *Engine) ProcessLine(ctx context.Context, line []byte) (*Result, error) {
	e.stats.Events.Add(1)
	var tag string
	var raw []byte
	var err error
	trimmed := trimSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		tag, raw, err = event.SplitEnvelope(trimmed)
	} else {
		var ev event.Event
		ev, err = event.Decode(trimmed)
		if err == nil {
			return e.process(ctx, ev.Tag, func() (map[string]any, error) { return ev.Data, nil }, nil)
		}
	}
	if err != nil {
		e.stats.Malformed.Add(1)
		e.stats.Errors.Add(1)
		e.noisy(e.log, slog.LevelWarn, "", "malformed event", "err", err)
		return nil, err
	}
	return e.process(ctx, tag, func() (map[string]any, error) { return event.DecodeData(raw) }, raw)
}

// ProcessEnvelope handles an event whose envelope the caller already split
// (event.SplitEnvelope): its tag and the raw bytes of its data, decoded
// only when a rule matches.
func (e *Engine) ProcessEnvelope(ctx context.Context, tag string, raw []byte) (*Result, error) {
	e.stats.Events.Add(1)
	return e.process(ctx, tag, func() (map[string]any, error) { return event.DecodeData(raw) }, raw)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// Process handles one decoded event.
func (e *Engine) Process(ctx context.Context, ev event.Event) (*Result, error) {
	e.stats.Events.Add(1)
	return e.process(ctx, ev.Tag, func() (map[string]any, error) { return ev.Data, nil }, nil)
}

// process matches an event and renders what every admitted rule makes
// of it.
func (e *Engine) process(ctx context.Context, tag string, data func() (map[string]any, error), raw []byte) (*Result, error) {
	m, err := e.match(tag, data, MatchOptions{}, raw)
	if err != nil {
		return nil, err
	}
	return m.Render(ctx, RenderOptions{})
}

// literalTargets applies a rule's literal_target option to the reactions
// of one file (fr): a reaction whose tgt holds a value printed from event
// data that would widen the target is taken out, counted as an error,
// logged, and reported in a FileResult of its own. The others go on.
func (e *Engine) literalTargets(log *slog.Logger, tag string, rule *config.Rule, fr FileResult, rs []reactions.Reaction) ([]reactions.Reaction, []FileResult) {
	var refused []FileResult
	kept := rs[:0]
	for i := range rs {
		err := rs[i].CheckLiteralTarget()
		if err == nil {
			kept = append(kept, rs[i])
			continue
		}
		e.stats.Errors.Add(1)
		e.noisy(log, slog.LevelError, rule.Glob+"\x00"+fr.Path, "reaction refused: target printed from event data (literal_target)", "tag", tag, "rule", rule.Glob, "rule_pos", rule.Pos.String(), "err", err)
		refused = append(refused, FileResult{Rule: fr.Rule, Ref: fr.Ref, Path: fr.Path, Err: err})
	}
	return kept, refused
}

func (e *Engine) fileError(log *slog.Logger, tag string, rule *config.Rule, err error) {
	e.stats.Errors.Add(1)
	key := rule.Glob
	if pe := (*reactions.PosError)(nil); errors.As(err, &pe) {
		key += fmt.Sprintf("\x00%s:%d", pe.File, pe.Line)
	} else {
		key += "\x00" + err.Error()
	}
	e.noisy(log, slog.LevelError, key, "reaction file dropped", "tag", tag, "rule", rule.Glob, "rule_pos", rule.Pos.String(), "err", err)
}

// noisy logs a line that could repeat once per event (a file that breaks
// for every event, data Salt would drop): the first for its message and
// key at once, then at most one a minute, carrying how many it stands for.
// Each occurrence stays counted in the metrics and the ledger.
func (e *Engine) noisy(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	e.limit.Log(log, level, key, msg, args...)
}

// eventLog is the logger for lines about one event: with its event_id when
// the caller gave one.
func (e *Engine) eventLog(id string) *slog.Logger {
	if id == "" {
		return e.log
	}
	return slog.New(&eventIDHandler{Handler: e.log.Handler(), id: id})
}

// eventIDHandler adds event_id to each record it handles. Unlike
// Logger.With, which formats the attribute up front, it costs nothing
// until a line is logged: most events log none.
type eventIDHandler struct {
	slog.Handler
	id string
}

// Handle adds event_id and passes the record on.
func (h *eventIDHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.String("event_id", h.id))
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps adding event_id below the attributes.
func (h *eventIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &eventIDHandler{Handler: h.Handler.WithAttrs(attrs), id: h.id}
}

// WithGroup keeps adding event_id, inside the group.
func (h *eventIDHandler) WithGroup(name string) slog.Handler {
	return &eventIDHandler{Handler: h.Handler.WithGroup(name), id: h.id}
}
