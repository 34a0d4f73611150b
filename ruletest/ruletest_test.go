package ruletest

import (
	"context"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/testfiles"
)

// run loads the test file at the root of files and runs it; the text
// report and the report.
func run(t *testing.T, files map[string]string) (string, Report) {
	t.Helper()
	dir := testfiles.Tree(t, files)
	s, err := Load(filepath.Join(dir, "t_test.yaml"))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	rep := Run(context.Background(), []*Suite{s}, Options{})
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String(), rep
}

const conf = "reactor:\n  - 'x/*':\n    - f.sls\n"

// TestChangedRecipeFails: the shipped test file of a recipe fails once its
// reaction changes, saying which key of which chunk differs.
func TestChangedRecipeFails(t *testing.T) {
	src := "../examples/reactor/start-on-minion-start/"
	tests, err := os.ReadFile(src + "reactions_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"t_test.yaml": string(tests)}
	for _, f := range []string{"jinja/reactor.conf", "jinja/highstate.sls"} {
		b, err := os.ReadFile(src + f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	out, rep := run(t, files)
	if rep.Failed() != 0 {
		t.Fatalf("the recipe as shipped fails:\n%s", out)
	}
	files["jinja/highstate.sls"] = strings.Replace(files["jinja/highstate.sls"], "tgt: {{ data['id'] }}", "tgt: 'web*'", 1)
	out, rep = run(t, files)
	if rep.Failed() != 1 {
		t.Fatalf("%d failed, want the one test whose chunk changed:\n%s", rep.Failed(), out)
	}
	for _, want := range []string{
		"--- FAIL: ", "t_test.yaml:6:5: a minion's start highstates it",
		`expected chunk 1 (line 11) not found: {"__sls__":"jinja/highstate.sls","fun":"state.apply","state":"local","tgt":"web1"}`,
		`closest, chunk 1: {"state":"local","name":"highstate_on_start","__sls__":"jinja/highstate.sls",`,
		`tgt: want "web1", got "web*"`,
		"FAIL: 1 of 3 tests failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "unexpected chunk") {
		t.Errorf("the closest chunk is listed again as unexpected:\n%s", out)
	}
}

// TestDifferences: each way a test fails is told.
func TestDifferences(t *testing.T) {
	sls := "a:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\nb:\n  local.test.echo:\n    - tgt: {{ data['id'] }}\n    - arg: [hi]\n    - kwarg: {n: 3, deep: {k: v, l: [1, 2]}}\n"
	cases := []struct {
		name, test string
		want       []string
	}{
		{"passes", "expect: [{fun: test.ping}, {fun: test.echo, arg: [hi], kwarg: {n: 3.0, deep: {l: [1, 2]}}}]", nil},
		{"nothing expected", "expect: []", []string{"want no reaction; the event produced:", `chunk 1: {"state":"local"`, "chunk 2: "}},
		{"a chunk too many", "expect: [{fun: test.ping}]", []string{`unexpected chunk 2: {"state":"local","name":"b"`}},
		{"order", "expect: [{fun: test.echo}, {fun: test.ping}]", []string{"the chunks come in another order: expected chunk 1 is chunk 2, expected chunk 2 is chunk 1"}},
		{"nested key", "expect: [{fun: test.ping}, {fun: test.echo, kwarg: {deep: {k: w}}}]", []string{"expected chunk 2 (line 5) not found", `kwarg.deep.k: want "w", got "v"`}},
		{"list exactly", "expect: [{fun: test.ping}, {fun: test.echo, arg: [hi, there]}]", []string{`arg: want ["hi","there"], got ["hi"]`}},
		{"missing key", "expect: [{fun: test.ping, ret: x}, {fun: test.echo}]", []string{`ret: want "x", the chunk has no ret`}},
		{"type", "expect: [{fun: test.ping}, {fun: test.echo, kwarg: {n: '3'}}]", []string{`kwarg.n: want "3", got 3`}},
		{"error expected", "error: boom", []string{`want rendering to fail with an error containing "boom"; it rendered without error`, "chunk 1: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, rep := run(t, map[string]string{"reactor.conf": conf, "f.sls": sls,
				"t_test.yaml": "reactor: reactor.conf\ntests:\n  - name: one\n    event: {tag: x/y, data: {id: web1}}\n    " + c.test + "\n"})
			if (rep.Failed() > 0) != (c.want != nil) {
				t.Fatalf("failed %d:\n%s", rep.Failed(), out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestNothingReactsSaysWhy: an expected chunk the event did not make says
// why nothing reacted.
func TestNothingReactsSaysWhy(t *testing.T) {
	out, _ := run(t, map[string]string{"reactor.conf": "reactor:\n  - 'x/*':\n      sls: f.sls\n      when: data.go == true\n", "f.sls": "a:\n  local.test.ping:\n    - tgt: web1\n",
		"t_test.yaml": "reactor: reactor.conf\ntests:\n  - name: tag\n    event: {tag: y/z}\n    expect: [{fun: test.ping}]\n  - name: when\n    event: {tag: x/z, data: {go: false}}\n    expect: [{fun: test.ping}]\n"})
	for _, w := range []string{"the event produced no chunk: no rule's tag glob matches y/z", "the event produced no chunk: rule x/* (", "when: `data.go == true` is false"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}

// TestErrors: error: TEXT passes when rendering fails with it, and fails
// naming the errors when it fails otherwise; a test expecting chunks fails
// when rendering fails.
func TestErrors(t *testing.T) {
	files := map[string]string{"reactor.conf": conf, "f.sls": "a:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n",
		"t_test.yaml": "reactor: reactor.conf\ntests:\n" +
			"  - {name: right, event: {tag: x/y}, error: \"data['id'] is undefined\"}\n" +
			"  - {name: wrong, event: {tag: x/y}, error: something else}\n" +
			"  - {name: chunks, event: {tag: x/y}, expect: [{fun: test.ping}]}\n"}
	out, rep := run(t, files)
	if rep.Failed() != 2 || !rep.Suites[0].Results[0].Passed() {
		t.Fatalf("failed %d, want the last two:\n%s", rep.Failed(), out)
	}
	for _, w := range []string{`want an error containing "something else"; the rendering failed with:`, "rendering failed:\n", "f.sls:3:", "the event produced no chunk: its rendering failed (above)"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}

// TestStubs: a file calling Salt renders with the stubs' answers: the
// pillar, grains and opts dicts, pillar.get with its colon keys and
// default, a function's answer, cases matched on their arguments.
func TestStubs(t *testing.T) {
	sls := `{% set mine = salt['mine.get'](data['id'], 'network.ip_addrs') %}
a:
  local.test.arg:
    - tgt: {{ data['id'] }}
    - arg:
      - {{ salt['pillar.get']('roles:web:state', 'none') }}
      - {{ salt['pillar.get']('roles:db:state', 'none') }}
      - {{ salt['pillar.get']('missing') }}x
      - {{ pillar['roles']['web']['n'] + 1 }}
      - {{ grains['os'] }}
      - {{ grains.get('osrelease') }}
      - {{ opts['id'] }}
      - {{ salt['config.get']('os') }}
      - {{ mine[data['id']][0] }}
      - {{ salt['test.echo']('hi') }}
`
	stubs := `stubs:
  pillar: {roles: {web: {state: web.deploy, n: 41}}}
  grains: {os: Debian, osrelease: '12'}
  opts: {id: master1}
  salt:
    mine.get:
      - {args: [web2, network.ip_addrs], return: {web2: [10.0.0.2]}}
      - {args: [web1, network.ip_addrs], kwargs: {}, return: {web1: [10.0.0.1]}}
    test.echo: echoed
`
	out, rep := run(t, map[string]string{"reactor.conf": conf, "f.sls": sls,
		"t_test.yaml": "reactor: reactor.conf\n" + stubs + "tests:\n  - name: one\n    event: {tag: x/y, data: {id: web1}}\n    expect:\n      - arg: [web.deploy, none, x, 42, Debian, 12, master1, Debian, 10.0.0.1, echoed]\n"})
	if rep.Failed() != 0 {
		t.Fatalf("failed:\n%s", out)
	}
}

// TestStubRefused: a call without a stub fails the test naming the
// function and its arguments; a stubbed call the configuration's
// salt_calls does not allow is refused as it would be live; salt_calls
// allows it.
func TestStubRefused(t *testing.T) {
	test := "tests:\n  - name: one\n    event: {tag: x/y, data: {id: web1}}\n    expect: [{fun: test.ping}]\n"
	sls := "{% set x = salt['mine.get']('web*', 'network.ip_addrs', tgt_type='glob') %}\n{% set y = salt['cmd.run']('true') %}\na:\n  local.test.ping:\n    - tgt: web1\n"
	out, _ := run(t, map[string]string{"reactor.conf": conf, "f.sls": sls, "t_test.yaml": "reactor: reactor.conf\n" + test})
	if w := `salt['mine.get'](...): no stub answers mine.get("web*", "network.ip_addrs", tgt_type="glob"): give its answer under stubs: salt: mine.get:`; !strings.Contains(out, w) {
		t.Errorf("report lacks %q:\n%s", w, out)
	}
	out, _ = run(t, map[string]string{"reactor.conf": conf, "f.sls": sls,
		"t_test.yaml": "reactor: reactor.conf\nstubs:\n  salt:\n    mine.get:\n      - {args: [db*, network.ip_addrs], return: {}}\n    cmd.run: ''\n" + test})
	for _, w := range []string{`no stub answers mine.get("web*", "network.ip_addrs", tgt_type="glob"): its cases (`, "t_test.yaml:5:9) give other args or kwargs"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	stubs := "stubs:\n  salt:\n    mine.get: {}\n    cmd.run: ''\n"
	out, _ = run(t, map[string]string{"reactor.conf": conf, "f.sls": sls, "t_test.yaml": "reactor: reactor.conf\n" + stubs + test})
	if w := "salt['cmd.run'](...): not allowed while rendering"; !strings.Contains(out, w) {
		t.Errorf("report lacks %q:\n%s", w, out)
	}
	out, rep := run(t, map[string]string{"reactor.conf": conf + "reactord:\n  salt_calls: read-only,cmd.run\n", "f.sls": sls, "t_test.yaml": "reactor: reactor.conf\n" + stubs + test})
	if rep.Failed() != 0 {
		t.Errorf("salt_calls allows cmd.run, yet:\n%s", out)
	}
}

// TestLoadErrors: a test file that does not load says where.
func TestLoadErrors(t *testing.T) {
	cases := []struct{ file, want string }{
		{"reactor: reactor.conf\ntest:\n  - {name: a}\n", `t_test.yaml:2:1: unknown key "test": did you mean "tests"?`},
		{"reactor: reactor.conf\ntests:\n  - {name: a, event: {tag: x/y}}\n", "t_test.yaml:3:5: a test needs expect:"},
		{"reactor: reactor.conf\ntests:\n  - {name: a, event: {data: {}}, expect: []}\n", "t_test.yaml:3:22: an event needs a tag:"},
		{"reactor: reactor.conf\ntests:\n  - {name: a, event: {tag: x, data: [1]}, expect: []}\n", "t_test.yaml:3:37: data: must be a mapping"},
		{"reactor: reactor.conf\ntests:\n  - {name: a, event: {tag: x}, expect: [fun]}\n", "t_test.yaml:3:41: each expected chunk is a mapping"},
		{"reactor: reactor.conf\ntests: [{name: a, event: {tag: x}, expect: [}\n", "t_test.yaml:2:"},
		{"tests:\n  - {name: a, event: {tag: x}, expect: []}\n", "t_test.yaml:1:1: no reactor:"},
		{"reactor: nowhere.conf\ntests:\n  - {name: a, event: {tag: x}, expect: []}\n", "t_test.yaml:1:10: the reactor configuration "},
		{"reactor: bad.conf\ntests:\n  - {name: a, event: {tag: x}, expect: []}\n", "bad.conf:3:21: when: "},
		{"reactor: reactor.conf\nstubs: {pilar: {}}\ntests:\n  - {name: a, event: {tag: x}, expect: []}\n", `t_test.yaml:2:9: unknown key "pilar": did you mean "pillar"?`},
	}
	for _, c := range cases {
		dir := testfiles.Tree(t, map[string]string{"reactor.conf": conf, "t_test.yaml": c.file,
			"bad.conf": "reactor:\n  - 'x/*':\n      when: data.x ==\n      sls: f.sls\n"})
		_, err := Load(filepath.Join(dir, "t_test.yaml"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.file, err, c.want)
		}
	}
	dir := testfiles.Tree(t, map[string]string{"reactor.conf": conf, "t_test.yaml": "reactor: reactor.conf\ntest: []\n"})
	var pe *position.Error
	if _, err := Load(filepath.Join(dir, "t_test.yaml")); !errors.As(err, &pe) || pe.Line != 2 {
		t.Errorf("error %v is no *position.Error at line 2", err)
	}
}

// TestJUnit: the JUnit report has a testsuite per file, a testcase per
// test and a failure with the differences for each that failed.
func TestJUnit(t *testing.T) {
	_, rep := run(t, map[string]string{"reactor.conf": conf, "f.sls": "a:\n  local.test.ping:\n    - tgt: web1\n",
		"t_test.yaml": "reactor: reactor.conf\ntests:\n  - {name: ok, event: {tag: x/y}, expect: [{tgt: web1}]}\n  - {name: bad, event: {tag: x/y}, expect: [{tgt: web2}]}\n"})
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := rep.WriteJUnitFile(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if got.Tests != 2 || got.Failures != 1 || len(got.Suites) != 1 || len(got.Suites[0].Cases) != 2 || got.Suites[0].Failures != 1 {
		t.Fatalf("counts wrong:\n%s", raw)
	}
	c := got.Suites[0].Cases
	if c[0].Name != "ok" || c[0].Failure != nil || c[1].Name != "bad" || c[1].Failure == nil || c[1].Line != 4 {
		t.Fatalf("cases wrong:\n%s", raw)
	}
	if !strings.Contains(c[1].Failure.Message, "expected chunk 1 (line 4) not found") || !strings.Contains(c[1].Failure.Text, `tgt: want "web2", got "web1"`) {
		t.Errorf("failure wrong:\n%s", raw)
	}
}

// TestLoadStubs: a stubs file is a test file (its stubs:) or the stubs
// alone.
func TestLoadStubs(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{
		"alone.yaml": "pillar: {a: {b: 1}}\nsalt:\n  test.echo: hi\n",
		"test.yaml":  "reactor: r.conf\nstubs:\n  grains: {os: Debian}\ntests: []\n",
		"none.yaml":  "reactor: r.conf\ntests: []\n",
	})
	ctx := context.Background()
	s, err := LoadStubs(filepath.Join(dir, "alone.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SaltCall(ctx, "pillar.get", []any{"a:b"}, nil); err != nil || v != int64(1) {
		t.Errorf("pillar.get a:b = %#v, %v", v, err)
	}
	if v, err := s.SaltCall(ctx, "pillar.get", []any{"a/c"}, map[string]any{"delimiter": "/", "default": "d"}); err != nil || v != "d" {
		t.Errorf("pillar.get a/c = %#v, %v", v, err)
	}
	if v, err := s.SaltCall(ctx, "test.echo", []any{"x"}, nil); err != nil || v != "hi" {
		t.Errorf("test.echo = %#v, %v", v, err)
	}
	if _, err := s.SaltCall(ctx, "grains.get", []any{"os"}, nil); err == nil || !strings.Contains(err.Error(), `no stub answers grains.get("os")`) {
		t.Errorf("grains.get without grains: %v", err)
	}
	s, err = LoadStubs(filepath.Join(dir, "test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SaltCall(ctx, "grains.item", []any{"os", "nope"}, nil); err != nil || compact(v) != `{"nope":"","os":"Debian"}` {
		t.Errorf("grains.item = %#v, %v", v, err)
	}
	s, err = LoadStubs(filepath.Join(dir, "none.yaml"))
	if err != nil || s.Salt != nil || s.Pillar != nil {
		t.Errorf("a test file without stubs: %+v, %v", s, err)
	}
}
