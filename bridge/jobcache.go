package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// DefaultJobCache is the job cache of a master with Salt's default
// cachedir (/var/cache/salt/master) and master_job_cache local_cache.
const DefaultJobCache = "/var/cache/salt/master/jobs"

// The files Salt's local_cache returner keeps for one job
// (salt/returners/local_cache.py, 3006 and 3007): a directory per job,
// jobs/<2 hex digits>/<62 hex digits> (the job id's hash), holding "jid"
// (the job id), ".load.p" (the published job: fun, arg, tgt, user) and a
// directory per minion that returned, holding "return.p" (return, retcode,
// success) and, when the minion named an outputter, "out.p". Every .p file
// is msgpack. The master fires salt/job/<jid>/ret/<id> on its bus and then
// writes these files (salt.utils.job.store_job).
const (
	jobCacheJIDFile    = "jid"
	jobCacheLoadFile   = ".load.p"
	jobCacheReturnFile = "return.p"
	jobCacheOutFile    = "out.p"
)

// RecoveredKey is the key a job return recovered from the master's job
// cache carries in its data, with the value "job_cache": the master fired
// it while the bridge was not connected, and the bridge rebuilt it from
// what the master stored (see MasterConfig.JobCache).
const RecoveredKey = "_recovered"

// jidPattern is a Salt job id: its start time, %Y%m%d%H%M%S%f, and with
// the master's unique_jid an underscore and its process id.
var jidPattern = regexp.MustCompile(`^[0-9]{20}(_[0-9]+)?$`)

// seenReturns remembers the job returns (job id and minion) the bridge
// read from the bus in the last seenReturnsKeep, so that a recovery from
// the job cache skips them. It holds at most seenReturnsMax.
type seenReturns struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string // keys in the order they were added (oldest first)
}

const (
	seenReturnsKeep = 10 * time.Minute
	seenReturnsMax  = 200_000
)

// returnKey returns "jid/minion" for a job return's tag
// (salt/job/<jid>/ret/<minion>), or "" for any other tag.
func returnKey(tag string) string {
	rest, ok := strings.CutPrefix(tag, "salt/job/")
	if !ok {
		return ""
	}
	jid, id, ok := strings.Cut(rest, "/ret/")
	if !ok || jid == "" || id == "" || strings.Contains(jid, "/") {
		return ""
	}
	return jid + "/" + id
}

// add records a return read from the bus at now.
func (s *seenReturns) add(key string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = make(map[string]time.Time)
	}
	if _, ok := s.at[key]; !ok {
		s.order = append(s.order, key)
	}
	s.at[key] = now
	s.prune(now)
}

// prune forgets the oldest returns past the age or the size bound.
func (s *seenReturns) prune(now time.Time) {
	n := 0
	for n < len(s.order) && (len(s.order)-n > seenReturnsMax || now.Sub(s.at[s.order[n]]) > seenReturnsKeep) {
		delete(s.at, s.order[n])
		n++
	}
	if n > 0 {
		s.order = append(s.order[:0], s.order[n:]...)
	}
}

// has reports whether the return was read from the bus.
func (s *seenReturns) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.at[key]
	return ok
}

// recoveredReturn is one job return rebuilt from the job cache.
type recoveredReturn struct {
	tag  string
	data []byte // the event's data, JSON
	at   time.Time
}

// jobCacheReturns walks the job cache dir and rebuilds the returns the
// master stored between from and to (by the time return.p was written),
// leaving out those skip reports. Jobs whose directory has not changed
// since from are not opened. A job or return it cannot read is counted in
// unreadable and left out.
func jobCacheReturns(ctx context.Context, dir string, from, to time.Time, skip func(key string) bool) (found []recoveredReturn, unreadable int, err error) {
	buckets, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the master's job cache: %w", err)
	}
	for _, bucket := range buckets {
		if !bucket.IsDir() || len(bucket.Name()) != 2 {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(dir, bucket.Name()))
		if err != nil {
			unreadable++
			continue
		}
		for _, job := range jobs {
			if ctx.Err() != nil {
				return found, unreadable, ctx.Err()
			}
			jobDir := filepath.Join(dir, bucket.Name(), job.Name())
			info, err := job.Info()
			if err != nil || !info.IsDir() || info.ModTime().Before(from) {
				// A minion's directory appearing changes the job's
				// directory: one untouched since from holds no return
				// of the window.
				continue
			}
			got, bad := jobReturns(jobDir, from, to, skip)
			found = append(found, got...)
			unreadable += bad
		}
	}
	return found, unreadable, nil
}

// jobReturns rebuilds the returns of one job directory written between
// from and to.
func jobReturns(jobDir string, from, to time.Time, skip func(string) bool) (found []recoveredReturn, unreadable int) {
	jidBytes, err := os.ReadFile(filepath.Join(jobDir, jobCacheJIDFile))
	if err != nil {
		return nil, 1
	}
	jid := strings.TrimSpace(string(jidBytes))
	if !jidPattern.MatchString(jid) {
		return nil, 1
	}
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		return nil, 1
	}
	var load map[string]json.RawMessage // read once, for the first return
	loadRead := false
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		minion := e.Name()
		if skip(jid + "/" + minion) {
			continue
		}
		retPath := filepath.Join(jobDir, minion, jobCacheReturnFile)
		info, err := os.Stat(retPath)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being written (atomic rename) or not a return
		}
		if err != nil {
			unreadable++
			continue
		}
		if info.ModTime().Before(from) || info.ModTime().After(to) {
			continue
		}
		if !loadRead {
			loadRead = true
			load, _ = readPacked(filepath.Join(jobDir, jobCacheLoadFile)) // a job without its load still has its returns
		}
		data, err := returnData(jid, minion, retPath, filepath.Join(jobDir, minion, jobCacheOutFile), load, info.ModTime())
		if err != nil {
			unreadable++
			continue
		}
		found = append(found, recoveredReturn{tag: "salt/job/" + jid + "/ret/" + minion, data: data, at: info.ModTime()})
	}
	return found, unreadable
}

// returnData builds a return event's data as the master fires it
// (cmd, id, success, return, retcode, jid, fun, fun_args, out), from the
// minion's return.p, its out.p and the job's load, with "_stamp" the time
// return.p was written and RecoveredKey "job_cache".
func returnData(jid, minion, retPath, outPath string, load map[string]json.RawMessage, written time.Time) ([]byte, error) {
	ret, err := readPacked(retPath)
	if err != nil {
		return nil, err
	}
	if _, ok := ret["return"]; !ok {
		return nil, fmt.Errorf("%s: no return in it", retPath)
	}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	fields := []struct {
		key string
		val json.RawMessage
	}{
		{"cmd", str("_return")},
		{"id", str(minion)},
		{"success", ret["success"]},
		{"return", ret["return"]},
		{"retcode", ret["retcode"]},
		{"jid", str(jid)},
		{"fun", load["fun"]},
		{"fun_args", load["arg"]},
	}
	if b, err := os.ReadFile(outPath); err == nil {
		if out, err := appendValue(nil, msgpack.NewDecoder(bytes.NewReader(b)), 0); err == nil {
			fields = append(fields, struct {
				key string
				val json.RawMessage
			}{"out", out})
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range fields {
		if f.val == nil {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(str(f.key))
		b.WriteByte(':')
		b.Write(f.val)
	}
	fmt.Fprintf(&b, `,%q:%q,%q:"job_cache"}`, stampKey, written.UTC().Format(stampLayout), RecoveredKey)
	return b.Bytes(), nil
}

// readPacked reads a msgpack dict file of the job cache as its keys'
// values in JSON.
func readPacked(path string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := appendValue(nil, msgpack.NewDecoder(bytes.NewReader(b)), 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("%s: not a dict: %w", path, err)
	}
	return m, nil
}
