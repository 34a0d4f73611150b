package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/ruletest"
)

// renderCmd is reactord render: its flags' values.
type renderCmd struct {
	fs                      *flag.FlagSet
	conf, tag, data, evFile string
	verbose, showText       bool
	renderer                func() string
	stubs                   string
}

// renderFlags defines render's flags and returns the command.
func renderFlags(fs *flag.FlagSet) cli.Func {
	c := &renderCmd{fs: fs}
	fs.StringVar(&c.conf, "c", "", "reactor configuration: a file or a master.d directory (required)")
	fs.StringVar(&c.tag, "tag", "", "event tag")
	fs.StringVar(&c.data, "data", "", "event data as a JSON object, or @FILE to read it from a file")
	fs.StringVar(&c.evFile, "event", "", "file holding one event {\"tag\": ..., \"data\": {...}}, or - for stdin")
	fs.BoolVar(&c.verbose, "v", false, "log each pipeline decision to stderr")
	c.renderer = rendererFlag(fs)
	stubsFlag(fs, &c.stubs)
	fs.BoolVar(&c.showText, "show-text", false, "print to stderr, before the chunks, the text each matched file renders to (the YAML Salt would load), numbered by line")
	return c.run
}

// run renders one event and prints its chunks.
func (c *renderCmd) run(ctx context.Context, args []string, s cli.Streams) int {
	if c.conf == "" || (c.tag == "") == (c.evFile == "") || len(args) > 0 {
		return cli.UsageError(c.fs, "need -c CONF and exactly one of --tag or --event")
	}
	stdin, stdout, stderr := s.Stdin, s.Stdout, s.Stderr
	ev, err := readEvent(c.tag, c.data, c.evFile, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	eng, code := loadEngine(c.conf, stderr, c.verbose, engine.Options{Renderer: c.renderer()}, c.stubs)
	if eng == nil {
		return code
	}
	res, err := eng.Process(ctx, ev)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	if c.showText {
		printRenderedText(stderr, eng, res, ev)
	}
	out, err := chunksJSON(res.Chunks)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	_, _ = stdout.Write(out)
	code = exitOK
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "%s (warning)\n", w)
	}
	if res.Forged != "" {
		fmt.Fprintf(stderr, "%s: forged event: %s; rules without from: any do not react (see reactord explain)\n", res.Tag, res.Forged)
	}
	for _, e := range res.Errors() {
		fmt.Fprintln(stderr, e)
		code = exitFound
	}
	if len(res.VerifyErrors) > 0 {
		fmt.Fprintf(stderr, "%s: every reaction of this event is discarded, as Salt's verify_high does\n", res.Tag)
	}
	return code
}

// printRenderedText prints the rendered text of each file the event
// rendered, under a "--- PATH (rendered)" line, with line numbers (the
// positions of errors "in the rendered text").
func printRenderedText(w io.Writer, eng *engine.Engine, res *engine.Result, ev event.Event) {
	seen := map[string]bool{}
	for _, fr := range res.Files {
		if fr.Path == "" || seen[fr.Path] {
			continue
		}
		seen[fr.Path] = true
		fmt.Fprintf(w, "--- %s (rendered)\n", fr.Path)
		f, err := eng.ReactionFile(fr.Path)
		if err != nil {
			fmt.Fprintln(w, err)
			continue
		}
		text, err := f.RenderText(ev.Tag, ev.Data)
		if err != nil {
			fmt.Fprintln(w, err)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		for i, l := range lines {
			fmt.Fprintf(w, "%4d  %s\n", i+1, l)
		}
	}
}

// chunksJSON renders chunks as an indented JSON array.
func chunksJSON(chunks []*event.Chunk) ([]byte, error) {
	list := make([]any, len(chunks))
	for i, c := range chunks {
		list[i] = c
	}
	raw, err := event.AppendJSON(nil, list)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// readEvent builds the event from --tag/--data or --event.
func readEvent(tag, data, file string, stdin io.Reader) (event.Event, error) {
	if file != "" {
		var src []byte
		var err error
		if file == "-" {
			src, err = io.ReadAll(stdin)
		} else {
			src, err = os.ReadFile(file)
		}
		if err != nil {
			return event.Event{}, fmt.Errorf("reading event: %w", err)
		}
		ev, err := event.Decode(src)
		if err != nil {
			return event.Event{}, fmt.Errorf("%s: %w", file, err)
		}
		return ev, nil
	}
	if strings.HasPrefix(data, "@") {
		src, err := os.ReadFile(data[1:])
		if err != nil {
			return event.Event{}, fmt.Errorf("reading data: %w", err)
		}
		data = string(src)
	}
	d, err := event.DecodeData([]byte(data))
	if err != nil {
		return event.Event{}, fmt.Errorf("--data: %w", err)
	}
	return event.Event{Tag: tag, Data: d}, nil
}

// loadEngine loads the configuration and builds its engine with o (its
// logger on stderr); on failure it prints every error and returns a nil
// engine and the exit code.
func loadEngine(path string, stderr io.Writer, verbose bool, o engine.Options, stubs string) (*engine.Engine, int) {
	cfg, err := config.Load(path)
	if err != nil {
		printErrors(stderr, err)
		return nil, exitUsage
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "%s (warning)\n", w)
	}
	o.Log = logger(stderr, verbose)
	var eng *engine.Engine
	if stubs != "" {
		o.SaltCalls, err = ruletest.StubbedCalls(stubs, cfg, o.Log)
	}
	if err == nil {
		eng, err = engine.New(cfg, o)
	}
	if err != nil {
		printErrors(stderr, err)
		return nil, exitUsage
	}
	return eng, exitOK
}

// stubsFlag registers --stubs on a command that renders reaction files.
func stubsFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "stubs", "", "answer the reaction files' Salt calls from this file instead of the master: a reactord test file's stubs:, or a file of salt:, pillar:, grains: and opts: (docs/reaction-files.md)")
}

// rendererFlag registers --renderer (and --jinja) on a command that loads
// reaction files; the function it returns gives the mode they chose, ""
// for the configuration's.
func rendererFlag(fs *flag.FlagSet) func() string {
	var mode daemon.RendererMode
	var jinja bool
	daemon.RendererFlags(fs, &mode, &jinja)
	return func() string { return mode.Effective(jinja) }
}
