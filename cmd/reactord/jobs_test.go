package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/reactord/reactord/store"
	"github.com/reactord/reactord/store/sqlstore"
)

// jobsFixture is a set of jobs recorded from a real Salt master: their
// events and what salt-run jobs.lookup_jid and jobs.list_jobs printed for
// them (see its README.md).
const jobsFixture = "../../testdata/salt/3007.1/jobs"

// fixtureMasterID is the id of the master the fixture was recorded on.
const fixtureMasterID = "vm_master"

type recordedEvent struct {
	Tag  string          `json:"tag"`
	Data json.RawMessage `json:"data"`
}

func readRecordedEvents(t *testing.T) []recordedEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(jobsFixture, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []recordedEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e recordedEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events.jsonl: %v", err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// archive writes events into the store at url as the daemon's archive does
// (store.Classify, then the job, return and event records), one batch per
// event, in bus order.
func archive(t *testing.T, url string, evs []recordedEvent) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for i, e := range evs {
		jobs, rets, keep := store.Classify(e.Tag, e.Data, fixtureMasterID, false)
		b := store.Batch{Jobs: jobs, Returns: rets}
		if keep {
			b.Events = []store.Event{{ID: fmt.Sprintf("ev-%d", i), Tag: e.Tag, Data: e.Data, MasterID: fixtureMasterID, Time: now.Add(time.Duration(i) * time.Millisecond)}}
		}
		if err := st.Write(ctx, b); err != nil {
			t.Fatalf("write %s: %v", e.Tag, err)
		}
	}
}

// freshStoreURLs returns the URL of an empty store per backend: SQLite
// always; a new MySQL/MariaDB database when REACTORD_TEST_MYSQL is set (a
// go-sql-driver DSN such as root@tcp(127.0.0.1:3306)/test), a new
// PostgreSQL schema when REACTORD_TEST_POSTGRES is set
// (postgres://postgres@127.0.0.1:5432/test?sslmode=disable). They are
// dropped at the end of the test.
func freshStoreURLs(t *testing.T) map[string]string {
	t.Helper()
	name := fmt.Sprintf("reactord_jobs_%012x", rand.Uint64()>>16)
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "audit.db")}
	if env := os.Getenv("REACTORD_TEST_MYSQL"); env != "" {
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(env, "mysql://"))
		if err != nil {
			t.Fatalf("REACTORD_TEST_MYSQL: %v", err)
		}
		server := openAdmin(t, "mysql", cfg.FormatDSN())
		mustExec(t, server, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4")
		t.Cleanup(func() { mustExec(t, server, "DROP DATABASE IF EXISTS "+name) })
		cfg.DBName = name
		urls["mysql"] = "mysql://" + cfg.FormatDSN()
	}
	if env := os.Getenv("REACTORD_TEST_POSTGRES"); env != "" {
		cfg, err := pgx.ParseConfig(env)
		if err != nil {
			t.Fatalf("REACTORD_TEST_POSTGRES: %v", err)
		}
		server := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { server.Close() })
		mustExec(t, server, "CREATE SCHEMA "+name)
		t.Cleanup(func() { mustExec(t, server, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
		u, err := url.Parse(env)
		if err != nil {
			t.Fatalf("REACTORD_TEST_POSTGRES: %v", err)
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		urls["postgres"] = u.String()
	}
	return urls
}

func openAdmin(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// jsonKeys returns the keys of a JSON object in document order.
func jsonKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", doc)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// semantic decodes a JSON document for comparison as a value: object key
// order and spacing do not count, numbers compare by their text.
func semantic(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %q: %v", doc, err)
	}
	return v
}

var lookupFile = regexp.MustCompile(`^lookup_jid_(.+)_([0-9]{20})\.json$`)

// TestJobsMatchSalt feeds the events of jobs recorded from a real Salt
// 3007.1 master into each store backend and checks that jobs lookup --out
// json and jobs list --out json print the data salt-run jobs.lookup_jid and
// jobs.list_jobs printed for them: local jobs (test.ping to one and two
// minions, state.apply and cmd.run that succeed and fail), salt-call jobs,
// runner jobs (salt-run, salt-run --async, salt-api, a failed orchestrate)
// and wheel jobs (salt-api wheel and wheel_async), and the events Salt
// stores nothing for (the master's own wheel call events, a runner salt-run
// could not load), which must give {} and no listed job.
//
// Nothing in these outputs varies from run to run: times are those
// recorded (the jids, the _stamp of the events). What Salt leaves undefined
// is the order of keys: lookup_jid lists minions in the order the job
// cache's directory lists them (a hash order on ext4), list_jobs lists jobs
// in the order it walks the cache. So objects are compared as values, and
// reactord's own orders are checked instead: minions in the order they
// returned (ping_list_5 is one where that differs from Salt's order), jobs
// newest first.
func TestJobsMatchSalt(t *testing.T) {
	t.Parallel()
	evs := readRecordedEvents(t)
	entries, err := os.ReadDir(jobsFixture)
	if err != nil {
		t.Fatal(err)
	}
	type lookupCase struct{ kind, jid, file string }
	var lookups []lookupCase
	for _, e := range entries {
		if m := lookupFile.FindStringSubmatch(e.Name()); m != nil {
			lookups = append(lookups, lookupCase{m[1], m[2], e.Name()})
		}
	}
	if len(lookups) < 20 {
		t.Fatalf("only %d lookup_jid recordings in %s", len(lookups), jobsFixture)
	}
	// The order minions returned in, from the events.
	returned := map[string][]string{}
	fixtureJIDs := map[string]bool{}
	for _, e := range evs {
		parts := strings.Split(e.Tag, "/")
		if len(parts) >= 3 && parts[0] == "salt" {
			fixtureJIDs[parts[2]] = true
		}
		if len(parts) == 5 && parts[0] == "salt" && parts[1] == "job" && parts[3] == "ret" {
			returned[parts[2]] = append(returned[parts[2]], parts[4])
		}
	}
	saltList, err := os.ReadFile(filepath.Join(jobsFixture, "list_jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saltJobs map[string]json.RawMessage
	if err := json.Unmarshal(saltList, &saltJobs); err != nil {
		t.Fatal(err)
	}

	for backend, url := range freshStoreURLs(t) {
		t.Run(backend, func(t *testing.T) {
			archive(t, url, evs)
			for _, lc := range lookups {
				t.Run("lookup_"+lc.kind, func(t *testing.T) {
					want, err := os.ReadFile(filepath.Join(jobsFixture, lc.file))
					if err != nil {
						t.Fatal(err)
					}
					code, got, errOut := runCmd(t, "", "jobs", "lookup", lc.jid, "--out", "json", "--store", url)
					if code != exitOK {
						t.Fatalf("jobs lookup: exit %d: %s", code, errOut)
					}
					if !reflect.DeepEqual(semantic(t, []byte(got)), semantic(t, want)) {
						t.Errorf("jobs lookup %s --out json:\n%s\nsalt-run jobs.lookup_jid:\n%s", lc.jid, got, want)
					}
					// Local and salt-call jobs: minions in return order.
					if order, ok := returned[lc.jid]; ok {
						if keys := jsonKeys(t, []byte(got)); !slices.Equal(keys, order) {
							t.Errorf("minions in order %v, want the return order %v", keys, order)
						}
					}
				})
			}

			t.Run("list", func(t *testing.T) {
				code, got, errOut := runCmd(t, "", "jobs", "list", "--limit", "0", "--out", "json", "--store", url)
				if code != exitOK {
					t.Fatalf("jobs list: exit %d: %s", code, errOut)
				}
				var gotJobs map[string]json.RawMessage
				if err := json.Unmarshal([]byte(got), &gotJobs); err != nil {
					t.Fatalf("jobs list --out json: %v\n%s", err, got)
				}
				// Salt's cache also held jobs from before the recording.
				want := map[string]any{}
				for jid, v := range saltJobs {
					if fixtureJIDs[jid] {
						want[jid] = semantic(t, v)
					}
				}
				have := map[string]any{}
				for jid, v := range gotJobs {
					have[jid] = semantic(t, v)
				}
				for jid := range fixtureJIDs {
					if !reflect.DeepEqual(have[jid], want[jid]) {
						g, _ := json.Marshal(have[jid])
						w, _ := json.Marshal(want[jid])
						t.Errorf("job %s:\n got %s\nwant %s (salt-run jobs.list_jobs)", jid, g, w)
					}
				}
				if len(have) != len(want) {
					t.Errorf("jobs list has %d jobs, salt-run jobs.list_jobs %d of these", len(have), len(want))
				}
				keys := jsonKeys(t, []byte(got))
				if !slices.IsSortedFunc(keys, func(a, b string) int { return strings.Compare(b, a) }) {
					t.Errorf("jobs not newest first: %v", keys)
				}
			})

			t.Run("text", func(t *testing.T) {
				const jid = "20261123102337208425" // ping_list_5: web2 returned first
				code, got, errOut := runCmd(t, "", "jobs", "lookup", jid, "--store", url)
				if want := "web2:\n    true\nweb1:\n    true\n"; code != exitOK || got != want {
					t.Errorf("jobs lookup %s: exit %d %s\n got %q\nwant %q", jid, code, errOut, got, want)
				}
				code, got, errOut = runCmd(t, "", "jobs", "list", "--limit", "0", "--store", url)
				for _, want := range []string{
					"20261123102323846319:\n    Function: runner.test.arg\n    Arguments: []\n    Target: vm_master\n    Target-type: list\n    User: root\n    StartTime: 2026, Nov 23 10:23:23.846319\n",
					"20261123102304655343:\n    Function: test.ping\n    Arguments: []\n    Target: [\"web1\",\"web2\"]\n    Target-type: list\n",
					"20261123102315524391:\n    Function: test.echo\n    Arguments: [\"hello\"]\n    Target: web1\n    Target-type: glob\n",
				} {
					if code != exitOK || !strings.Contains(got, want) {
						t.Errorf("jobs list: exit %d %s: lacks %q:\n%s", code, errOut, want, got)
					}
				}
			})
		})
	}
}
