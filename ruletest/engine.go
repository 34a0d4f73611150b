package ruletest

import (
	"log/slog"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
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
