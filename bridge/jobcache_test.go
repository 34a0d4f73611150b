package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// jobCacheWriter lays out a master's job cache as Salt's local_cache
// returner does (3006 and 3007): jobs/<hash[:2]>/<hash[2:]> with "jid",
// ".load.p" and <minion>/return.p (and out.p), msgpack.
type jobCacheWriter struct {
	t   *testing.T
	dir string
}

func (w jobCacheWriter) jobDir(jid string) string {
	sum := sha256.Sum256([]byte(jid))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(w.dir, h[:2], h[2:])
}

func (w jobCacheWriter) pack(path string, v any) {
	w.t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// job writes a job's jid and load.
func (w jobCacheWriter) job(jid, fun string, arg []any) {
	w.t.Helper()
	d := w.jobDir(jid)
	w.pack(filepath.Join(d, jobCacheLoadFile), map[string]any{"fun": fun, "arg": arg, "tgt": "*", "tgt_type": "glob", "user": "root", "jid": jid})
	if err := os.WriteFile(filepath.Join(d, jobCacheJIDFile), []byte(jid), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// ret writes a minion's return to a job, stored at the time at.
func (w jobCacheWriter) ret(jid, minion string, ret map[string]any, out string, at time.Time) {
	w.t.Helper()
	d := filepath.Join(w.jobDir(jid), minion)
	w.pack(filepath.Join(d, jobCacheReturnFile), ret)
	if out != "" {
		w.pack(filepath.Join(d, jobCacheOutFile), out)
	}
	for _, p := range []string{filepath.Join(d, jobCacheReturnFile), d, w.jobDir(jid)} {
		if err := os.Chtimes(p, at, at); err != nil {
			w.t.Fatal(err)
		}
	}
}

// TestMasterBusRecoversReturnsFromJobCache: the master restarts; the job
// returns it stored while the bridge was disconnected are published, once,
// rebuilt as the master fires them and marked recovered; a return read
// from the bus before the loss is not published again, nor one stored
// long before, and a return.p that is no dict is counted and skipped.
func TestMasterBusRecoversReturnsFromJobCache(t *testing.T) {
	t.Parallel() // it mostly waits
	env := startNATS(t)
	dir := t.TempDir()
	cache := jobCacheWriter{t: t, dir: t.TempDir()}
	master := startFakeMaster(t, dir)
	log, sink := newLogger(t)
	b := runMasterBus(t, MasterConfig{SockDir: dir, JobCache: cache.dir, RecoverDelay: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: log},
		&jsPublisher{js: env.js, timeout: 5 * time.Second})
	st := b.Stats()

	const jidSeen, jidLost, jidOld, jidBad = "20261126150102123456", "20261126150103000001", "20261126120000000000", "20261126150104000002"
	c := master.accept()
	live, _ := msgpack.Marshal(map[string]any{"cmd": "_return", "id": "web1", "success": true, "return": true, "retcode": 0,
		"jid": jidSeen, "fun": "test.ping", "fun_args": []any{}, "_stamp": "2026-11-26T15:01:02.200000"})
	if _, err := c.Write(SaltFrame("salt/job/"+jidSeen+"/ret/web1", live)); err != nil {
		t.Fatal(err)
	}
	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != 1 {
			return errors.New(statsString(st))
		}
		return nil
	})
	master.stop()
	checkFor(t, waitLong, poll, func() error {
		if b.Connected() {
			return errors.New("Connected() while the master is down")
		}
		return nil
	})
	// While the bridge is blind the master stores returns.
	now := time.Now()
	cache.job(jidSeen, "test.ping", []any{})
	cache.ret(jidSeen, "web1", map[string]any{"return": true, "retcode": 0, "success": true}, "", now) // read live
	cache.ret(jidSeen, "web2", map[string]any{"return": true, "retcode": 0, "success": true}, "", now)
	cache.job(jidLost, "state.apply", []any{"nginx", map[string]any{"test": true, "__kwarg__": true}})
	cache.ret(jidLost, "web1", map[string]any{"return": map[string]any{"file_|-x_|-x_|-managed": map[string]any{"result": false}},
		"retcode": 2, "success": false}, "highstate", now.Add(10*time.Millisecond))
	cache.job(jidOld, "test.ping", []any{})
	cache.ret(jidOld, "web1", map[string]any{"return": true, "retcode": 0, "success": true}, "", now.Add(-time.Hour))
	cache.job(jidBad, "test.ping", []any{})
	cache.ret(jidBad, "web1", map[string]any{"retcode": 0}, "", now)

	master.listen()
	master.accept()
	checkFor(t, waitLong, poll, func() error {
		if st.Published.Load() != 3 || st.Recovered.Load() != 2 {
			return errors.New(statsString(st) + fmt.Sprintf(" recovered=%d", st.Recovered.Load()))
		}
		return nil
	})
	// Nothing more comes: the recovery said what it found (after offering
	// it all) and the outbox published or set aside all it was offered.
	checkFor(t, waitLong, poll, func() error {
		if len(sink.find(slog.LevelWarn, "recovered job returns fired while disconnected from the master's job cache", nil)) == 0 {
			return errors.New("the recovery has not ended")
		}
		if done := st.Published.Load() + st.Dropped.Load() + st.Unpublishable.Load(); done != st.Offered.Load() {
			return fmt.Errorf("%d of %d offered events handled by the outbox", done, st.Offered.Load())
		}
		return nil
	})
	msgs := env.messages(t)
	if len(msgs) != 3 {
		t.Fatalf("%d events in the stream, want 3", len(msgs))
	}
	var got []json.RawMessage
	for _, m := range msgs[1:] {
		var ev struct {
			Tag  string         `json:"tag"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(stampLayout, fmt.Sprint(ev.Data[stampKey])); err != nil {
			t.Errorf("%s: _stamp %v: %v", ev.Tag, ev.Data[stampKey], err)
		}
		delete(ev.Data, stampKey)
		b, _ := json.Marshal(ev)
		got = append(got, b)
	}
	slices.SortFunc(got, func(a, b json.RawMessage) int { return slices.Compare(a, b) })
	want := filepath.Join("testdata", "recovered_returns.golden.json")
	gotText, _ := json.MarshalIndent(got, "", "  ")
	gotText = append(gotText, '\n')
	if *update {
		if err := os.WriteFile(want, gotText, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if wantText, err := os.ReadFile(want); err != nil || string(wantText) != string(gotText) {
		t.Errorf("recovered returns differ from %s (go test -run %s -update writes it; err %v):\n%s", want, t.Name(), err, gotText)
	}

	if rec := sink.find(slog.LevelWarn, "recovered job returns fired while disconnected from the master's job cache", map[string]string{"returns": "2", "unreadable": "1"}); len(rec) != 1 {
		t.Errorf("recovery logged %d times with returns=2 unreadable=1: %v", len(rec), sink.all())
	}
}

// TestJobCacheUnreadable: a job cache the bridge cannot read is said at
// start; the bridge runs on.
func TestJobCacheUnreadable(t *testing.T) {
	env := startNATS(t)
	dir := t.TempDir()
	master := startFakeMaster(t, dir)
	log, sink := newLogger(t)
	b := runMasterBus(t, MasterConfig{SockDir: dir, JobCache: filepath.Join(dir, "no-such-cache"), Logger: log},
		&jsPublisher{js: env.js, timeout: 5 * time.Second})
	master.accept()
	checkFor(t, waitLong, poll, func() error {
		if !b.Connected() {
			return errors.New("not connected")
		}
		return nil
	})
	if got := sink.find(slog.LevelWarn, msgJobCacheUnreadable, nil); len(got) != 1 {
		t.Errorf("logged %d times: %v", len(got), sink.all())
	}
}
