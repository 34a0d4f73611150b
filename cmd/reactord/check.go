package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/engine"
)

func cmdCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("check", "reactord check -c CONF [--event FILE|-] [--events FILE|-]",
		`Validates everything that can be checked without an event: the
configuration (against schemas/reactor-config.json and Salt's rules), every
SLS reference (it must name at least one file), every reaction file (it must
parse as a template), and every file without template actions (compiled in
full). With --event, the event is also rendered; with --events FILE, every
event of a recording (JSON {"tag","data"} or state.event lines, what replay
reads — e.g. from reactord events --out json) is rendered and every reaction
it gives is validated against the low chunk schema, so what only an event
shows (a templated file that breaks once filled in, an unknown reaction
type) is found before the daemon meets it; a problem many events repeat is
printed once. Every problem is printed to
stderr as file:line:col: message; entries Salt would skip silently count as
problems. Exit 0 when clean, 1 when problems were found, 2 on bad usage.`, stderr)
	conf := fs.String("c", "", "reactor configuration: a file or a master.d directory (required)")
	evFile := fs.String("event", "", "also render this event ({\"tag\", \"data\"} JSON), or - for stdin")
	evsFile := fs.String("events", "", "also render every event of this file (in any format replay reads), or - for stdin, and validate the reactions")
	renderer := rendererFlag(fs)
	rules := fs.Bool("rules", false, "print each rule's id (what throttle, debounce and the shared state key its state by), glob, reaction files and loop guard")
	settings := fs.Bool("settings", false, "print the daemon's settings as `reactord run -c CONF` would merge them (flag, environment, reactord: section, default), with where each came from")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *conf == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "check: need -c CONF")
		fs.Usage()
		return exitUsage
	}
	if *settings {
		if code := printSettings(*conf, stdout, stderr); code != exitOK {
			return code
		}
	}
	rep := engine.Check(*conf, renderer())
	if *rules && rep.Config != nil {
		for _, r := range rep.Config.Rules {
			refs := make([]string, len(r.SLS))
			for i, s := range r.SLS {
				refs[i] = s.Ref
			}
			fmt.Fprintf(stdout, "rule %s: %s -> %s (%s) guard: %s\n", r.ID, r.Glob, strings.Join(refs, ", "), r.Pos, guardMode(r))
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(stderr, p)
	}
	salty := 0
	for _, f := range rep.Loaded {
		line := fmt.Sprintf("%s: %s", f.Path, f.Renderer)
		if f.SaltCalls > 0 {
			salty++
			line += fmt.Sprintf("; calls Salt while rendering (%d use(s) of salt, pillar, grains or opts): it loads, and each event whose rendering reaches one fails", f.SaltCalls)
		}
		fmt.Fprintln(stdout, line)
	}
	if salty > 0 {
		fmt.Fprintf(stdout, "%d reaction file(s) call Salt while rendering: reactord renders without Salt\n", salty)
	}
	problems := len(rep.Problems)
	if *evFile != "" && rep.Config != nil {
		ev, err := readEvent("", "", *evFile, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		res, err := engine.MustNew(rep.Config, nil).Process(ctx, ev)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		for _, e := range res.Errors() {
			fmt.Fprintln(stderr, e)
			problems++
		}
		fmt.Fprintf(stdout, "event %s: %d reaction(s)\n", res.Tag, len(res.Chunks))
	}
	if *evsFile != "" && rep.Config != nil {
		var in io.Reader = stdin
		if *evsFile != "-" {
			f, err := os.Open(*evsFile)
			if err != nil {
				fmt.Fprintf(stderr, "check: --events: %v\n", err)
				return exitUsage
			}
			defer f.Close()
			in = f
		}
		n, probs := engine.CheckEvents(ctx, engine.MustNew(rep.Config, nil), in)
		for _, p := range probs {
			fmt.Fprintln(stderr, p)
		}
		problems += len(probs)
		fmt.Fprintf(stdout, "%d event(s) rendered\n", n)
	}
	if problems > 0 {
		fmt.Fprintf(stdout, "%d problem(s) found\n", problems)
		return exitFound
	}
	fmt.Fprintf(stdout, "ok: %d rule(s), %d reaction file(s)\n", rep.Rules, rep.Files)
	return exitOK
}

// printSettings prints the daemon's settings for conf, merged as
// `reactord run -c CONF` merges them (mergedOptions), one per line: the flag, its value (secrets as "(set)") and where it came from.
func printSettings(conf string, stdout, stderr io.Writer) int {
	_, fs, sources, code := mergedOptions([]string{"-c", conf}, stdout, stderr)
	if code != exitOK {
		return code
	}
	for _, s := range daemon.Settings(fs, sources) {
		fmt.Fprintf(stdout, "setting --%s = %q (%s; key %s, $%s)\n", s.Flag, s.Value, s.Source, s.Key, s.Env)
	}
	return exitOK
}
