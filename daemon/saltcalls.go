package daemon

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/reactions"
)

// SaltCallsDefault is --salt-calls' default: the read-only functions.
const SaltCallsDefault = "read-only"

// SaltCallsFlag registers --salt-calls on a command.
func SaltCallsFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "salt-calls", *p, "what reaction files may call while rendering (salt['mod.fun'](...), and grains, pillar, opts, through the driver, as Salt's reactor does): read-only (pillar.get, grains.get, config.get, environ.get, file.file_exists, mine.get, saltutil.runner of jobs.* and manage.*, ...), off, or function globs joined by commas (saltutil.runner:NAME for one runner; read-only may be one of them); each render has "+
		reactions.DefaultSaltCallBudget.String()+" for its calls, answers are kept "+reactions.DefaultSaltCallCache.String())
}

// ParseSaltCalls reads a --salt-calls value: the allowed function globs
// (nil for off), as reactions.ParseAllow reads them.
func ParseSaltCalls(spec string) ([]string, error) {
	allow, err := reactions.ParseAllow(spec)
	if err != nil {
		return nil, fmt.Errorf("--salt-calls: %w", err)
	}
	return allow, nil
}

// NewSaltCalls returns what serves reaction files' Salt calls: drv when it
// runs Salt functions (saltapi, exec, master through its exec driver);
// otherwise calls fail, naming why. nil when spec is off.
func NewSaltCalls(spec string, drv actions.Driver, log *slog.Logger) (*reactions.SaltCalls, error) {
	allow, err := ParseSaltCalls(spec)
	if err != nil || allow == nil {
		return nil, err
	}
	c := &reactions.SaltCalls{Allow: allow, Log: log}
	if sc, ok := drv.(reactions.SaltCaller); ok {
		c.Caller = sc
	}
	return c, nil
}
