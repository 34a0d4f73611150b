package engine

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"text/template"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/reactions"
	"github.com/reactord/reactord/schemas"
)

// sampleEvents is reactord's catalogue of Salt's event shapes: one event
// of each kind a master's bus carries ({"tag", "data"} JSON lines).
//
//go:embed samples/catalogue.jsonl
var sampleEvents []byte

// SampleEvents returns the catalogue of Salt's event shapes check renders
// each reaction file with.
func SampleEvents() ([]event.Event, error) {
	var out []event.Event
	for i, line := range bytes.Split(bytes.TrimSpace(sampleEvents), []byte("\n")) {
		ev, err := event.Decode(line)
		if err != nil {
			return nil, fmt.Errorf("sample event %d: %w", i+1, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// sampleProblems renders every sample event the rules match and reports
// what the file's shape makes fail, whatever the event holds: rendered
// text that is not YAML, a reaction Salt's verify_high refuses, a low
// chunk outside the schema. What depends on the event's data (a key the
// sample lacks: Salt's StrictUndefined) is not reported: real events of
// that tag may hold it. Each problem is reported once, and not at all when
// known already holds its text (a file that does not load).
func sampleProblems(ctx context.Context, eng *Engine, known []error) []error {
	samples, err := SampleEvents()
	if err != nil {
		return []error{err}
	}
	seen := map[string]bool{}
	for _, e := range known {
		seen[e.Error()] = true
	}
	var out []error
	add := func(tag, msg string) {
		if !seen[msg] {
			seen[msg] = true
			out = append(out, fmt.Errorf("%s (rendered with the sample %s event of reactord's catalogue)", msg, tag))
		}
	}
	for _, ev := range samples {
		if len(eng.MatchTag(ev.Tag, nil)) == 0 {
			continue
		}
		res, err := eng.Process(ctx, ev)
		if err != nil {
			continue
		}
		for _, e := range res.Errors() {
			if dataDependent(e) {
				continue
			}
			add(ev.Tag, e.Error())
		}
		for _, c := range res.Chunks {
			raw, _ := event.AppendJSON(nil, c)
			v, _ := decodePlain(raw)
			for _, viol := range schemas.Check(schemas.LowChunk, v) {
				add(ev.Tag, fmt.Sprintf("%s: reaction %q: %s", c.Str("__sls__"), c.Str("__id__"), viol))
			}
		}
	}
	return out
}

// dataDependent reports whether a render error comes from the event's
// data rather than the file's shape: an error while executing the
// template, or a bound crossed.
func dataDependent(err error) bool {
	var ee template.ExecError
	var le *reactions.LimitError
	return errors.As(err, &ee) || errors.As(err, &le)
}
