package ruletest

import (
	"log/slog"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/reactions"
)

// NewEngine builds the engine a suite's events run through: cfg's rules,
// with the reaction files' Salt calls answered by stubs (nil: none, every
// call fails naming it) within allow, the functions the configuration's
// salt_calls lets a render call (reactions.ReadOnlySaltCalls by default).
// It is the one place this package builds an engine.
func NewEngine(cfg *config.Config, stubs *Stubs, allow []string, log *slog.Logger) (*engine.Engine, error) {
	calls := &reactions.SaltCalls{Allow: allow, CacheFor: -1, Log: log}
	if stubs != nil {
		calls.Caller = stubs
	}
	return engine.New(cfg, engine.Options{SaltCalls: calls, Log: log})
}

// StubbedCalls returns what serves reaction files' Salt calls from the
// stubs in path (a test file's stubs:, or a file of stubs: LoadStubs)
// instead of the master, within what cfg's salt_calls allows (read-only
// functions by default): render, explain, check --events and a --dry-run
// daemon take it with --stubs.
func StubbedCalls(path string, cfg *config.Config, log *slog.Logger) (*reactions.SaltCalls, error) {
	stubs, err := LoadStubs(path)
	if err != nil {
		return nil, err
	}
	allow, err := AllowOf(cfg)
	if err != nil {
		return nil, err
	}
	return &reactions.SaltCalls{Caller: stubs, Allow: allow, CacheFor: -1, Log: log}, nil
}

// AllowOf returns the functions cfg's salt_calls lets a render call:
// reactions.ReadOnlySaltCalls when it says nothing.
func AllowOf(cfg *config.Config) ([]string, error) {
	f, ok := cfg.Settings.Flags["salt-calls"]
	if !ok {
		return reactions.ReadOnlySaltCalls, nil
	}
	allow, err := reactions.ParseAllow(f.Value)
	if err != nil {
		return nil, &position.Error{Pos: f.Pos, Msg: "salt_calls: " + err.Error()}
	}
	return allow, nil
}
