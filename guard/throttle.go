package guard

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/retry"
)

// sharedRetry is how long a throttle counts locally after the shared
// state failed.
const sharedRetry = 5 * time.Second

// ruleKey names a throttle count or a debounce: the rule's ID
// (config.Rule.ID, stable across reloads and replicas) and the key.
type ruleKey struct {
	rule string
	key  string
}

// throttleDeadline is a throttle window that may have ended.
type throttleDeadline struct {
	key ruleKey
	per time.Duration
}

// throttles counts each rule's reactions per key within its period; with
// shared state the count is the replicas' together.
type throttles struct {
	sh   *shared
	wait time.Duration // how long to keep asking a failing shared state
	log  *slog.Logger

	mu        sync.Mutex
	counts    map[ruleKey][]time.Time
	deadlines deadlines[throttleDeadline]

	// down is when (unix ns) a throttle may ask the shared state again
	// after it failed: until then it counts in this replica, so an outage
	// does not hold every throttled event for a timeout.
	down atomic.Int64
	// failed limits the lines about the shared state failing.
	failed *ratelog.Every
}

// The throttle's log line when the shared count fails (docs/operating.md).
const (
	msgSharedCountFailed = "throttle: shared count unavailable; counting in this replica only"
	fixSharedCountFailed = "the shared state's NATS KV bucket is unreachable: check the NATS server"
)

func newThrottles(sh *shared, wait time.Duration, log *slog.Logger) *throttles {
	return &throttles{sh: sh, wait: wait, log: log, counts: map[ruleKey][]time.Time{}, failed: ratelog.New(time.Minute)}
}

// allow reports whether rule may react for key now, at most count times
// per period; a true answer counts.
func (t *throttles) allow(rule, key string, count int, per time.Duration, now time.Time) bool {
	k := ruleKey{rule, key}
	t.mu.Lock()
	live := liveTimes(t.counts[k], per, now)
	t.counts[k] = live
	if len(live) >= count {
		// Full here is full everywhere: the shared count only grows
		// faster than this copy of it.
		t.mu.Unlock()
		return false
	}
	if !t.sh.on() || time.Now().UnixNano() < t.down.Load() {
		t.counts[k] = append(live, now)
		t.deadlines.push(now.Add(per), throttleDeadline{k, per})
		t.mu.Unlock()
		return true
	}
	t.mu.Unlock()
	var times []time.Time
	ok, err := t.update(sharedKey(kindThrottle, rule, key), per, func(old []byte) ([]byte, bool) {
		var rec throttleRecord
		_ = json.Unmarshal(old, &rec)
		times = liveTimes(fromNanos(rec.Times), per, now)
		if len(times) >= count {
			return nil, false
		}
		times = append(times, now)
		b, _ := json.Marshal(throttleRecord{origin: origin{t.sh.origin}, Rule: rule, Key: key, Per: per, Times: toNanos(times)})
		return b, true
	})
	if err != nil {
		t.down.Store(time.Now().Add(sharedRetry).UnixNano())
		if n, ok := t.failed.Tick(); ok {
			t.log.Warn(msgSharedCountFailed, "key", key, "err", err, "failures_since_last_line", n, "fix", fixSharedCountFailed)
		}
		t.mu.Lock()
		times = append(liveTimes(t.counts[k], per, now), now)
		t.mu.Unlock()
		ok = true
	}
	t.mu.Lock()
	t.counts[k] = times
	t.deadlines.push(now.Add(per), throttleDeadline{k, per})
	t.mu.Unlock()
	return ok
}

// update is the shared state's Update, asked again (after 50ms, then up
// to 1s apart) while it fails, for up to wait: a NATS cluster that lost a
// node answers again once the bucket has a new leader. Each try gets 2s
// at most, so a request lost with a dead node's connection does not use
// up the wait.
func (t *throttles) update(key string, ttl time.Duration, fn func(old []byte) ([]byte, bool)) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.wait)
	defer cancel()
	var ok bool
	err := retry.Until(ctx, func() error {
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		defer tcancel()
		var err error
		ok, err = t.sh.st().Update(tctx, key, ttl, fn)
		return err
	}, nil)
	return ok && err == nil, err
}

// liveTimes returns the times within per of now, in place.
func liveTimes(times []time.Time, per time.Duration, now time.Time) []time.Time {
	return slices.DeleteFunc(times, func(t time.Time) bool { return now.Sub(t) >= per })
}

// expire forgets the throttle windows that ended by now.
func (t *throttles) expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.deadlines.due(now) {
		times := slices.DeleteFunc(t.counts[d.key], func(x time.Time) bool { return !x.Add(d.per).After(now) })
		if len(times) == 0 {
			delete(t.counts, d.key)
		} else {
			t.counts[d.key] = times
		}
	}
}

// apply brings a t record (the replicas' count) in.
func (t *throttles) apply(value []byte) {
	var rec throttleRecord
	if json.Unmarshal(value, &rec) != nil || rec.Per <= 0 {
		return
	}
	times := fromNanos(rec.Times)
	if len(times) == 0 {
		return
	}
	k := ruleKey{rec.Rule, rec.Key}
	t.mu.Lock()
	t.counts[k] = times
	t.deadlines.push(times[len(times)-1].Add(rec.Per), throttleDeadline{k, rec.Per})
	t.mu.Unlock()
}
