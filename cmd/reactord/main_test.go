package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/testfiles"
)

// runCmd runs one reactord command line in-process.
func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// writeFiles writes files into a temporary directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string { return testfiles.Tree(t, files) }

const exampleConf = "../../reactor.conf.example"

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"render", "check", "replay"} {
		code, out, errOut := runCmd(t, "", cmd, "--help")
		if code != exitOK || !strings.Contains(out, "Usage: reactord "+cmd) || !strings.Contains(out, "-c string") {
			t.Errorf("%s --help: code %d, output %q", cmd, code, out)
		}
		if errOut != "" {
			t.Errorf("%s --help also wrote to stderr: %q", cmd, errOut)
		}
	}
	if code, out, _ := runCmd(t, "", "--help"); code != 0 || !strings.Contains(out, "render") {
		t.Errorf("--help: %d %q", code, out)
	}
	if code, _, errOut := runCmd(t, "", "frobnicate"); code != exitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: %d %q", code, errOut)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, "", "check", "-c", exampleConf)
	if code != exitOK {
		t.Fatalf("check reactor.conf.example: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "ok: 4 rule(s), 4 reaction file(s)") {
		t.Fatalf("unexpected summary %q", out)
	}
}

func TestRenderContract(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, "", "render", "-c", exampleConf, "--tag", "salt/minion/web7/start", "--data", `{"id": "web7"}`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var chunks []map[string]any
	if err := json.Unmarshal([]byte(out), &chunks); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out)
	}
	if len(chunks) != 1 || chunks[0]["tgt"] != "web7" || chunks[0]["fun"] != "state.apply" || chunks[0]["state"] != "local" {
		t.Fatalf("chunks = %v", chunks)
	}
	for _, k := range []string{"state", "__id__", "name", "__sls__", "order", "fun"} {
		if _, ok := chunks[0][k]; !ok {
			t.Errorf("chunk lacks %q", k)
		}
	}

	// An event that triggers nothing prints [].
	code, out, _ = runCmd(t, "", "render", "-c", exampleConf, "--tag", "nothing/here")
	if code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("no-match render: %d %q", code, out)
	}

	// --event - reads {"tag","data"} from stdin; --data @file reads a file.
	ev := `{"tag": "salt/auth", "data": {"act": "pend", "id": "web9"}}`
	code, out, _ = runCmd(t, ev, "render", "-c", exampleConf, "--event", "-")
	if code != exitOK || !strings.Contains(out, `"match": "web9"`) {
		t.Fatalf("--event -: %d %q", code, out)
	}
	dir := writeFiles(t, map[string]string{"d.json": `{"act": "pend", "id": "web3"}`})
	code, out, _ = runCmd(t, "", "render", "-c", exampleConf, "--tag", "salt/auth", "--data", "@"+filepath.Join(dir, "d.json"))
	if code != exitOK || !strings.Contains(out, `"match": "web3"`) {
		t.Fatalf("--data @file: %d %q", code, out)
	}
}

func TestRenderErrorsArePositioned(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'a/*':\n    - bad.sls\n    - good.sls\n",
		"bad.sls":      "x:\n  local.test.ping:\n    - tgt: {{ .data.nope }}\n",
		"good.sls":     "y:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n",
	})
	code, out, errOut := runCmd(t, "", "render", "-c", filepath.Join(dir, "reactor.conf"), "--tag", "a/b", "--data", `{"id": "web1"}`)
	if code != exitFound {
		t.Fatalf("exit %d, want %d", code, exitFound)
	}
	want := filepath.Join(dir, "bad.sls") + ":3:19: "
	if !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, `map has no entry for key "nope"`) {
		t.Fatalf("stderr %q, want prefix %q", errOut, want)
	}
	if !strings.Contains(out, `"tgt": "web1"`) {
		t.Fatalf("good file did not render: %s", out)
	}
}

func TestRenderUsageErrors(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"render"},
		{"render", "-c", exampleConf},
		{"render", "-c", exampleConf, "--tag", "x", "--event", "y"},
		{"render", "-c", exampleConf, "--tag", "x", "--data", "[1]"},
		{"render", "-c", "/nonexistent/reactord.conf", "--tag", "x"},
	}
	for _, args := range cases {
		if code, _, errOut := runCmd(t, "", args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": `reactor:
  - 'a/*':
    - missing.sls
  - 'b/*': bad_template.sls
  - 'c/*':
    - static_bad.sls
  - 'd/*': ok.sls
    'e/*': ok.sls
  - just-a-string
reactord:
  workerz: 2
`,
		"bad_template.sls": "x:\n  local.test.ping:\n    - tgt: {{ .data.id \n",
		"static_bad.sls":   "y:\n  local.test.ping:\n    tgt: web1\n",
		"ok.sls":           "z:\n  local.test.ping:\n    - tgt: web1\n",
	})
	code, out, errOut := runCmd(t, "", "check", "-c", filepath.Join(dir, "reactor.conf"))
	if code != exitFound {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	conf := filepath.Join(dir, "reactor.conf")
	for _, want := range []string{
		conf + ":11:3: unknown reactord setting \"workerz\"",
		conf + ":3:7: SLS missing.sls matches no file",
		filepath.Join(dir, "bad_template.sls") + ":4:1: unclosed action",
		filepath.Join(dir, "static_bad.sls") + ":1:1: State 'y' in SLS",
		conf + ":7:5: reactor entry has 2 keys",
		conf + ":9:5: reactor entry is not a mapping",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q\n%s", want, errOut)
		}
	}
}

func TestCheckConfigSyntaxError(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"reactor.conf": "reactor:\n  - *unquoted:\n    - x.sls\n"})
	code, _, errOut := runCmd(t, "", "check", "-c", filepath.Join(dir, "reactor.conf"))
	if code != exitFound && code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errOut, filepath.Join(dir, "reactor.conf")+":2:") {
		t.Fatalf("stderr %q lacks a position", errOut)
	}
}

func TestReplayContract(t *testing.T) {
	t.Parallel()
	events := strings.Join([]string{
		`{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}`,
		"salt/auth\t{\"act\": \"pend\", \"id\": \"web2\"}",
		`this is not an event`,
		``,
		`{"tag": "unmatched/tag", "data": {"x": 1}}`,
	}, "\n")
	code, out, errOut := runCmd(t, events, "replay", "-c", exampleConf, "-")
	if code != exitFound {
		t.Fatalf("exit %d, want %d (one malformed line)\n%s", code, exitFound, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d reaction lines: %q", len(lines), out)
	}
	var first struct {
		Tag   string         `json:"tag"`
		Chunk map[string]any `json:"chunk"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Tag != "salt/minion/web1/start" || first.Chunk["tgt"] != "web1" {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	errLines := strings.Split(strings.TrimSpace(errOut), "\n")
	var sum map[string]any
	if err := json.Unmarshal([]byte(errLines[len(errLines)-1]), &sum); err != nil {
		t.Fatalf("last stderr line is not the JSON summary: %q", errLines[len(errLines)-1])
	}
	for _, k := range []string{"events", "matched", "reactions", "errors", "seconds", "events_per_sec"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %q", k)
		}
	}
	if sum["events"] != 4.0 || sum["matched"] != 2.0 || sum["reactions"] != 2.0 || sum["errors"] != 1.0 {
		t.Errorf("summary = %v", sum)
	}
	// The malformed line is named by its number in the input (the empty
	// line 4 counts).
	if !strings.HasPrefix(errOut, "line 3: ") {
		t.Errorf("the error does not name its input line:\n%s", errOut)
	}

	// --quiet prints no reactions but still the summary.
	code, out, errOut = runCmd(t, `{"tag": "salt/minion/web1/start", "data": {"id": "web1"}}`, "replay", "-c", exampleConf, "--quiet", "-")
	if code != exitOK || out != "" || !strings.Contains(errOut, `"reactions":1`) {
		t.Fatalf("--quiet: %d %q %q", code, out, errOut)
	}
}

func TestReplayKeepsInputOrder(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 3000 {
		b.WriteString(`{"tag": "salt/minion/web` + itoa(i) + `/start", "data": {"id": "web` + itoa(i) + `"}}` + "\n")
	}
	code, out, errOut := runCmd(t, b.String(), "replay", "-c", exampleConf, "--workers", "4", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3000 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if !strings.Contains(l, `"tgt":"web`+itoa(i)+`"`) {
			t.Fatalf("line %d out of order: %s", i, l)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestExplain(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": `reactor:
  - 'salt/beacon/*/inotify/*':
      sls: [a.sls, b.sls]
      when: data.change == "IN_MODIFY"
      throttle: {count: 2, per: 1m, key: data.id}
  - 'salt/beacon/*/inotify/*': broken.sls
  - 'other/*': a.sls
`,
		"a.sls":      "revert:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
		"b.sls":      "revert:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n    - tgt_type: list\n",
		"broken.sls": "x:\n  local.test.ping:\n    - tgt: {{ .data.nope }}\n",
		"ev.json":    `{"tag": "salt/beacon/web1/inotify/etc", "data": {"id": "web1", "change": "IN_MODIFY"}}`,
	})
	code, out, errOut := runCmd(t, "", "explain", "-c", filepath.Join(dir, "reactor.conf"), "--event", filepath.Join(dir, "ev.json"))
	if code != exitFound {
		t.Fatalf("exit %d (want 1: broken.sls fails)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`#0 "salt/beacon/*/inotify/*"`, ": matched",
		"when: `data.change == \"IN_MODIFY\"` is true",
		"throttle (applied by the daemon): at most 2 per 1m0s per `data.id`",
		`#2 "other/*"`, "no match",
		"broken.sls:3:19:",
		`reaction ID "revert" from ` + filepath.Join(dir, "a.sls") + ":1 was replaced by " + filepath.Join(dir, "b.sls") + ":1",
		"verify_high: ok",
		"1. local state.apply",
		`saltapi: POST https://salt-api:8000/ [{"client":"local_async","tgt":"web1","tgt_type":"list"`,
		"exec: salt --async -L -- web1 state.apply",
		"loop guard (beacons): held back while a job this reaction started runs on web1",
		"guard: beacons",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q\n%s", want, out)
		}
	}
	// --tag and --data, as render takes them, explain the same event.
	_, outTag, _ := runCmd(t, "", "explain", "-c", filepath.Join(dir, "reactor.conf"), "--tag", "salt/beacon/web1/inotify/etc", "--data", `{"id": "web1", "change": "IN_MODIFY"}`)
	if outTag != out {
		t.Errorf("explain --tag --data differs from --event:\n%s\nvs\n%s", outTag, out)
	}
	// Each rule is named by its stable id, the key of its throttle state.
	if !regexp.MustCompile(`#0 "salt/beacon/\*/inotify/\*" \([^)]*, id (r[0-9a-f]{12})\): matched\n(?s:.*)counted under rule id r[0-9a-f]{12}\n`).MatchString(out) {
		t.Errorf("explain does not name rule #0 and its throttle by the rule's id:\n%s", out)
	}
	// A false condition is explained.
	ev2 := filepath.Join(dir, "ev2.json")
	if err := os.WriteFile(ev2, []byte(`{"tag": "salt/beacon/web1/inotify/etc", "data": {"id": "web1", "change": "IN_IGNORED"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, _ = runCmd(t, "", "explain", "-c", filepath.Join(dir, "reactor.conf"), "--event", ev2)
	if !strings.Contains(out, "not reacting: when: `data.change == \"IN_MODIFY\"` is false") {
		t.Errorf("false condition not explained:\n%s", out)
	}
	// A minion's event naming another minion is explained as forged.
	_, out, _ = runCmd(t, "", "explain", "-c", filepath.Join(dir, "reactor.conf"), "--tag", "salt/beacon/web1/inotify/etc",
		"--data", `{"id": "web2", "cmd": "_minion_event", "change": "IN_MODIFY"}`)
	for _, want := range []string{
		"origin: forged? minion web2 sent an event naming minion web1",
		"not reacting: forged event: minion web2 sent an event naming minion web1 (from: any on the rule accepts it)",
		"from: default (forged minion events refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("forged event: explain output lacks %q\n%s", want, out)
		}
	}
}

// TestCheckRules: check --rules prints each rule's stable id and its loop
// guard (the default, or its guard: option); a guard that is not a mode
// is an error at its position.
func TestCheckRules(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"reactor.conf": "reactor:\n  - 'salt/minion/*/start': [start.sls]\n  - 'salt/beacon/*/inotify/*':\n      id: revert\n      sls: start.sls\n      guard: minion\n      from: minion\n      concurrency: 5\n      retry: {attempts: 2, backoff: 30s}\n",
		"start.sls":    "hs:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
		"bad.conf":     "reactor:\n  - 'a/*':\n      sls: start.sls\n      guard: always\n",
	})
	code, out, errOut := runCmd(t, "", "check", "--rules", "-c", filepath.Join(dir, "reactor.conf"))
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^rule r[0-9a-f]{12}: salt/minion/\*/start -> start\.sls \(.*\) guard: beacons$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^rule revert: salt/beacon/\*/inotify/\* -> start\.sls \(.*\) guard: minion from: minion concurrency: 5 retry: 2 every 30s\+$`).MatchString(out) {
		t.Fatalf("check --rules:\n%s", out)
	}
	code, out, errOut = runCmd(t, "", "check", "-c", filepath.Join(dir, "bad.conf"))
	if code == exitOK || !strings.Contains(out+errOut, "bad.conf:4:14: guard must be beacons") {
		t.Fatalf("exit %d for guard: always:\n%s%s", code, out, errOut)
	}
}
