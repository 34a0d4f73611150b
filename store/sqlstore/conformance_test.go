package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/reactord/reactord/store"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// base is a whole second, so that times compare equal on every backend
// (Salt's MySQL schema keeps seconds).
var base = time.Now().UTC().Truncate(time.Second).Add(-time.Hour)

func at(seconds int) time.Time { return base.Add(time.Duration(seconds) * time.Second) }

// jidAt is the jid Salt's master would give a job published at t.
func jidAt(t time.Time) string { return jidString(t.In(time.Local)) }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// jsonEqual reports whether two JSON documents are equal as values (jsonb
// does not keep key order or spacing).
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// lookupMap turns what Lookup returns into a map from minion id to return.
func lookupMap(rets []store.Return, err error) (map[string]json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, len(rets))
	for _, r := range rets {
		if _, dup := m[r.MinionID]; dup {
			return nil, fmt.Errorf("lookup returned minion %s twice", r.MinionID)
		}
		m[r.MinionID] = r.Return
	}
	return m, nil
}

func write(t *testing.T, s store.Store, b store.Batch) {
	t.Helper()
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func checkEvents(t *testing.T, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %v, want %d %v", len(got), eventIDs(got), len(want), eventIDs(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Tag != w.Tag || g.MasterID != w.MasterID || !g.Time.Equal(w.Time) || !jsonEqual(g.Data, w.Data) {
			t.Errorf("event %d:\n got %+v (data %s)\nwant %+v (data %s)", i, g, g.Data, w, w.Data)
		}
	}
}

func eventIDs(evs []store.Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

func TestRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		jid := jidAt(at(0))
		load := `{"fun": "state.apply", "arg": ["web"], "tgt": "web*", "tgt_type": "glob", "user": "root", "minions": ["web1", "web2"]}`
		full1 := fmt.Sprintf(`{"fun": "state.apply", "jid": %q, "id": "web1", "return": {"file_|-x_|-/etc/x_|-managed": {"result": true}}, "retcode": 0, "success": true}`, jid)
		full2 := fmt.Sprintf(`{"fun": "state.apply", "jid": %q, "id": "web2", "return": "Rendering SLS failed", "retcode": 1, "success": false}`, jid)
		events := []store.Event{
			{ID: "ev-1", Tag: "salt/job/" + jid + "/new", Data: raw(load), MasterID: "master1", Time: at(0)},
			{ID: "ev-2", Tag: "salt/job/" + jid + "/ret/web1", Data: raw(full1), MasterID: "master1", Time: at(1)},
			{ID: "ev-3", Tag: "salt/job/" + jid + "/ret/web2", Data: raw(full2), MasterID: "master2", Time: at(2)},
		}
		ledger := []store.LedgerEntry{
			{EventID: "ev-0", Tag: "salt/minion/web1/start", Stage: store.StageMatched, Rule: "salt/minion/*/start", File: "/srv/reactor/start.sls", Time: at(0)},
			{EventID: "ev-0", Tag: "salt/minion/web1/start", Stage: store.StageDispatched, Rule: "salt/minion/*/start", File: "/srv/reactor/start.sls", ReactionID: "highstate", JID: jid, Minion: "web1", Detail: "local_async state.apply", Time: at(0).Add(500 * time.Millisecond)},
		}
		write(t, s, store.Batch{
			Events: events,
			Jobs:   []store.Job{{JID: jid, Load: raw(load), Time: at(0)}},
			Returns: []store.Return{
				{JID: jid, MinionID: "web1", Fun: "state.apply", Return: raw(`{"file_|-x_|-/etc/x_|-managed": {"result": true}}`), Success: true, FullRet: raw(full1), Time: at(1)},
				{JID: jid, MinionID: "web2", Fun: "state.apply", Return: raw(`"Rendering SLS failed"`), Success: false, FullRet: raw(full2), Time: at(2)},
			},
			Ledger: ledger,
		})

		jobs, err := s.Jobs(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].JID != jid || !jobs[0].Time.Equal(at(0)) {
			t.Fatalf("jobs = %+v", jobs)
		}
		// The load comes back with the job's time as Salt's _stamp.
		var gotLoad map[string]any
		if err := json.Unmarshal(jobs[0].Load, &gotLoad); err != nil {
			t.Fatal(err)
		}
		if gotLoad["fun"] != "state.apply" || gotLoad["_stamp"] != formatStamp(at(0)) || len(gotLoad) != 7 {
			t.Errorf("load = %s", jobs[0].Load)
		}

		rets, err := lookupMap(s.Lookup(ctx, jid))
		if err != nil {
			t.Fatal(err)
		}
		if len(rets) != 2 || !jsonEqual(rets["web1"], raw(`{"file_|-x_|-/etc/x_|-managed": {"result": true}}`)) || !jsonEqual(rets["web2"], raw(`"Rendering SLS failed"`)) {
			t.Errorf("lookup = %s", rets)
		}

		got, err := s.Events(ctx, time.Time{}, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, got, []store.Event{events[2], events[1], events[0]})

		trace, err := s.Trace(ctx, "ev-0")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(trace, ledger) {
			t.Errorf("trace:\n got %+v\nwant %+v", trace, ledger)
		}

		// Salt's columns hold what Salt's returner would write.
		var success, full string
		if err := db.admin.QueryRow(db.q("SELECT `success`, `full_ret` FROM `salt_returns` WHERE `id` = ?"), "web2").Scan(&success, &full); err != nil {
			t.Fatal(err)
		}
		wantSuccess := map[string]string{"sqlite": "0", "mysql": "0", "postgres": "false"}[db.name]
		if success != wantSuccess || !jsonEqual([]byte(full), []byte(full2)) {
			t.Errorf("salt_returns row: success %q full_ret %s", success, full)
		}
	})
}

func TestLookupShape(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		jid, other := jidAt(at(0)), jidAt(at(1))
		rets := []store.Return{
			{JID: jid, MinionID: "web1", Fun: "test.ping", Return: raw(`true`), Time: at(1)},
			{JID: jid, MinionID: "web2", Fun: "cmd.run", Return: raw(`"hello\nworld"`), Time: at(2)},
			{JID: jid, MinionID: "db1", Fun: "grains.item", Return: raw(`{"os": "Debian", "num_cpus": 2, "ipv4": ["10.0.0.1"]}`), Time: at(3)},
			{JID: jid, MinionID: "db2", Fun: "test.arg", Return: raw(`null`), Time: at(4)},
			{JID: jid, MinionID: "db3", Fun: "test.arg", Return: nil, Time: at(4)},
			{JID: jid, MinionID: "web3", Fun: "disk.usage", Return: raw(`42`), Time: at(5)},
			// A second return of web3 for the same job: the first wins,
			// as in Salt's local_cache, which drops the second.
			{JID: jid, MinionID: "web3", Fun: "disk.usage", Return: raw(`43`), Time: at(6)},
			{JID: other, MinionID: "web1", Fun: "test.ping", Return: raw(`false`), Time: at(7)},
		}
		write(t, s, store.Batch{Returns: rets})
		got, err := lookupMap(s.Lookup(ctx, jid))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"web1": `true`, "web2": `"hello\nworld"`, "db1": `{"ipv4": ["10.0.0.1"], "num_cpus": 2, "os": "Debian"}`,
			"db2": `null`, "db3": `null`, "web3": `42`,
		}
		if len(got) != len(want) {
			t.Fatalf("lookup = %s", got)
		}
		for id, w := range want {
			if !jsonEqual(got[id], raw(w)) {
				t.Errorf("lookup[%s] = %s, want %s", id, got[id], w)
			}
		}
		none, err := s.Lookup(ctx, "20000101000000000000")
		if err != nil || none == nil || len(none) != 0 {
			t.Errorf("lookup of an unknown jid = %v, %v; want an empty slice", none, err)
		}
	})
}

func TestEventsGlobSince(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		tags := []string{
			"salt/job/1/new",
			"salt/job/1/ret/web1",
			"salt/job/2/ret/db1",
			"salt/minion/web1/start",
			"salt/auth",
			"SALT/JOB/3/ret/x",
			"salt/job_x",
			"salt/jobXx",
			"100%/done",
			"salt/key",
		}
		var evs []store.Event
		for i, tag := range tags {
			evs = append(evs, store.Event{ID: fmt.Sprintf("e%d", i), Tag: tag, Data: raw(fmt.Sprintf(`{"n": %d}`, i)), MasterID: "m", Time: at(i)})
		}
		write(t, s, store.Batch{Events: evs})
		pick := func(idx ...int) []store.Event {
			out := make([]store.Event, len(idx))
			for i, x := range idx {
				out[i] = evs[x]
			}
			return out
		}
		for _, tc := range []struct {
			name  string
			glob  string
			since time.Time
			limit int
			want  []store.Event
		}{
			{"all", "", time.Time{}, 0, pick(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
			{"star", "*", time.Time{}, 0, pick(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
			{"limit", "", time.Time{}, 3, pick(9, 8, 7)},
			{"returns", "salt/job/*/ret/*", time.Time{}, 0, pick(2, 1)},
			{"job events since", "salt/job/*", at(1), 0, pick(2, 1)},
			{"job events limit", "salt/job/*", time.Time{}, 1, pick(2)},
			{"since inclusive", "", at(8), 0, pick(9, 8)},
			{"since after all", "salt/*", at(100), 0, nil},
			{"no literal prefix", "*/ret/*", time.Time{}, 0, pick(5, 2, 1)},
			{"class", "salt/job/[12]/ret/*", time.Time{}, 0, pick(2, 1)},
			{"negated class", "salt/job/[!1]/*", time.Time{}, 0, pick(2)},
			{"question mark", "salt/job/?/new", time.Time{}, 0, pick(0)},
			{"exact", "salt/auth", time.Time{}, 0, pick(4)},
			{"case-sensitive", "SALT/*", time.Time{}, 0, pick(5)},
			{"underscore is literal", "salt/job_*", time.Time{}, 0, pick(6)},
			{"percent is literal", "100%/*", time.Time{}, 0, pick(8)},
			{"no match", "nothing/*", time.Time{}, 0, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Events(ctx, tc.since, tc.glob, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				checkEvents(t, got, tc.want)
			})
		}
	})
}

// TestEventsPaging makes Events read several pages: matches are rare, the
// glob has no literal prefix for the database to narrow on, and all events
// share one time, so that pages continue by id.
func TestEventsPaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		var evs []store.Event
		for i := range 1200 {
			tag := fmt.Sprintf("noise/%d", i)
			if i%300 == 7 {
				tag = "salt/key"
			}
			evs = append(evs, store.Event{ID: fmt.Sprintf("e%d", i), Tag: tag, Data: raw(`{}`), MasterID: "m", Time: at(0)})
		}
		write(t, s, store.Batch{Events: evs})
		got, err := s.Events(ctx, time.Time{}, "*/key", 3)
		if err != nil {
			t.Fatal(err)
		}
		if ids := eventIDs(got); !slices.Equal(ids, []string{"e907", "e607", "e307"}) {
			t.Errorf("events = %v", ids)
		}
		got, err = s.Events(ctx, at(0), "*/key", 0)
		if err != nil {
			t.Fatal(err)
		}
		if ids := eventIDs(got); !slices.Equal(ids, []string{"e907", "e607", "e307", "e7"}) {
			t.Errorf("events = %v", ids)
		}
	})
}

func TestJobsSinceLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		var jobs []store.Job
		for i := range 5 {
			jobs = append(jobs, store.Job{JID: jidAt(at(i * 10)), Load: raw(`{"fun": "test.ping"}`), Time: at(i * 10)})
		}
		// A job Salt stored without _stamp: its time is its jid's.
		noStamp := store.Job{JID: jidAt(at(60)), Load: raw(`{"fun": "test.version"}`)}
		write(t, s, store.Batch{Jobs: append(slices.Clone(jobs), noStamp)})
		for _, tc := range []struct {
			name  string
			since time.Time
			limit int
			want  []string
		}{
			{"all", time.Time{}, 0, []string{noStamp.JID, jobs[4].JID, jobs[3].JID, jobs[2].JID, jobs[1].JID, jobs[0].JID}},
			{"limit", time.Time{}, 2, []string{noStamp.JID, jobs[4].JID}},
			{"since", at(20), 0, []string{noStamp.JID, jobs[4].JID, jobs[3].JID, jobs[2].JID}},
			{"since limit", at(20), 3, []string{noStamp.JID, jobs[4].JID, jobs[3].JID}},
			{"since after all", at(61), 0, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Jobs(ctx, tc.since, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, j := range got {
					ids = append(ids, j.JID)
				}
				if !slices.Equal(ids, tc.want) {
					t.Errorf("jobs = %v, want %v", ids, tc.want)
				}
			})
		}
		got, err := s.Jobs(ctx, at(60), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].Time.Equal(at(60)) || !jsonEqual(got[0].Load, noStamp.Load) {
			t.Errorf("job without _stamp = %+v", got)
		}
	})
}

func TestTrace(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		j1 := jidAt(at(2))
		l := []store.LedgerEntry{
			{EventID: "ev-1", Tag: "salt/beacon/web1/inotify//etc/x", Stage: store.StageMatched, Rule: "salt/beacon/*/inotify/*", File: "/srv/reactor/fix.sls", Time: at(0)},
			{EventID: "ev-1", Tag: "salt/beacon/web1/inotify//etc/x", Stage: store.StageRendered, Rule: "salt/beacon/*/inotify/*", File: "/srv/reactor/fix.sls", ReactionID: "fix", Time: at(1)},
			{EventID: "ev-1", Tag: "salt/beacon/web1/inotify//etc/x", Stage: store.StageDispatched, Rule: "salt/beacon/*/inotify/*", File: "/srv/reactor/fix.sls", ReactionID: "fix", JID: j1, Minion: "web1", Time: at(2)},
			{EventID: "ev-9", Tag: "salt/job/" + j1 + "/ret/web1", Stage: store.StageReturned, JID: j1, Minion: "web1", Detail: "success", Time: at(3)},
			{EventID: "ev-9", Tag: "salt/job/" + j1 + "/ret/web1", Stage: store.StageMatched, Rule: "salt/job/*/ret/*", File: "/srv/reactor/ret.sls", Time: at(3)},
			{EventID: "ev-3", Tag: "salt/auth", Stage: store.StageSuppressed, Rule: "salt/auth", File: "/srv/reactor/auth.sls", Detail: "throttled", Time: at(4)},
			{Stage: store.StageTimeout, JID: j1, Minion: "web2", Detail: "no return in 60s", Time: at(5)},
		}
		// In two batches, so that ties in time are broken by write order.
		write(t, s, store.Batch{Ledger: l[:4]})
		write(t, s, store.Batch{Ledger: l[4:]})
		pick := func(idx ...int) []store.LedgerEntry {
			out := []store.LedgerEntry{}
			for _, x := range idx {
				out = append(out, l[x])
			}
			return out
		}
		for _, tc := range []struct {
			id   string
			want []store.LedgerEntry
		}{
			{"ev-1", pick(0, 1, 2, 3, 6)}, // the event and the job it started
			{j1, pick(0, 1, 2, 3, 6)},     // the job and the event that started it
			{"ev-9", pick(2, 3, 4, 6)},    // the return event and its job
			{"ev-3", pick(5)},
			{"unknown", pick()},
			{"", pick()}, // not every entry without an event id or jid
		} {
			t.Run(tc.id, func(t *testing.T) {
				got, err := s.Trace(ctx, tc.id)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("trace(%s):\n got %+v\nwant %+v", tc.id, got, tc.want)
				}
			})
		}
	})
}

// TestLedger: Ledger reads one stage's entries in [Since, Until), of one
// rule compared byte for byte, oldest first (ties in the order written),
// at most Limit of them.
func TestLedger(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		ms := func(sec, milli int) time.Time { return at(sec).Add(time.Duration(milli) * time.Millisecond) }
		const start = "salt/minion/*/start"
		shadowAt := func(tm time.Time, rule, eid, detail string) store.LedgerEntry {
			return store.LedgerEntry{EventID: eid, Tag: "salt/minion/web1/start", Stage: store.StageShadow, Rule: rule,
				File: "/srv/reactor/start.sls", ReactionID: "highstate", JID: jidAt(tm), Minion: "web1", Detail: detail, Time: tm}
		}
		l := []store.LedgerEntry{
			0: shadowAt(ms(0, 0), start, "ev-0", `{"verdict":"agree"}`),
			1: shadowAt(ms(1, 250), start, "ev-1", `{"verdict":"differ","reason":"other arguments"}`),
			2: shadowAt(ms(2, 0), "salt/auth", "ev-2", `{"verdict":"agree"}`),
			// Not the rule start: another case, a trailing space.
			3: shadowAt(ms(2, 500), "SALT/minion/*/start", "ev-3", `{"verdict":"agree"}`),
			4: shadowAt(ms(2, 500), start+" ", "ev-4", `{"verdict":"agree"}`),
			// Another stage, between the others.
			5: {EventID: "ev-5", Tag: "salt/minion/web1/start", Stage: store.StageDispatched, Rule: start, JID: jidAt(at(3)), Time: ms(3, 0)},
			// Salt jobs no decision accounts for have no rule.
			6: {Tag: "salt/job/" + jidAt(at(3)) + "/new", Stage: store.StageShadow, JID: jidAt(at(3)), Detail: `{"verdict":"ambiguous"}`, Time: ms(3, 0)},
			7: shadowAt(ms(4, 0), start, "ev-7", `{"verdict":"held-loop"}`),
			8: shadowAt(ms(5, 999), start, "ev-8", `{"verdict":"agree"}`),
		}
		// In two batches, the second written first: the order is by
		// time, and, for ties, the order of the writes.
		write(t, s, store.Batch{Ledger: l[6:]})
		write(t, s, store.Batch{Ledger: l[:6]})
		pick := func(idx ...int) []store.LedgerEntry {
			out := []store.LedgerEntry{}
			for _, x := range idx {
				out = append(out, l[x])
			}
			return out
		}
		for _, tc := range []struct {
			name string
			q    store.LedgerQuery
			want []store.LedgerEntry
		}{
			{"stage", store.LedgerQuery{Stage: store.StageShadow}, pick(0, 1, 2, 3, 4, 6, 7, 8)},
			{"other stage", store.LedgerQuery{Stage: store.StageDispatched}, pick(5)},
			{"stage case", store.LedgerQuery{Stage: "SHADOW"}, pick()},
			{"since inclusive", store.LedgerQuery{Stage: store.StageShadow, Since: ms(2, 0)}, pick(2, 3, 4, 6, 7, 8)},
			{"since sub-second", store.LedgerQuery{Stage: store.StageShadow, Since: ms(1, 251)}, pick(2, 3, 4, 6, 7, 8)},
			{"until exclusive", store.LedgerQuery{Stage: store.StageShadow, Until: ms(2, 500)}, pick(0, 1, 2)},
			{"span", store.LedgerQuery{Stage: store.StageShadow, Since: ms(1, 250), Until: ms(4, 0)}, pick(1, 2, 3, 4, 6)},
			{"empty span", store.LedgerQuery{Stage: store.StageShadow, Since: ms(4, 1), Until: ms(5, 999)}, pick()},
			{"rule exact", store.LedgerQuery{Stage: store.StageShadow, Rule: start}, pick(0, 1, 7, 8)},
			{"rule other case", store.LedgerQuery{Stage: store.StageShadow, Rule: "SALT/minion/*/start"}, pick(3)},
			{"rule is no glob", store.LedgerQuery{Stage: store.StageShadow, Rule: "salt/*"}, pick()},
			{"limit oldest", store.LedgerQuery{Stage: store.StageShadow, Limit: 3}, pick(0, 1, 2)},
			{"limit ties", store.LedgerQuery{Stage: store.StageShadow, Limit: 5}, pick(0, 1, 2, 3, 4)},
			{"all", store.LedgerQuery{Stage: store.StageShadow, Since: ms(1, 0), Until: ms(6, 0), Rule: start, Limit: 2}, pick(1, 7)},
			{"negative limit", store.LedgerQuery{Stage: store.StageShadow, Rule: start, Limit: -1}, pick(0, 1, 7, 8)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Ledger(ctx, tc.q)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("ledger(%+v):\n got %+v\nwant %+v", tc.q, got, tc.want)
				}
			})
		}
		if got, err := s.Ledger(ctx, store.LedgerQuery{}); !errors.Is(err, store.ErrNoStage) {
			t.Errorf("ledger without a stage = %v, %v; want ErrNoStage", got, err)
		}
	})
}

func TestPurge(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		now := time.Now().UTC().Truncate(time.Second)
		old, recent, cut := now.Add(-48*time.Hour), now.Add(-time.Hour), now.Add(-24*time.Hour)
		jOld, jOldRet, jRecent := jidAt(old), jidAt(old.Add(time.Second)), jidAt(recent)
		write(t, s, store.Batch{
			Jobs: []store.Job{
				{JID: jOld, Load: raw(`{}`), Time: old},            // no return: purged by its jid
				{JID: jOldRet, Load: raw(`{}`), Time: old},         // purged with its old return
				{JID: jRecent, Load: raw(`{}`), Time: recent},      // kept
				{JID: "custom-jid", Load: raw(`{}`), Time: recent}, // not a time: kept
				{JID: "req", Load: raw(`{"fun": "x"}`), Time: old}, // not a time, no return: kept
			},
			Returns: []store.Return{
				{JID: jOldRet, MinionID: "web1", Return: raw(`true`), Time: old},
				{JID: jRecent, MinionID: "web1", Return: raw(`true`), Time: recent},
			},
			Events: []store.Event{
				{ID: "old1", Tag: "a", Data: raw(`{}`), Time: old},
				{ID: "old2", Tag: "b", Data: raw(`{}`), Time: cut.Add(-time.Second)},
				{ID: "new1", Tag: "c", Data: raw(`{}`), Time: recent},
			},
			Ledger: []store.LedgerEntry{
				{EventID: "old1", Stage: store.StageMatched, Time: old},
				{EventID: "new1", Stage: store.StageMatched, Time: recent},
				{EventID: "new1", Stage: store.StageDispatched, Time: cut.Add(time.Second)},
			},
		})
		n, err := s.Purge(ctx, cut)
		if err != nil {
			t.Fatal(err)
		}
		// 2 jobs, 1 return, 2 events, 1 ledger entry.
		if n != 6 {
			t.Errorf("purged %d rows, want 6", n)
		}
		jobs, err := s.Jobs(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var jids []string
		for _, j := range jobs {
			jids = append(jids, j.JID)
		}
		slices.Sort(jids)
		if want := []string{jRecent, "custom-jid", "req"}; !slices.Equal(jids, want) {
			t.Errorf("jobs left: %v, want %v", jids, want)
		}
		if rets, _ := s.Lookup(ctx, jOldRet); len(rets) != 0 {
			t.Errorf("old returns left: %+v", rets)
		}
		if rets, _ := s.Lookup(ctx, jRecent); len(rets) != 1 {
			t.Errorf("recent returns: %+v", rets)
		}
		evs, err := s.Events(ctx, time.Time{}, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if ids := eventIDs(evs); !slices.Equal(ids, []string{"new1"}) {
			t.Errorf("events left: %v", ids)
		}
		if n := db.count(t, "SELECT COUNT(*) FROM `reactord_event_ids`"); n != 1 {
			t.Errorf("%d event ids left, want 1", n)
		}
		if tr, _ := s.Trace(ctx, "new1"); len(tr) != 2 {
			t.Errorf("ledger left: %+v", tr)
		}
		if n, err := s.Purge(ctx, cut); n != 0 || err != nil {
			t.Errorf("second purge: %d, %v", n, err)
		}
	})
}

func TestIdempotentJids(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		jid := jidAt(at(0))
		// Twice in one batch, then again in another: the first load stays.
		write(t, s, store.Batch{Jobs: []store.Job{
			{JID: jid, Load: raw(`{"fun": "first"}`)},
			{JID: jid, Load: raw(`{"fun": "second"}`)},
		}})
		write(t, s, store.Batch{Jobs: []store.Job{{JID: jid, Load: raw(`{"fun": "third"}`)}}, Events: []store.Event{{ID: "e", Tag: "t", Data: raw(`1`)}}})
		if n := db.count(t, "SELECT COUNT(*) FROM `jids` WHERE `jid` = ?", jid); n != 1 {
			t.Errorf("%d rows for the jid", n)
		}
		jobs, err := s.Jobs(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || !jsonEqual(jobs[0].Load, raw(`{"fun": "first"}`)) {
			t.Errorf("jobs = %+v", jobs)
		}
		// The rest of a batch with a known jid is written.
		if evs, _ := s.Events(ctx, time.Time{}, "", 0); len(evs) != 1 {
			t.Errorf("events = %+v", evs)
		}
	})
}

// TestSaltQueries runs Salt's returners' own SQL on what reactord wrote, and
// reads back what they write.
func TestSaltQueries(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		jid := jidAt(at(0))
		write(t, s, store.Batch{
			Jobs: []store.Job{{JID: jid, Load: raw(`{"fun": "test.ping", "tgt": "*"}`), Time: at(0)}},
			Returns: []store.Return{
				{JID: jid, MinionID: "web1", Fun: "test.ping", Return: raw(`true`), Success: true, FullRet: raw(`{"id": "web1", "return": true}`), Time: at(1)},
				{JID: jid, MinionID: "web2", Fun: "test.ping", Return: raw(`false`), Success: true, FullRet: raw(`{"id": "web2", "return": false}`), Time: at(1)},
			},
		})

		// jobs.lookup_jid through the master job cache: the query the brief
		// names, as each returner spells it.
		lookup := map[string]string{
			"mysql":    "SELECT id, `return` FROM salt_returns WHERE jid = ?",
			"sqlite":   "SELECT id, `return` FROM salt_returns WHERE jid = ?",
			"postgres": "SELECT id, return FROM salt_returns WHERE jid = $1",
		}[db.name]
		rows, err := db.admin.Query(lookup, jid)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var id, ret string
			if err := rows.Scan(&id, &ret); err != nil {
				t.Fatal(err)
			}
			got[id] = ret
		}
		rows.Close()
		if len(got) != 2 || !jsonEqual([]byte(got["web1"]), raw(`true`)) || !jsonEqual([]byte(got["web2"]), raw(`false`)) {
			t.Errorf("%s: %v", lookup, got)
		}
		// get_load and get_jid.
		var load string
		if err := db.admin.QueryRow(db.q("SELECT `load` FROM `jids` WHERE `jid` = ?"), jid).Scan(&load); err != nil {
			t.Fatal(err)
		}
		var l map[string]any
		if json.Unmarshal([]byte(load), &l) != nil || l["fun"] != "test.ping" || l["_stamp"] != formatStamp(at(0)) {
			t.Errorf("get_load: %s", load)
		}
		if n := db.count(t, "SELECT COUNT(*) FROM (SELECT id, full_ret FROM `salt_returns` WHERE `jid` = ?) x", jid); n != 2 {
			t.Errorf("get_jid: %d rows", n)
		}

		// What Salt's returners write, reactord reads.
		sjid := jidAt(at(5))
		var saltWrites []string
		switch db.name {
		case "postgres":
			saltWrites = []string{
				`INSERT INTO jids (jid, load) VALUES ($1, '{"fun": "cmd.run", "arg": ["uptime"]}') ON CONFLICT (jid) DO UPDATE SET load = EXCLUDED.load`,
				`INSERT INTO salt_returns (fun, jid, return, id, success, full_ret, alter_time) VALUES ('cmd.run', $1, '"up 3 days"', 'db1', 'true', '{"id": "db1", "return": "up 3 days"}', to_timestamp(1700000000))`,
				`INSERT INTO salt_events (tag, data, master_id, alter_time) VALUES ('salt/job/' || $1::text || '/new', '{"fun": "cmd.run"}', 'saltmaster', to_timestamp(1700000000))`,
			}
		default:
			saltWrites = []string{
				"INSERT INTO `jids` (`jid`, `load`) VALUES (?, '{\"fun\": \"cmd.run\", \"arg\": [\"uptime\"]}')",
				"INSERT INTO `salt_returns` (`fun`, `jid`, `return`, `id`, `success`, `full_ret` ) VALUES ('cmd.run', ?, '\"up 3 days\"', 'db1', '1', '{\"id\": \"db1\", \"return\": \"up 3 days\"}')",
				"INSERT INTO `salt_events` (`tag`, `data`, `master_id`) VALUES (CONCAT('salt/job/', ?, '/new'), '{\"fun\": \"cmd.run\"}', 'saltmaster')",
			}
			if db.name == "sqlite" {
				saltWrites[2] = "INSERT INTO `salt_events` (`tag`, `data`, `master_id`) VALUES ('salt/job/' || ? || '/new', '{\"fun\": \"cmd.run\"}', 'saltmaster')"
			}
		}
		for _, w := range saltWrites {
			if _, err := db.admin.Exec(w, sjid); err != nil {
				t.Fatalf("%s: %v", w, err)
			}
		}
		rets, err := lookupMap(s.Lookup(ctx, sjid))
		if err != nil || len(rets) != 1 || !jsonEqual(rets["db1"], raw(`"up 3 days"`)) {
			t.Errorf("lookup of Salt's return: %s, %v", rets, err)
		}
		evs, err := s.Events(ctx, time.Time{}, "salt/job/*/new", 0)
		if err != nil || len(evs) != 1 || evs[0].ID != "" || evs[0].MasterID != "saltmaster" || evs[0].Time.IsZero() {
			t.Errorf("Salt's event: %+v, %v", evs, err)
		}
		jobs, err := s.Jobs(ctx, time.Time{}, 1)
		if err != nil || len(jobs) != 1 || jobs[0].JID != sjid || !jobs[0].Time.Equal(at(5)) {
			t.Errorf("Salt's job: %+v, %v", jobs, err)
		}
	})
}

// TestSchemaMatchesSalt checks the columns and indexes of Salt's tables
// against the schemas in Salt's returners.
func TestSchemaMatchesSalt(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		db.open(t)
		switch db.name {
		case "mysql":
			cols := map[string]string{}
			rows, err := db.admin.Query("SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(EXTRA, '') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('jids', 'salt_returns', 'salt_events') ORDER BY TABLE_NAME, ORDINAL_POSITION")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var table, col, typ, null, extra string
				if err := rows.Scan(&table, &col, &typ, &null, &extra); err != nil {
					t.Fatal(err)
				}
				got = append(got, strings.TrimSpace(fmt.Sprintf("%s.%s %s %s %s", table, col, typ, null, strings.ToLower(extra))))
				cols[table+"."+col] = typ
			}
			rows.Close()
			want := []string{
				"jids.jid varchar(255) NO", "jids.load mediumtext NO",
				"salt_events.id bigint(20) NO auto_increment", "salt_events.tag varchar(255) NO", "salt_events.data mediumtext NO",
				"salt_events.alter_time timestamp YES", "salt_events.master_id varchar(255) NO",
				"salt_returns.fun varchar(50) NO", "salt_returns.jid varchar(255) NO", "salt_returns.return mediumtext NO",
				"salt_returns.id varchar(255) NO", "salt_returns.success varchar(10) NO", "salt_returns.full_ret mediumtext NO",
				"salt_returns.alter_time timestamp YES",
			}
			// MySQL 8 prints bigint without a width; MariaDB prints
			// ON UPDATE for a first TIMESTAMP column in some modes.
			for i := range got {
				got[i] = strings.Replace(got[i], "bigint ", "bigint(20) ", 1)
				got[i] = strings.TrimSuffix(got[i], " on update current_timestamp()")
				got[i] = strings.TrimSuffix(got[i], " on update current_timestamp")
			}
			if !slices.Equal(got, want) {
				t.Errorf("columns:\n got %q\nwant %q", got, want)
			}
			idx := db.indexes(t, "SELECT CONCAT(TABLE_NAME, '.', INDEX_NAME, ' ', IF(NON_UNIQUE = 0, 'unique ', ''), COLUMN_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('jids', 'salt_returns', 'salt_events')")
			wantIdx := []string{"jids.jid unique jid", "salt_events.PRIMARY unique id", "salt_events.tag tag", "salt_returns.fun fun", "salt_returns.id id", "salt_returns.jid jid"}
			if !slices.Equal(idx, wantIdx) {
				t.Errorf("indexes:\n got %q\nwant %q", idx, wantIdx)
			}
		case "postgres":
			var got []string
			rows, err := db.admin.Query("SELECT table_name || '.' || column_name || ' ' || data_type || COALESCE('(' || character_maximum_length || ')', '') || ' ' || is_nullable || COALESCE(' default ' || column_default, '') FROM information_schema.columns WHERE table_schema = current_schema() AND table_name IN ('jids', 'salt_returns', 'salt_events') ORDER BY table_name, ordinal_position")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var c string
				if err := rows.Scan(&c); err != nil {
					t.Fatal(err)
				}
				got = append(got, c)
			}
			rows.Close()
			want := []string{
				"jids.jid character varying(255) NO", "jids.load jsonb NO",
				"salt_events.id bigint NO default nextval('seq_salt_events_id'::regclass)", "salt_events.tag character varying(255) NO",
				"salt_events.data jsonb NO", "salt_events.alter_time timestamp with time zone YES default now()", "salt_events.master_id character varying(255) NO",
				"salt_returns.fun character varying(50) NO", "salt_returns.jid character varying(255) NO", "salt_returns.return jsonb NO",
				"salt_returns.id character varying(255) NO", "salt_returns.success character varying(10) NO", "salt_returns.full_ret jsonb NO",
				"salt_returns.alter_time timestamp with time zone YES default now()",
			}
			if !slices.Equal(got, want) {
				t.Errorf("columns:\n got %q\nwant %q", got, want)
			}
			idx := db.indexes(t, "SELECT tablename || ' ' || regexp_replace(indexdef, ' ON [^ ]+', ' ON') FROM pg_indexes WHERE schemaname = current_schema() AND tablename IN ('jids', 'salt_returns', 'salt_events')")
			wantIdx := []string{
				"jids CREATE INDEX idx_jids_jsonb ON USING gin (load) WITH (fastupdate='on')",
				"jids CREATE UNIQUE INDEX jids_pkey ON USING btree (jid)",
				"salt_events CREATE INDEX idx_salt_events_data ON USING gin (data) WITH (fastupdate='on')",
				"salt_events CREATE INDEX idx_salt_events_tag ON USING btree (tag)",
				"salt_events CREATE UNIQUE INDEX salt_events_id_key ON USING btree (id)",
				"salt_returns CREATE INDEX idx_salt_returns_full_ret ON USING gin (full_ret) WITH (fastupdate='on')",
				"salt_returns CREATE INDEX idx_salt_returns_fun ON USING btree (fun)",
				"salt_returns CREATE INDEX idx_salt_returns_id ON USING btree (id)",
				"salt_returns CREATE INDEX idx_salt_returns_jid ON USING btree (jid)",
				"salt_returns CREATE INDEX idx_salt_returns_return ON USING gin (return) WITH (fastupdate='on')",
			}
			if !slices.Equal(idx, wantIdx) {
				t.Errorf("indexes:\n got %q\nwant %q", idx, wantIdx)
			}
		case "sqlite":
			idx := db.indexes(t, "SELECT tbl_name || '.' || name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
			want := []string{
				"reactord_ledger.reactord_ledger_alter_time", "reactord_ledger.reactord_ledger_event_id", "reactord_ledger.reactord_ledger_jid",
				"salt_events.salt_events_tag", "salt_returns.salt_returns_fun", "salt_returns.salt_returns_id", "salt_returns.salt_returns_jid",
			}
			if !slices.Equal(idx, want) {
				t.Errorf("indexes:\n got %q\nwant %q", idx, want)
			}
		}
		// Opening again on existing tables is fine.
		db.open(t)
	})
}

// indexes returns the sorted strings a query on the admin connection reads.
func (db *testDB) indexes(t *testing.T, query string) []string {
	t.Helper()
	rows, err := db.admin.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestOddRecords writes records a database would refuse as they are.
func TestOddRecords(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		long := strings.Repeat("é", 300)
		write(t, s, store.Batch{
			Events: []store.Event{
				{ID: "not-json", Tag: "t/1", Data: raw(`not json`)},
				{ID: "empty", Tag: "t/2", Data: nil},
				{ID: "long-tag", Tag: "t/3/" + long, Data: raw(`{}`)},
				{ID: "bad-utf8", Tag: "t/4/\xff", Data: raw("{\"a\": \"\xfe\"}")},
				{ID: "nul", Tag: "t/5", Data: raw(`{"a": "x\u0000y", "b": "\\u0000"}`)},
				{ID: "emoji", Tag: "t/6/🚀", Data: raw(`{"a": "🚀"}`)},
			},
			Returns: []store.Return{{JID: "j", MinionID: "m\x00inion", Fun: strings.Repeat("f", 80), Return: raw(`{`)}},
			Ledger:  []store.LedgerEntry{{EventID: "e", Stage: store.StageFailed, Detail: strings.Repeat("x", 100000), File: long}},
		})
		evs, err := s.Events(ctx, time.Time{}, "t/*", 0)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]store.Event{}
		for _, e := range evs {
			byID[e.ID] = e
		}
		nul := `{"a": "x\u0000y", "b": "\\u0000"}`
		if db.name == "postgres" {
			nul = `{"a": "x\ufffdy", "b": "\\u0000"}`
		}
		for id, want := range map[string]string{
			"not-json": `"not json"`, "empty": `null`, "long-tag": `{}`, "bad-utf8": `{"a": "\ufffd"}`, "nul": nul, "emoji": `{"a": "🚀"}`,
		} {
			if !jsonEqual(byID[id].Data, raw(want)) {
				t.Errorf("%s: data %s, want %s", id, byID[id].Data, want)
			}
		}
		if tag := byID["long-tag"].Tag; tag != ("t/3/" + long)[:len("t/3/")+251*2] {
			t.Errorf("long tag read back as %q", tag)
		}
		if tag := byID["bad-utf8"].Tag; tag != "t/4/\uFFFD" {
			t.Errorf("tag = %q", tag)
		}
		if tag := byID["emoji"].Tag; tag != "t/6/🚀" {
			t.Errorf("tag = %q", tag)
		}
		rets, err := s.Lookup(ctx, "j")
		if err != nil || len(rets) != 1 {
			t.Errorf("lookup: %+v, %v", rets, err)
		}
		tr, err := s.Trace(ctx, "e")
		if err != nil || len(tr) != 1 || len(tr[0].Detail) != 100000 {
			t.Errorf("trace: %d entries, %v", len(tr), err)
		}
	})
}

// TestWriterOnBackend writes through a Writer in many batches and checks
// that every event reads back with its own id: the salt_events rows are
// mapped to the right reactord ids across multi-row statements.
func TestWriterOnBackend(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *testDB) {
		ctx := context.Background()
		s := db.open(t)
		w := store.NewWriter(s, store.WriterOptions{MaxBatch: 700, Interval: 10 * time.Millisecond})
		const n = 5000
		for i := range n {
			if !w.Add(benchEvent(i)) {
				t.Fatal("Add refused a record")
			}
			if i%1000 == 0 {
				w.Add(store.Job{JID: jidAt(at(i)), Load: raw(`{"fun": "test.ping"}`)})
				w.Add(store.LedgerEntry{EventID: fmt.Sprintf("ev-%d", i), Stage: store.StageMatched})
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.Written != n+10 || st.Pending != 0 || st.Dropped != 0 || st.Failures != 0 {
			t.Errorf("stats = %+v", st)
		}
		checkAllEvents(t, s, n, false)
	})
}

// checkAllEvents checks that events ev-0 .. ev-(n-1) were each stored (once,
// unless dups) with their own data.
func checkAllEvents(t *testing.T, s store.Store, n int, dups bool) {
	t.Helper()
	evs, err := s.Events(context.Background(), time.Time{}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n)
	extra := 0
	for _, e := range evs {
		var d struct {
			Seq int `json:"seq"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %s: %v", e.ID, err)
		}
		if want := fmt.Sprintf("ev-%d", d.Seq); e.ID != want || d.Seq >= n {
			t.Fatalf("event with seq %d read back with id %q", d.Seq, e.ID)
		}
		if seen[d.Seq]++; seen[d.Seq] > 1 {
			extra++
		}
	}
	missing := 0
	for _, c := range seen {
		if c == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d events lost", missing, n)
	}
	if extra > 0 {
		if !dups {
			t.Errorf("%d events stored twice", extra)
		} else {
			t.Logf("%d events stored twice (a commit whose acknowledgement was lost, retried)", extra)
		}
	}
}
