package salt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/event"
)

// TestSurveyOnRealSalt renders a folder of reaction files against a real
// master twice, one file at a time: once by Salt's own reactor, once by
// reactord (the master driver, its Salt calls through salt-run), each on an
// event of its own tag and the same data, and compares the jobs each
// published (function, target, arguments; the tag's prefix evened out).
// Set REACTORD_E2E_SURVEY to the folder: each NAME.sls, with NAME.event.json
// ({"data": {...}}) beside it or {"id": "web1"} as data; nothing of the
// folder is part of the repository. REACTORD_E2E_SURVEY_CALLS sets
// reactord's --salt-calls (default read-only); REACTORD_E2E_SURVEY_WAIT how
// long each event's jobs are waited for (default 5s).
func TestSurveyOnRealSalt(t *testing.T) {
	dir := os.Getenv("REACTORD_E2E_SURVEY")
	if dir == "" {
		t.Skip("set REACTORD_E2E_SURVEY=DIR to compare a folder of reaction files with Salt's own reactor")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.sls"))
	slices.Sort(files)
	if len(files) == 0 {
		t.Fatalf("no *.sls in %s", dir)
	}
	var saltRules, rdRules strings.Builder
	for i, f := range files {
		fmt.Fprintf(&saltRules, "  - 'survey/salt/%d':\n    - %s\n", i, f)
		fmt.Fprintf(&rdRules, "  - 'survey/rd/%d':\n    - %s\n", i, f)
	}
	e := startSalt(t, saltOptions{masterExtra: "reactor:\n" + saltRules.String()})
	calls := os.Getenv("REACTORD_E2E_SURVEY_CALLS")
	if calls == "" {
		calls = "read-only"
	}
	r := startReactordRules(t, e, "master", filepath.Join(rootDir(), "examples/reactor/revert-on-inotify/revert.sls"), rdRules.String(), "--salt-calls", calls, "--start-broken")
	e.startMinions()
	waitFor(t, 120*time.Second, "minion keys accepted by the reactor", func() error {
		out, err := e.salt("salt", "--out", "json", "--static", "*", "test.ping")
		if err != nil || strings.Count(out, "true") < 2 {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	jobs := func(since int) []string {
		var out []string
		runs := map[string]bool{}
		evs := r.seen(func(event.Event) bool { return true })
		for _, ev := range evs[since:] {
			// A job's publish (salt/job/<jid>/new); a runner's start, or
			// its return when the master fired no start for it (its
			// runner clear function does not for every runner).
			jt, ok := event.ParseJobTag(ev.Tag)
			if !ok || !strings.HasSuffix(ev.Tag, "/new") && !(strings.HasPrefix(ev.Tag, "salt/run/") && strings.HasSuffix(ev.Tag, "/ret")) {
				continue
			}
			if strings.HasPrefix(ev.Tag, "salt/run/") {
				if runs[jt.JID] {
					continue
				}
				runs[jt.JID] = true
			}
			fun := fmt.Sprint(ev.Data["fun"])
			if fun == "saltutil.find_job" || fun == "runner.jobs.list_jobs" || fun == "runner.salt.cmd" {
				continue // not reactions: Salt's own polling, reactord's Salt calls while rendering
			}
			if fa, _ := ev.Data["fun_args"].([]any); fun == "runner.event.send" && len(fa) > 0 && strings.HasPrefix(fmt.Sprint(fa[0]), "survey/") {
				continue // the test's own firing of the event
			}
			b, _ := json.Marshal(map[string]any{"fun": fun, "tgt": ev.Data["tgt"], "tgt_type": ev.Data["tgt_type"], "arg": ev.Data["arg"], "fun_args": ev.Data["fun_args"]})
			out = append(out, strings.ReplaceAll(string(b), "survey/rd/", "survey/salt/"))
		}
		slices.Sort(out)
		return out
	}
	wait := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("REACTORD_E2E_SURVEY_WAIT")); err == nil {
		wait = d
	}
	fire := func(tag string, data map[string]any) int {
		mark := len(r.seen(func(event.Event) bool { return true }))
		b, _ := json.Marshal(data)
		if out, err := e.salt("salt-run", "event.send", tag, string(b)); err != nil {
			t.Fatalf("event.send %s: %v %s", tag, err, out)
		}
		time.Sleep(wait)
		return mark
	}
	same, nothing := 0, 0
	for i, f := range files {
		data := map[string]any{"id": "web1"}
		if b, err := os.ReadFile(strings.TrimSuffix(f, ".sls") + ".event.json"); err == nil {
			var ev struct {
				Data map[string]any `json:"data"`
			}
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatalf("%s.event.json: %v", f, err)
			}
			data = ev.Data
		}
		m := fire(fmt.Sprintf("survey/salt/%d", i), data)
		saltJobs := jobs(m)
		m = fire(fmt.Sprintf("survey/rd/%d", i), data)
		rdJobs := jobs(m)
		why := ""
		if b, err := os.ReadFile(filepath.Join(e.dir, "log", "master")); err == nil {
			if lines := grepLines(string(b), filepath.Base(f)); len(lines) > 0 {
				why = "; Salt logged: " + lines[len(lines)-1]
			}
		}
		if lines := grepLines(r.log(), filepath.Base(f)); len(lines) > 0 {
			why += "; reactord logged: " + lines[len(lines)-1]
		}
		switch {
		case slices.Equal(saltJobs, rdJobs) && len(saltJobs) == 0:
			nothing++
			t.Logf("%s: neither published a job%s", filepath.Base(f), why)
		case slices.Equal(saltJobs, rdJobs):
			same++
			t.Logf("%s: the same %d job(s)", filepath.Base(f), len(saltJobs))
		default:
			t.Errorf("%s: Salt published %v\nreactord published %v%s", filepath.Base(f), saltJobs, rdJobs, why)
		}
	}
	t.Logf("%d files: %d published the same jobs, %d published none in both, %d differ", len(files), same, nothing, len(files)-same-nothing)
	if lines := grepLines(r.log(), "reaction file dropped"); len(lines) > 0 {
		t.Logf("reactord's render errors:\n%s", strings.Join(lines, "\n"))
	}
}

func grepLines(text, sub string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}
