package salt_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/wait"
)

// TestStorm measures, side by side in one run on the same machine, how fast
// state.apply jobs reach a real master when a storm of minion start events
// hits its bus: Salt's own reactor, reactord's master, saltapi and exec
// drivers, each on a fresh master with the same minions. Set
// REACTORD_E2E_STORM to the number of events (e.g. 1000); it takes minutes.
// REACTORD_E2E_STORM_MINIONS spreads them over that many minions (10 by
// default); REACTORD_E2E_STORM_ONLY lists the contenders, in order (a name
// twice runs twice: alternate pairs to see the machine's drift).
// A contender's name ending in -hand-over-D runs that contender with
// --hand-over-after D (e.g. reactord-master-hand-over-0s,
// reactord-master-engine-hand-over-5ms, reactord-saltapi-no-merge-hand-over-0s).
// REACTORD_E2E_NETAPI=rest_tornado serves salt-api with rest_tornado (one
// process) instead of rest_cherrypy, for every test of this package.
//
// The events are pushed into the master's own bus through its
// master_event_pull.ipc socket, exactly as Salt's fire_event does, so every
// subscriber (Salt's reactor, the bridge) sees them as real events. Jobs are
// counted from the master's salt/job/<jid>/new events; a job coalescing
// several minions counts once in "jobs" and once per minion in "minion
// jobs". The minions are stopped once their keys are accepted and they
// answered: the master still publishes jobs for accepted keys, and running
// a thousand highstates would measure the minions' CPU on this machine, not
// the reactors.
func TestStorm(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REACTORD_E2E_STORM"))
	if n <= 0 {
		t.Skip("set REACTORD_E2E_STORM=N to measure a storm of N minion start events")
	}
	minions := []string{}
	spread := 10
	if m, _ := strconv.Atoi(os.Getenv("REACTORD_E2E_STORM_MINIONS")); m > 0 {
		spread = m
	}
	for i := 1; i <= spread; i++ {
		minions = append(minions, fmt.Sprintf("web%d", i))
	}
	type result struct {
		name                 string
		jobs, minionJobs     int
		seconds, jps, mjobps float64
	}
	// REACTORD_E2E_STORM_KIND=runner reacts to myco/storm/<id> events with
	// runner.test.arg instead (counted from salt/run/<jid>/new);
	// runner-event with runner.event.send.
	kind := os.Getenv("REACTORD_E2E_STORM_KIND")
	runner := kind == "runner" || kind == "runner-event"
	runnerFun, runnerSrc := "runner.test.arg", "storm_runner:\n  runner.test.arg:\n    - id: {{ data['id'] }}\n"
	if kind == "runner-event" {
		runnerFun, runnerSrc = "runner.event.send", "storm_runner:\n  runner.event.send:\n    - tag: myco/storm-echo/{{ data['id'] }}\n    - data:\n        id: {{ data['id'] }}\n"
	}
	var results []result
	contenders := []string{"salt-reactor", "reactord-master", "reactord-saltapi", "reactord-saltapi-no-merge", "reactord-exec", "reactord-exec-1proc", "reactord-saltapi-guard-on"}
	if only := os.Getenv("REACTORD_E2E_STORM_ONLY"); only != "" {
		contenders = strings.Split(only, ",")
	}
	for _, contender := range contenders {
		t.Run(contender, func(t *testing.T) {
			extra := ""
			dir := t.TempDir()
			runnerSLS, runnerRule := filepath.Join(dir, "runner.sls"), ""
			if runner {
				writeFile(t, runnerSLS, runnerSrc)
				runnerRule = "  - 'myco/storm/*':\n    - " + runnerSLS + "\n"
			}
			if contender == "salt-reactor" {
				sls := filepath.Join(dir, "highstate.sls")
				writeFile(t, sls, "highstate_on_start:\n  local.state.apply:\n    - tgt: {{ data['id'] }}\n")
				extra = "reactor:\n  - 'salt/minion/*/start':\n    - " + sls + "\n" + runnerRule
			}
			// A contender ending in -hand-over-D is the contender named
			// before that ending, run with --hand-over-after D.
			base, handOver, _ := strings.Cut(contender, "-hand-over-")
			flags := func(args ...string) []string {
				if handOver != "" {
					args = append(args, "--hand-over-after", handOver)
				}
				return args
			}
			engine := base == "reactord-master-engine" || strings.HasPrefix(base, "reactord-master-engine-procs")
			if base == "reactord-master-engine" {
				// reactord's Salt engine in the master, at its defaults.
				extra = engineConfig("{}")
			} else if procs, ok := strings.CutPrefix(base, "reactord-master-engine-procs"); ok {
				// ... with worker_processes N.
				extra = engineConfig("{worker_processes: " + procs + "}")
			}
			e := startSalt(t, saltOptions{minions: minions, masterExtra: extra, minionExtra: ""})
			e.startMinions()
			waitFor(t, 120*time.Second, "minion keys", func() error {
				out, err := e.salt("salt-key", "-l", "pre", "--out", "json")
				if err != nil || strings.Count(out, "web") < len(minions) {
					return fmt.Errorf("pending: %s %v", out, err)
				}
				return nil
			})
			if out, err := e.salt("salt-key", "-A", "-y"); err != nil {
				t.Fatalf("salt-key -A: %v %s", err, out)
			}
			waitFor(t, 120*time.Second, "all minions up", func() error {
				out, _ := e.salt("salt", "*", "test.ping", "--out", "txt", "-t", "10")
				if c := strings.Count(out, "True"); c < len(minions) {
					return fmt.Errorf("%d minions answer", c)
				}
				return nil
			})
			e.stopMinions()
			var rd *reactord
			switch base {
			case "reactord-saltapi":
				rd = startReactord(t, e, "saltapi", flags("--no-loop-guard")...)
			case "reactord-saltapi-inflight1":
				rd = startReactord(t, e, "saltapi", flags("--no-loop-guard", "--saltapi-max-in-flight", "1")...)
			case "reactord-saltapi-inflight2":
				rd = startReactord(t, e, "saltapi", flags("--no-loop-guard", "--saltapi-max-in-flight", "2")...)
			case "reactord-saltapi-no-merge":
				rd = startReactord(t, e, "saltapi", flags("--no-loop-guard", "--saltapi-merge", "1")...)
			case "reactord-exec":
				rd = startReactord(t, e, "exec", flags("--no-loop-guard")...)
			case "reactord-saltapi-no-merge-inflight4", "reactord-saltapi-no-merge-inflight8", "reactord-saltapi-no-merge-inflight16":
				rd = startReactord(t, e, "saltapi", "--no-loop-guard", "--saltapi-merge", "1", "--saltapi-max-in-flight", strings.TrimPrefix(base, "reactord-saltapi-no-merge-inflight"))
			case "reactord-exec-1proc":
				rd = startReactord(t, e, "exec", flags("--no-loop-guard", "--exec-max-procs", "1")...)
			case "reactord-saltapi-guard-on":
				rd = startReactord(t, e, "saltapi", flags()...)
			case "reactord-master", "reactord-master-engine", "reactord-master-engine-procs1", "reactord-master-engine-procs2",
				"reactord-master-engine-procs3", "reactord-master-engine-procs4":
				if engine {
					waitEngine(t, e)
				}
				root, _ := filepath.Abs("../..")
				rd = startReactordRules(t, e, "master", root+"/examples/reactor/revert-on-inotify/revert.sls", runnerRule, flags("--no-loop-guard")...)
			case "reactord-master-guard-on":
				rd = startReactord(t, e, "master", flags()...)
			}
			// The plain loops run no reactord: a Go client posts the
			// driver's lowstate for each event straight to salt-api.
			plain, plainInFlight := false, saltapi.DefaultMaxInFlight
			switch contender {
			case "saltapi-plain-loop":
				plain = true
			case "saltapi-plain-loop-inflight1":
				plain, plainInFlight = true, 1
			}
			var token string
			if plain {
				if runner {
					t.Fatalf("%s posts local_async state.apply lowstates only", contender)
				}
				token = saltAPILogin(t, e.apiURL)
			}
			time.Sleep(5 * time.Second) // let the start-up settle
			fun := ""
			if runner {
				fun = runnerFun
			}
			jobs := countJobs(t, e.sockDir, fun)
			start := time.Now()
			if plain {
				rtt := plainLoop(t, e.apiURL, token, minions, n, plainInFlight)
				t.Logf("%s: %d in flight, %.1f ms a POST on average", contender, plainInFlight, 1000*rtt.Seconds())
			} else {
				pushStarts(t, e.sockDir, minions, n, runner)
			}
			pushed := time.Since(start)
			jobs.waitQuiet(n, 15*time.Second)
			j, mj, last := jobs.totals()
			secs := last.Sub(start).Seconds()
			r := result{name: contender, jobs: j, minionJobs: mj, seconds: secs}
			if secs > 0 {
				r.jps, r.mjobps = float64(j)/secs, float64(mj)/secs
			}
			results = append(results, r)
			if rd != nil && j > 0 {
				// What the driver's calls took, beside the time per job:
				// the rest is reactord's own path between two calls.
				sum, count := rd.metricValue("reactord_action_duration_seconds_sum"), rd.metricValue("reactord_action_duration_seconds_count")
				if count > 0 {
					t.Logf("%s: %.0f dispatches, %.1f ms each on average; %.1f ms per job", contender, count, 1000*sum/count, 1000*secs/float64(j))
				}
			}
			t.Logf("%s: %d events pushed in %v; %d state.apply (or runner) jobs (%d minion jobs) in %.1fs: %.1f jobs/s, %.1f minion jobs/s",
				contender, n, pushed.Round(time.Millisecond), j, mj, secs, r.jps, r.mjobps)
		})
	}
	var b strings.Builder
	what := "salt/minion/*/start events, local.state.apply"
	if runner {
		what = "myco/storm/* events, runner.test.arg"
	}
	fmt.Fprintf(&b, "storm of %d %s, over %d minions:\n", n, what, len(minions))
	for _, r := range results {
		fmt.Fprintf(&b, "  %-26s %5d jobs %5d minion jobs %6.1fs %6.1f jobs/s %6.1f minion jobs/s\n", r.name, r.jobs, r.minionJobs, r.seconds, r.jps, r.mjobps)
	}
	t.Log("\n" + b.String())
}

// metricValue reads a value of the daemon's /metrics: the first line whose
// name (labels included) starts with name; 0 when there is none.
func (r *reactord) metricValue(name string) float64 {
	return r.readMetric(name, true)
}

// readMetric reads the first line of the daemon's /metrics named name, or,
// withLabels, name{...}; 0 when there is none.
func (r *reactord) readMetric(name string, withLabels bool) float64 {
	r.t.Helper()
	resp, err := http.Get("http://" + r.http + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if withLabels && strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				r.t.Fatalf("metric %s: %q: %v", name, line, err)
			}
			return v
		}
	}
	return 0
}

// saltAPILogin logs in to salt-api with the suite's eauth credentials, as
// the saltapi driver does, and returns the session token.
func saltAPILogin(t *testing.T, apiURL string) string {
	t.Helper()
	resp, err := http.Post(apiURL+"/login", "application/json", strings.NewReader(`{"username": "root", "password": "x", "eauth": "auto"}`))
	if err != nil {
		t.Fatalf("salt-api login: %v", err)
	}
	defer resp.Body.Close()
	var ans struct {
		Return []struct {
			Token string `json:"token"`
		} `json:"return"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != http.StatusOK || len(ans.Return) != 1 || ans.Return[0].Token == "" {
		t.Fatalf("salt-api login: HTTP %d, %v", resp.StatusCode, err)
	}
	return ans.Return[0].Token
}

// plainLoop is salt-api's own capacity for the storm, the reference of the
// saltapi driver: no reactord, a plain client that POSTs, for each of n
// events (round robin over minions, as pushStarts), the lowstate the
// driver sends for it with --saltapi-merge 1 (one local_async state.apply
// lowstate per POST), inFlight requests at a time over kept-alive
// connections, each answer read to its jid. It returns the mean time a
// POST took.
func plainLoop(t *testing.T, apiURL, token string, minions []string, n, inFlight int) time.Duration {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inFlight, MaxConnsPerHost: inFlight}}
	defer client.CloseIdleConnections()
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		total    time.Duration
	)
	for range inFlight {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`[{"client": "local_async", "tgt": %q, "tgt_type": "glob", "fun": "state.apply", "arg": [], "kwarg": {}}]`, minions[i%len(minions)])
				req, err := http.NewRequest(http.MethodPost, apiURL+"/", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Accept", "application/json")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Auth-Token", token)
				failure := ""
				began := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					raw, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || rerr != nil || !bytes.Contains(raw, []byte(`"jid"`)) {
						failure = fmt.Sprintf("HTTP %d %v %.200s", resp.StatusCode, rerr, raw)
					}
				} else {
					failure = err.Error()
				}
				took := time.Since(began)
				mu.Lock()
				total += took
				if failure != "" {
					failures = append(failures, failure)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d lowstate POSTs failed, the first: %s", len(failures), n, failures[0])
	}
	return total / time.Duration(n)
}

// pushStarts fires n salt/minion/<id>/start events (myco/storm/<id> with
// runner) into the master's bus through master_event_pull.ipc, round robin
// over minions.
func pushStarts(t *testing.T, sockDir string, minions []string, n int, runner bool) {
	t.Helper()
	evs := make([]event.Event, n)
	for i := range n {
		id := minions[i%len(minions)]
		tag := "salt/minion/" + id + "/start"
		if runner {
			tag = "myco/storm/" + id
		}
		evs[i] = event.Event{Tag: tag, Data: map[string]any{"id": id, "cmd": "_minion_event", "pretag": nil, "tag": tag,
			"data": fmt.Sprintf("Minion %s started at storm %d", id, i)}}
	}
	pushEvents(t, sockDir, evs)
}

// pushEvents fires events into the master's bus through
// master_event_pull.ipc, as the master's own processes do; each gets a
// _stamp of now (UTC, Salt's form) unless it has one.
func pushEvents(t *testing.T, sockDir string, evs []event.Event) {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(sockDir, "master_event_pull.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	for _, ev := range evs {
		data := maps.Clone(ev.Data)
		if _, ok := data["_stamp"]; !ok {
			data["_stamp"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000")
		}
		b, err := msgpack.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(bridge.SaltFrame(ev.Tag, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the master read before closing
}

// jobCounter counts state.apply job publishes on the master's bus (with
// runnerFun, that runner's runs).
type jobCounter struct {
	mu         sync.Mutex
	jobs       int
	minionJobs int
	last       time.Time
}

func countJobs(t *testing.T, sockDir string, runnerFun string) *jobCounter {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(sockDir, "master_event_pub.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	jc := &jobCounter{}
	go func() {
		d := msgpack.NewDecoder(bufio.NewReaderSize(c, 1<<20))
		for {
			var frame map[string]any
			if err := d.Decode(&frame); err != nil {
				return
			}
			body, _ := frame["body"].([]byte)
			tag, packed, ok := bytes.Cut(body, []byte("\n\n"))
			prefix, fun := "salt/job/", "state.apply"
			if runnerFun != "" {
				prefix, fun = "salt/run/", runnerFun
			}
			if !ok || !bytes.HasPrefix(tag, []byte(prefix)) || !bytes.HasSuffix(tag, []byte("/new")) {
				continue
			}
			var data map[string]any
			if err := msgpack.Unmarshal(packed, &data); err != nil {
				continue
			}
			if data["fun"] != fun {
				continue
			}
			ms, _ := data["minions"].([]any)
			if runnerFun != "" {
				ms = []any{nil}
			}
			jc.mu.Lock()
			jc.jobs++
			jc.minionJobs += len(ms)
			jc.last = time.Now()
			jc.mu.Unlock()
		}
	}()
	return jc
}

// waitQuiet waits until want minion jobs were seen, or none came for quiet
// (or none at all within ten minutes).
func (jc *jobCounter) waitQuiet(want int, quiet time.Duration) {
	_ = wait.PollEvery(10*time.Minute, 200*time.Millisecond, func() error {
		jc.mu.Lock()
		defer jc.mu.Unlock()
		if jc.minionJobs >= want || (!jc.last.IsZero() && time.Since(jc.last) > quiet) {
			return nil
		}
		return errors.New("jobs still coming")
	})
}

func (jc *jobCounter) totals() (jobs, minionJobs int, last time.Time) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	return jc.jobs, jc.minionJobs, jc.last
}
