// Package ruletest runs reaction tests: YAML files an operator keeps beside
// their reaction files, each naming a reactor configuration, answers for
// the Salt calls the files make while rendering (stubs), and events with
// the low chunks each must produce, nothing, or the error its rendering
// must fail with. `reactord test` is its command; --junit writes the
// report for CI systems.
package ruletest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/suggest"
	"github.com/reactord/reactord/internal/yaml11"
)

// Suite is one loaded test file: its configuration, stubs and tests, and
// the engine its events run through.
type Suite struct {
	// Path is the test file.
	Path string
	// Reactor is the configuration's path, resolved against the test
	// file's folder.
	Reactor string
	// Config is the configuration loaded from Reactor.
	Config *config.Config
	// Stubs answer the reaction files' Salt calls (empty when the file
	// gives none: every call then fails, naming it).
	Stubs *Stubs
	// Allow are the functions a render may call: the configuration's
	// salt_calls, read-only by default.
	Allow []string
	// Tests are the file's tests, in order.
	Tests []Test

	reactorPos position.Pos // where reactor: is written
	eng        *engine.Engine
}

// Test is one event and what it must give.
type Test struct {
	// Name is the test's name.
	Name string
	// Pos is where the test is in its file.
	Pos position.Pos
	// Event is the event rendered.
	Event event.Event
	// Expect are the chunks the event must produce, each compared on the
	// keys it gives; an empty list means nothing reacts. It is nil when the
	// test gives no expect.
	Expect []Expected
	// Error, when not "", is text the rendering's error must contain.
	Error string
}

// Expected is one chunk a test expects.
type Expected struct {
	// Pos is where it is written.
	Pos position.Pos
	// Keys are the keys it gives and their values (maps, lists, strings,
	// bools, nil and json.Number).
	Keys map[string]any
}

// Top-level and per-test keys of a test file.
var (
	suiteKeys = []string{"reactor", "stubs", "tests"}
	testKeys  = []string{"name", "event", "expect", "error"}
	eventKeys = []string{"tag", "data"}
)

// Load reads a test file and loads the configuration it names. Its errors
// are at file:line:col (*position.Error, joined): the test file's, the
// configuration's, the stubs'.
func Load(path string) (*Suite, error) {
	root, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	s := &Suite{Path: path, Stubs: &Stubs{}}
	var errs errList
	fields := mapping(path, root, suiteKeys, &errs)
	if fields == nil {
		return nil, errs.join()
	}
	rn, ok := fields["reactor"]
	if !ok {
		errs.at(path, root, "no reactor: the path of the reactor configuration the tests run, relative to this file")
	} else if rn.Kind != yaml11.ScalarNode || rn.Text == "" {
		errs.at(path, rn, "reactor: must be a path")
	} else {
		s.reactorPos = nodePos(path, rn)
		s.Reactor = rn.Text
		if !filepath.IsAbs(s.Reactor) {
			s.Reactor = filepath.Join(filepath.Dir(path), s.Reactor)
		}
	}
	if sn, ok := fields["stubs"]; ok {
		s.Stubs = stubsFrom(path, sn, &errs)
	}
	if tn, ok := fields["tests"]; !ok || tn.Kind != yaml11.SequenceNode || len(tn.Content) == 0 {
		errs.at(path, cmpNode(tn, root), "tests: must be a list of tests, each {name, event: {tag, data}, expect: [...] or error: TEXT}")
	} else {
		for _, n := range tn.Content {
			if t, ok := testFrom(path, n, &errs); ok {
				s.Tests = append(s.Tests, t)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs.join()
	}
	if err := s.loadReactor(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadReactor loads the configuration and builds the suite's engine.
func (s *Suite) loadReactor() error {
	cfg, err := config.Load(s.Reactor)
	if err != nil {
		return errors.Join(&position.Error{Pos: s.reactorPos, Msg: "the reactor configuration " + s.Reactor + " does not load:"}, err)
	}
	s.Config = cfg
	if s.Allow, err = AllowOf(cfg); err != nil {
		return err
	}
	s.eng, err = NewEngine(cfg, s.Stubs, s.Allow, nil)
	if err != nil {
		return errors.Join(&position.Error{Pos: s.reactorPos, Msg: "the reactor configuration " + s.Reactor + " does not load:"}, err)
	}
	return nil
}

// parseFile reads and parses a YAML file into its root node.
func parseFile(path string) (*yaml11.Node, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading test file: %w", err)
	}
	root, err := yaml11.Parse(src)
	if err != nil {
		var ye *yaml11.Error
		if errors.As(err, &ye) {
			return nil, position.At(path, ye.Line, ye.Column, ye.Msg, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if root == nil {
		return nil, position.At(path, 1, 1, "empty file: a test file holds reactor:, stubs: and tests:", nil)
	}
	return root, nil
}

// testFrom reads one test.
func testFrom(path string, n *yaml11.Node, errs *errList) (Test, bool) {
	t := Test{Pos: nodePos(path, n)}
	before := len(*errs)
	fields := mapping(path, n, testKeys, errs)
	if fields == nil {
		return t, false
	}
	if nn, ok := fields["name"]; ok && nn.Kind == yaml11.ScalarNode && nn.Text != "" {
		t.Name = nn.Text
	} else {
		errs.at(path, cmpNode(nn, n), "a test needs a name:")
	}
	if en, ok := fields["event"]; ok {
		t.Event = eventFrom(path, en, errs)
	} else {
		errs.at(path, n, "a test needs an event: {tag: ..., data: {...}}")
	}
	xn, hasExpect := fields["expect"]
	if hasExpect {
		t.Expect = expectFrom(path, xn, errs)
	}
	if en, ok := fields["error"]; ok {
		if en.Kind != yaml11.ScalarNode || en.Text == "" {
			errs.at(path, en, "error: must be the text the rendering's error contains")
		}
		t.Error = en.Text
	} else if !hasExpect {
		errs.at(path, n, "a test needs expect: (the chunks the event makes, [] for none) or error: (text its error contains)")
	}
	return t, len(*errs) == before
}

// eventFrom reads a test's event.
func eventFrom(path string, n *yaml11.Node, errs *errList) event.Event {
	var ev event.Event
	fields := mapping(path, n, eventKeys, errs)
	if fields == nil {
		return ev
	}
	if tn, ok := fields["tag"]; ok && tn.Kind == yaml11.ScalarNode && tn.Text != "" {
		ev.Tag = tn.Text
	} else {
		errs.at(path, cmpNode(tn, n), "an event needs a tag:")
	}
	ev.Data = map[string]any{}
	if dn, ok := fields["data"]; ok {
		v, err := liveValue(path, dn)
		if err != nil {
			errs.add(err)
		} else if m, ok := v.(map[string]any); ok {
			ev.Data = m
		} else if v != nil {
			errs.at(path, dn, "data: must be a mapping, as Salt's event data is")
		}
	}
	return ev
}

// expectFrom reads a test's expected chunks.
func expectFrom(path string, n *yaml11.Node, errs *errList) []Expected {
	if n.Kind != yaml11.SequenceNode {
		errs.at(path, n, "expect: must be a list of chunks ({fun: state.apply, tgt: web1}), [] for none")
		return nil
	}
	out := []Expected{}
	for _, c := range n.Content {
		v, err := plainValue(path, c)
		if err != nil {
			errs.add(err)
			continue
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			errs.at(path, c, "each expected chunk is a mapping of the keys to compare ({fun: state.apply, tgt: web1})")
			continue
		}
		out = append(out, Expected{Pos: nodePos(path, c), Keys: m})
	}
	return out
}

// mapping returns a mapping node's values by key, refusing keys not in
// known (with the nearest known one); nil when n is no mapping.
func mapping(path string, n *yaml11.Node, known []string, errs *errList) map[string]*yaml11.Node {
	if n == nil || n.Kind != yaml11.MappingNode {
		errs.at(path, n, "must be a mapping with the keys "+strings.Join(known, ", "))
		return nil
	}
	out := map[string]*yaml11.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(known, k.Text) {
			msg := fmt.Sprintf("unknown key %q (known: %s)", k.Text, strings.Join(known, ", "))
			if s := suggest.Closest(k.Text, known); s != "" {
				msg = fmt.Sprintf("unknown key %q: did you mean %q?", k.Text, s)
			}
			errs.at(path, k, msg)
			continue
		}
		out[k.Text] = n.Content[i+1]
	}
	return out
}

// cmpNode is n, or else where the error about its absence goes.
func cmpNode(n, parent *yaml11.Node) *yaml11.Node {
	if n != nil {
		return n
	}
	return parent
}

func nodePos(path string, n *yaml11.Node) position.Pos {
	if n == nil {
		return position.Pos{File: path, Line: 1, Col: 1}
	}
	return position.Pos{File: path, Line: max(n.Line, 1), Col: max(n.Column, 1)}
}

// errList gathers a file's errors.
type errList []error

func (l *errList) at(path string, n *yaml11.Node, msg string) {
	*l = append(*l, &position.Error{Pos: nodePos(path, n), Msg: msg})
}

func (l *errList) add(err error) { *l = append(*l, err) }

func (l errList) join() error { return errors.Join(l...) }

// LoadAll loads each test file; the error joins those of every file that
// does not load.
func LoadAll(paths []string) ([]*Suite, error) {
	var suites []*Suite
	var errs []error
	for _, p := range paths {
		s, err := Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		suites = append(suites, s)
	}
	return suites, errors.Join(errs...)
}
