package main

import (
	"context"
	"io"
)

const shadowSynopsis = "reactord shadow -c CONF [--driver NAME] [--shadow-window DUR] [--salt-user USER] [daemon flags] | reactord shadow report [flags]"

const shadowHelp = `Runs the reactor beside Salt's own reactor, changing nothing: every event
goes through the whole pipeline as if live (rules, rendering, when, throttle,
debounce, concurrency, collect, who sent it, the loop guard) and nothing is
dispatched. Each decision is compared with the jobs Salt's reactor really
started, read from the bus (the bridge publishes them), and gets one verdict:
agree, differ, reactord-only, salt-only, ambiguous, or held-* for what
reactord holds back on purpose (held-loop: the loop guard). Verdicts are
counted in reactord_shadow_total{verdict}, kept in the audit store ('reactord
shadow report' reads them), and each disagreement logged (one line per verdict
and rule a minute). --driver serves only the reaction files' read-only Salt
calls. Run one shadow daemon: a decision and Salt's job pair in one process.

It takes every flag of 'reactord run' but --dry-run and --partitions, and two
of its own, --shadow-window and --salt-user (flags, or REACTORD_SHADOW_WINDOW
and REACTORD_SALT_USER; not settings of the reactord: section). docs/migration.md has the procedure:
shadow for a week, read the report, switch, and how to go back.`

// cmdShadow runs the daemon in shadow mode, or, as `shadow report`, reads
// its verdicts.
func cmdShadow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return cmdShadowReport(ctx, args[1:], stdout, stderr)
	}
	return runDaemon(ctx, args, true, stdout, stderr)
}
