package reactor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/guard"
)

// recordedEvent is one line of a recorded bus: {"tag","data"}.
type recordedEvent struct {
	Tag  string         `json:"tag"`
	Data map[string]any `json:"data"`
	raw  []byte
	at   time.Time
}

func loadRecordedBus(t *testing.T, path string) []recordedEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordedEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev recordedEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ev.raw = append([]byte(nil), sc.Bytes()...)
		stamp, _ := ev.Data["_stamp"].(string)
		if ev.at, err = time.Parse("2006-01-02T15:04:05.999999", stamp); err != nil {
			t.Fatalf("%s: %s: _stamp %q: %v", path, ev.Tag, stamp, err)
		}
		out = append(out, ev)
	}
	return out
}

// recordedJIDs answers each revert dispatch with the jid the real master
// gave the revert it ran at that point (from the recorded salt/job/*/new).
type recordedJIDs struct {
	mu    sync.Mutex
	jids  map[string][]string // minion → revert jids, in order
	calls map[string]int
}

func (r *recordedJIDs) Name() string              { return "recorded" }
func (r *recordedJIDs) Supports(string) bool      { return true }
func (*recordedJIDs) Close(context.Context) error { return nil }

func (r *recordedJIDs) Do(_ context.Context, a actions.Action) (actions.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tgt := a.Chunk.Str("tgt")
	n := r.calls[tgt]
	r.calls[tgt]++
	if n >= len(r.jids[tgt]) {
		return actions.Result{}, fmt.Errorf("revert %d of %s: the real run had only %d", n+1, tgt, len(r.jids[tgt]))
	}
	return actions.Result{JID: r.jids[tgt][n], Minions: []string{tgt}}, nil
}

// TestLoopGuardOnRecordedSalt replays what a real master's bus carried
// during the end-to-end suite's revert-on-inotify scenario (test/salt; two
// genuine changes per minion, web2's beacon not paused during state runs)
// through the daemon, with the timing of the recording, and checks that the
// guard gives exactly the reverts the real run gave (one per genuine
// change) and suppresses every other beacon event.
func TestLoopGuardOnRecordedSalt(t *testing.T) {
	files, _ := filepath.Glob("../testdata/salt/*/e2e/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded end-to-end bus traffic under testdata/salt/*/e2e")
	}
	for _, file := range files {
		t.Run(strings.TrimPrefix(file, "../testdata/salt/"), func(t *testing.T) {
			evs := loadRecordedBus(t, file)
			drv := &recordedJIDs{jids: map[string][]string{}, calls: map[string]int{}}
			beacons := map[string]int{}
			for _, ev := range evs {
				if strings.HasPrefix(ev.Tag, "salt/job/") && strings.HasSuffix(ev.Tag, "/new") && ev.Data["fun"] == "state.apply" {
					if arg, _ := json.Marshal(ev.Data["arg"]); strings.Contains(string(arg), "maintain_important_file") {
						tgt := fmt.Sprint(ev.Data["tgt"])
						drv.jids[tgt] = append(drv.jids[tgt], fmt.Sprint(ev.Data["jid"]))
					}
				}
				if strings.HasPrefix(ev.Tag, "salt/beacon/") {
					beacons[fmt.Sprint(ev.Data["id"])]++
				}
			}
			if len(drv.jids["web2"]) != 2 || beacons["web2"] < 3 {
				t.Fatalf("recording has %d reverts and %d beacon events for web2; want 2 and more than 2", len(drv.jids["web2"]), beacons["web2"])
			}
			synctest.Test(t, func(t *testing.T) {
				eng := engineWith(t, "reactor:\n  - 'salt/beacon/*/inotify/*': revert.sls\n", map[string]string{
					"revert.sls": "revert-file:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n    - args:\n      - mods: maintain_important_file\n",
				})
				m := NewMetrics(prometheus.NewRegistry())
				// The suite ran with --settle 3s.
				d, err := New(eng, Options{Driver: drv, Lanes: 2, Block: true, Metrics: m, Guard: guard.New(guard.Options{Settle: 3 * time.Second, JobTimeout: time.Minute})})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				d.Start(ctx)
				prev := evs[0].at
				for _, ev := range evs {
					if gap := ev.at.Sub(prev); gap > 0 {
						pass(gap)
					}
					prev = ev.at
					d.Submit(ctx, Delivery{Body: ev.raw})
					synctest.Wait()
				}
				if err := d.Stop(ctx); err != nil {
					t.Fatal(err)
				}
				total, want := 0, 0
				for minion, jids := range drv.jids {
					want += len(jids)
					if drv.calls[minion] != len(jids) {
						t.Errorf("%s: %d reverts dispatched, the real run had %d", minion, drv.calls[minion], len(jids))
					}
				}
				for _, n := range beacons {
					total += n
				}
				if got := testutil.ToFloat64(m.Suppressed.WithLabelValues("loop_guard_beacon")); int(got) != total-want {
					t.Errorf("%v loop_guard suppressions, want %d (%d beacon events, %d genuine)", got, total-want, total, want)
				}
			})
		})
	}
}
