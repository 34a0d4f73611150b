package ruletest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
)

// Options adjust a run.
type Options struct {
	// Verbose keeps, for the text report, the tests that passed with the
	// chunks each produced.
	Verbose bool
}

// Report is the outcome of a run: one SuiteReport per test file.
type Report struct {
	Suites  []SuiteReport
	verbose bool
}

// SuiteReport is the outcome of one test file's tests.
type SuiteReport struct {
	// Path is the test file.
	Path string
	// Results are its tests', in order.
	Results []Result
	// Took is how long its tests ran.
	Took time.Duration
}

// Result is the outcome of one test.
type Result struct {
	// Name is the test's name and Pos where it is written.
	Name string
	Pos  position.Pos
	// Failure says how the test failed, one line per difference; empty
	// when it passed.
	Failure []string
	// Chunks are the chunks the event produced, one line of JSON each.
	Chunks []string
	// Took is how long the event took.
	Took time.Duration
}

// Passed reports whether the test passed.
func (r *Result) Passed() bool { return len(r.Failure) == 0 }

// Failed returns the number of tests that failed.
func (r *Report) Failed() int {
	n := 0
	for _, s := range r.Suites {
		for i := range s.Results {
			if !s.Results[i].Passed() {
				n++
			}
		}
	}
	return n
}

// Total returns the number of tests run.
func (r *Report) Total() int {
	n := 0
	for _, s := range r.Suites {
		n += len(s.Results)
	}
	return n
}

// Run runs every test of the suites, in order, and reports each. It stops
// early, leaving out the tests not run, only when ctx ends.
func Run(ctx context.Context, suites []*Suite, opts Options) Report {
	rep := Report{verbose: opts.Verbose}
	for _, s := range suites {
		sr := SuiteReport{Path: s.Path}
		start := time.Now()
		for _, t := range s.Tests {
			if ctx.Err() != nil {
				break
			}
			sr.Results = append(sr.Results, s.run(ctx, t))
		}
		sr.Took = time.Since(start)
		rep.Suites = append(rep.Suites, sr)
	}
	return rep
}

// run runs one test.
func (s *Suite) run(ctx context.Context, t Test) Result {
	r := Result{Name: t.Name, Pos: t.Pos}
	start := time.Now()
	res, err := s.eng.Process(ctx, event.Event{Tag: t.Event.Tag, Data: cloneData(t.Event.Data)})
	r.Took = time.Since(start)
	if err != nil {
		r.Failure = []string{"the event was not processed: " + err.Error()}
		return r
	}
	got := make([]map[string]any, len(res.Chunks))
	for i, c := range res.Chunks {
		c = s.relativeSLS(c)
		raw, err := event.AppendJSON(nil, c)
		if err == nil {
			got[i], err = chunkPlain(c)
		}
		if err != nil {
			r.Failure = append(r.Failure, err.Error())
			return r
		}
		r.Chunks = append(r.Chunks, string(raw))
	}
	errs := res.Errors()
	switch {
	case t.Error != "" && len(errs) == 0:
		r.Failure = append(r.Failure, fmt.Sprintf("want rendering to fail with an error containing %q; it rendered without error", t.Error))
		if t.Expect == nil {
			r.Failure = append(r.Failure, produced(r.Chunks)...)
		}
	case t.Error != "" && !anyContains(errs, t.Error):
		r.Failure = append(r.Failure, fmt.Sprintf("want an error containing %q; the rendering failed with:", t.Error))
		for _, e := range errs {
			r.Failure = append(r.Failure, indent(e.Error(), "  "))
		}
	case t.Error == "" && len(errs) > 0:
		r.Failure = append(r.Failure, "rendering failed:")
		for _, e := range errs {
			r.Failure = append(r.Failure, indent(e.Error(), "  "))
		}
	}
	if t.Expect != nil {
		r.Failure = append(r.Failure, compareChunks(t.Expect, got, r.Chunks, res)...)
	}
	return r
}

// relativeSLS returns c with its __sls__, the path of the file that made
// it, relative to the test file's folder, as a test file writes it.
func (s *Suite) relativeSLS(c *event.Chunk) *event.Chunk {
	p := c.Str("__sls__")
	if !filepath.IsAbs(p) {
		return c
	}
	dir, err := filepath.Abs(filepath.Dir(s.Path))
	if err != nil {
		return c
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return c
	}
	c = c.Clone()
	c.Set("__sls__", filepath.ToSlash(rel))
	return c
}

// compareChunks lists how the chunks got differ from those expected:
// each expected chunk matches a chunk of its own, in the order written,
// and no chunk is left over. A chunk shown as the closest to an expected
// one is not listed again as unexpected.
func compareChunks(want []Expected, got []map[string]any, gotJSON []string, res *engine.Result) []string {
	var out []string
	if len(want) == 0 {
		if len(got) > 0 {
			out = append(out, "want no reaction; the event produced:")
			out = append(out, produced(gotJSON)...)
		}
		return out
	}
	used := make([]bool, len(got))
	at := make([]int, len(want))
	for i, w := range want {
		at[i] = -1
		for j, g := range got {
			if !used[j] && matches(w.Keys, g) {
				at[i], used[j] = j, true
				break
			}
		}
	}
	shown := make([]bool, len(got))
	for i, w := range want {
		if at[i] >= 0 {
			continue
		}
		out = append(out, fmt.Sprintf("expected chunk %d (line %d) not found: %s", i+1, w.Pos.Line, compact(w.Keys)))
		if len(got) == 0 {
			out = append(out, "  the event produced no chunk: "+whyNothing(res))
			continue
		}
		best := closest(w.Keys, got, used)
		shown[best] = true
		out = append(out, fmt.Sprintf("  closest, chunk %d: %s", best+1, gotJSON[best]))
		for _, d := range differences(w.Keys, got[best], "") {
			out = append(out, "    "+d)
		}
	}
	for j := range got {
		if !used[j] && !shown[j] {
			out = append(out, fmt.Sprintf("unexpected chunk %d: %s", j+1, gotJSON[j]))
		}
	}
	if len(out) == 0 {
		for i := 1; i < len(at); i++ {
			if at[i] < at[i-1] {
				out = append(out, fmt.Sprintf("the chunks come in another order: expected chunk %d is chunk %d, expected chunk %d is chunk %d", i, at[i-1]+1, i+1, at[i]+1))
				break
			}
		}
	}
	return out
}

// closest is the chunk that matches most of want's keys, one not matched
// by another expected chunk first.
func closest(want map[string]any, got []map[string]any, used []bool) int {
	best, bestScore := 0, -1
	for j, g := range got {
		sc := score(want, g) * 2
		if !used[j] {
			sc++
		}
		if sc > bestScore {
			best, bestScore = j, sc
		}
	}
	return best
}

// whyNothing says why an event produced no chunk.
func whyNothing(res *engine.Result) string {
	switch {
	case res.Skipped != "":
		return "skipped: " + res.Skipped
	case res.Forged != "":
		return "forged event: " + res.Forged
	case len(res.Rules) == 0:
		return "no rule's tag glob matches " + res.Tag
	case len(res.Notes) > 0:
		var notes []string
		for _, n := range res.Notes {
			rule := "rule"
			if res.Config != nil && n.Rule >= 0 && n.Rule < len(res.Config.Rules) {
				rule = fmt.Sprintf("rule %s (%s)", res.Config.Rules[n.Rule].Glob, res.Config.Rules[n.Rule].Pos)
			}
			notes = append(notes, rule+": "+n.Note)
		}
		return strings.Join(notes, "; ")
	}
	if len(res.Errors()) > 0 {
		return "its rendering failed (above)"
	}
	return "its reaction files rendered nothing for it"
}

// produced lists chunks, indented.
func produced(chunks []string) []string {
	if len(chunks) == 0 {
		return []string{"  (no chunk)"}
	}
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = fmt.Sprintf("  chunk %d: %s", i+1, c)
	}
	return out
}

func anyContains(errs []error, text string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), text) {
			return true
		}
	}
	return false
}

// cloneData copies an event's data: a file may change what it is given.
func cloneData(d map[string]any) map[string]any {
	c, _ := event.CloneValue(d).(map[string]any)
	if c == nil {
		c = map[string]any{}
	}
	return c
}
