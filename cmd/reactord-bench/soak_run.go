package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/internal/ordercheck"
	"github.com/reactord/reactord/natsbus"
)

// soakLedger is every event published and every reaction seen, by
// minion: a few bytes an event, for runs of hours.
type soakLedger struct {
	mu        sync.Mutex
	minions   map[string]*minionLedger
	published int64
	acked     int64
	reactedN  int64
	unread    int64 // bridged events emitted while no bridge read
	storedOOO int64 // bridged events stored after a later one of their minion

	lat    []float64 // ms, since the last take
	allLat []float64 // ms, the whole run
}

// minionLedger is one minion's events, by number.
type minionLedger struct {
	sent      []int64 // UnixNano of the first publish
	acked     int     // events 0 .. acked-1 acknowledged (rounds are acknowledged in order)
	stored    []bool  // a bridged event seen in the event stream: acknowledged
	topStored int     // the largest number stored (bridged), -1 before any
	reacted   []bool
	seen      []int // numbers in reaction order
}

func newSoakLedger() *soakLedger { return &soakLedger{minions: map[string]*minionLedger{}} }

func (l *soakLedger) minion(id string) *minionLedger {
	m := l.minions[id]
	if m == nil {
		m = &minionLedger{topStored: -1}
		l.minions[id] = m
	}
	return m
}

// sent records event n of a minion as published at t (numbers come in
// order, from 0).
func (l *soakLedger) sent(id string, n int, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.minion(id)
	if n == len(m.sent) {
		m.sent = append(m.sent, t.UnixNano())
		m.reacted = append(m.reacted, false)
		m.stored = append(m.stored, false)
		l.published++
	}
}

// stored records bridged event n of a minion as seen in the event
// stream: acknowledged, whatever the events before it. A first delivery
// below the largest number stored so far was stored out of order.
func (l *soakLedger) stored(id string, n int, redelivered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.minion(id)
	if n < len(m.stored) && !m.stored[n] {
		m.stored[n] = true
		l.acked++
		if !redelivered && n < m.topStored {
			l.storedOOO++
		}
		m.topStored = max(m.topStored, n)
	}
}

// unreadOne counts a bridged event emitted while no bridge read.
func (l *soakLedger) unreadOne() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unread++
}

// ack records event n of a minion as acknowledged by the stream.
func (l *soakLedger) ack(id string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.minion(id); n >= m.acked {
		l.acked += int64(n + 1 - m.acked)
		m.acked = n + 1
	}
}

func (l *soakLedger) reacted(id string, n int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.minion(id)
	m.seen = append(m.seen, n)
	for len(m.reacted) <= n { // a number never published: counted as reacted
		m.reacted = append(m.reacted, false)
	}
	if m.reacted[n] {
		return
	}
	m.reacted[n] = true
	l.reactedN++
	if n < len(m.sent) {
		l.lat = append(l.lat, float64(at.UnixNano()-m.sent[n])/1e6)
	}
}

func (l *soakLedger) reactedCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reactedN
}

// lost returns how many acknowledged events no reaction was seen for,
// with a few of them.
func (l *soakLedger) lost() (int64, []string) {
	keys := slices.Sorted(maps.Keys(l.lostKeys()))
	return int64(len(keys)), keys[:min(len(keys), 10)]
}

// order counts the duplicates and the events out of order (ordercheck).
func (l *soakLedger) order() (dups, outOfOrder int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := make(map[string][]int, len(l.minions))
	for id, m := range l.minions {
		seen[id] = m.seen
	}
	_, dups, outOfOrder = ordercheck.Count(seen)
	return dups, outOfOrder
}

// gapOrder counts the duplicates and the events out of order where
// events may be missing (bridged ones): a number seen again is a
// duplicate, one seen after a larger number of its minion out of order.
func (l *soakLedger) gapOrder() (dups, outOfOrder int, some []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, m := range l.minions {
		top, seen := -1, map[int]bool{}
		for _, n := range m.seen {
			switch {
			case seen[n]:
				dups++
			case n < top:
				outOfOrder++
				if len(some) < 10 {
					some = append(some, fmt.Sprintf("%s/%d after %d", id, n, top))
				}
			}
			seen[n], top = true, max(top, n)
		}
	}
	slices.Sort(some)
	return dups, outOfOrder, some
}

// takeLatencies returns the latencies seen since the last call.
func (l *soakLedger) takeLatencies() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lat
	l.allLat = append(l.allLat, out...)
	l.lat = nil
	return out
}

// quantile is the q-quantile of sorted values (0 when none).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return math.Round(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]*10) / 10
}

// soakEvent builds event n of a minion: a minion start, a beacon, a job
// return (one in 50 of ~100 KB) or a key event, by r.
func soakEvent(r *rand.Rand, minion string, n int) (tag string, body []byte) {
	data := fmt.Sprintf(`"id": %q, "n": %d`, minion, n)
	switch x := r.IntN(100); {
	case x < 10:
		tag = "salt/minion/" + minion + "/start"
		data += `, "cmd": "_minion_event", "data": "Minion ` + minion + ` started"`
	case x < 50:
		tag = "salt/beacon/" + minion + "/diskusage/"
		data += `, "/": 42.5`
	case x < 85:
		jid := fmt.Sprintf("2026%016d", r.Int64N(1e16))
		tag = "salt/job/" + jid + "/ret/" + minion
		ret := `"ok"`
		if r.IntN(50) == 0 {
			ret = `"` + strings.Repeat("x", 100<<10) + `"`
		}
		data += fmt.Sprintf(`, "jid": %q, "fun": "state.apply", "retcode": 0, "success": true, "return": %s`, jid, ret)
	default:
		tag = "salt/key"
		data += `, "act": "accept", "result": true`
	}
	return tag, []byte(fmt.Sprintf(`{"tag": %q, "data": {%s}}`, tag, data))
}

// soakRounds paces a share of the soak's traffic: ten rounds a second,
// rate/10 events a round (the fraction carried to the next), each of the
// minions (prefix and a 4-digit number) in turn, at most once a round,
// its events numbered from 0.
type soakRounds struct {
	rate   float64
	prefix string
	next   []int // each minion's next number
	cursor int   // the minion whose turn is next
	owed   float64
}

// soakNumbered is one event of a round: its minion and number.
type soakNumbered struct {
	minion string
	n      int
}

func newSoakRounds(rate float64, minions int, prefix string) *soakRounds {
	return &soakRounds{rate: rate, prefix: prefix, next: make([]int, minions)}
}

// run calls round with each round's events until ctx ends.
func (p *soakRounds) run(ctx context.Context, round func([]soakNumbered)) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.owed += p.rate / 10
		k := min(int(p.owed), len(p.next))
		p.owed -= float64(k)
		evs := make([]soakNumbered, 0, k)
		for range k {
			evs = append(evs, soakNumbered{fmt.Sprintf("%s%04d", p.prefix, p.cursor), p.next[p.cursor]})
			p.next[p.cursor]++
			p.cursor = (p.cursor + 1) % len(p.next)
		}
		round(evs)
	}
}

// traffic publishes rounds of events ten times a second, each minion at
// most once a round; a round is retried whole (same message ids) until
// the stream acknowledged all of it, so each minion's events are stored
// in number order. One publisher serves the rounds, as one serves a
// bridge: a new one asks every node's version over a connection of its
// own (ServerVersion), and ten a second would fill the nodes' lists of
// closed connections. After a round that failed it is made anew.
func (s *soak) traffic(ctx context.Context, pc *natsbus.Conn) {
	r := rand.New(rand.NewPCG(s.cfg.seed, 1))
	bRate, bMinions := s.cfg.bridgedShare() // the bridge's share
	quiet := slog.New(slog.DiscardHandler)
	type ev struct {
		soakNumbered
		key, tag string
		body     []byte
	}
	var pub *natsbus.Publisher
	closePub := func() {
		if pub != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			pub.Close(cctx)
			cancel()
			pub = nil
		}
	}
	defer closePub()
	newSoakRounds(float64(s.cfg.rate)-bRate, s.cfg.minions-bMinions, "m").run(ctx, func(evs []soakNumbered) {
		round := make([]ev, 0, len(evs))
		for _, e := range evs {
			tag, body := soakEvent(r, e.minion, e.n)
			round = append(round, ev{e, e.minion + "/" + strconv.Itoa(e.n), tag, body})
		}
		now := time.Now()
		for _, e := range round {
			s.ledger.sent(e.minion, e.n, now)
		}
		for {
			var err error
			if pub == nil {
				pub, err = pc.NewPublisher(ctx, natsbus.PublisherOptions{MaxBatch: 64, Retries: 3, Logger: quiet})
			}
			if err == nil && publishRound(ctx, pub, len(round), func(i int) natsbus.Msg {
				e := round[i]
				return natsbus.Msg{Tag: e.tag, Body: e.body, Meta: natsbus.Meta{MsgID: e.key, Sent: now}}
			}) {
				for _, e := range round {
					s.ledger.ack(e.minion, e.n)
				}
				return
			}
			closePub()
			if ctx.Err() != nil {
				return // published, not acknowledged: not counted as lost
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// publishRound publishes n messages and reports whether the stream
// acknowledged every one within 30 s.
func publishRound(ctx context.Context, pub *natsbus.Publisher, n int, msg func(i int) natsbus.Msg) bool {
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Add(1)
		if err := pub.Publish(ctx, msg(i), func(err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		}); err != nil {
			wg.Done()
			failed.Add(1)
			break
		}
	}
	pub.Flush()
	acked := make(chan struct{})
	go func() { wg.Wait(); close(acked) }()
	select {
	case <-acked:
		return failed.Load() == 0
	case <-time.After(30 * time.Second):
		return false // Close fails what still waits
	}
}

// soakProcSample is one process's figures at a sample.
type soakProcSample struct {
	Name  string  `json:"name"`
	PID   int     `json:"pid"`
	RSSMB float64 `json:"rss_mb"`
	// AnonMB is the anonymous part of the RSS (RssAnon: the heap, stacks
	// and the runtime's own memory), without the pages of the binary and
	// other files a process maps as it runs new code paths: what a leak
	// grows.
	AnonMB     float64 `json:"anon_mb"`
	FDs        int     `json:"fds"`
	Goroutines int64   `json:"goroutines,omitempty"`
	HeapMB     float64 `json:"heap_mb,omitempty"`
	// LiveMB is the heap the process's last garbage collection found
	// reachable (go_gc_heap_live_bytes): what a leak raises, without the
	// garbage HeapMB holds until the next collection.
	LiveMB float64 `json:"heap_live_mb,omitempty"`
	// A replica's audit store: records written by this process, waiting,
	// and the bytes of its disk spool.
	StoreWritten int64 `json:"store_written,omitempty"`
	StorePending int64 `json:"store_pending,omitempty"`
	SpoolBytes   int64 `json:"spool_bytes,omitempty"`
}

// soakSample is one line of the timeline.
type soakSample struct {
	T            float64 `json:"t"`
	Published    int64   `json:"published"`
	Acknowledged int64   `json:"acknowledged"`
	Reacted      int64   `json:"reacted"`
	StreamMsgs   uint64  `json:"stream_msgs"`
	StreamMB     float64 `json:"stream_mb"`
	// AuditRows is the rows of every audit table, with a --store
	// database: the last count (auditRows), up to a minute old or more.
	AuditRows int64            `json:"audit_rows,omitempty"`
	P50ms     float64          `json:"p50_ms"`
	P99ms     float64          `json:"p99_ms"`
	Procs     []soakProcSample `json:"procs"`
}

// sampleUntil samples every interval until ctx ends.
func (s *soak) sampleUntil(ctx context.Context, start time.Time) {
	tick := time.NewTicker(s.cfg.interval)
	defer tick.Stop()
	for {
		s.sample(start)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sample reads every process, the stream and the latencies.
func (s *soak) sample(start time.Time) {
	smp := soakSample{T: math.Round(time.Since(start).Seconds()*10) / 10}
	s.ledger.mu.Lock()
	smp.Published, smp.Acknowledged, smp.Reacted = s.ledger.published, s.ledger.acked, s.ledger.reactedN
	s.ledger.mu.Unlock()
	lat := s.ledger.takeLatencies()
	slices.Sort(lat)
	smp.P50ms, smp.P99ms = quantile(lat, 0.5), quantile(lat, 0.99)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if st, err := s.js.Stream(ctx, "REACTORD_EVENTS"); err == nil {
		smp.StreamMsgs, smp.StreamMB = st.CachedInfo().State.Msgs, math.Round(float64(st.CachedInfo().State.Bytes)/(1<<20)*100)/100
	}
	if s.audit != nil {
		smp.AuditRows = s.audit.last()
	}
	cancel()
	for _, p := range s.procs() {
		c := p.cur()
		if c == nil || c.exited() != nil {
			continue
		}
		pid := c.cmd.Process.Pid
		ps := soakProcSample{Name: p.name, PID: pid, RSSMB: math.Round(float64(procRSS(pid))/(1<<20)*10) / 10,
			AnonMB: math.Round(float64(procAnon(pid))/(1<<20)*10) / 10}
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			ps.FDs = len(ents)
		}
		if p.http && c.httpAddr() != "" {
			if m, err := c.scrape(); err == nil {
				ps.Goroutines = int64(m.value("go_goroutines"))
				ps.HeapMB = math.Round(m.value("go_memstats_heap_alloc_bytes")/(1<<20)*10) / 10
				ps.LiveMB = math.Round(m.value("go_gc_heap_live_bytes")/(1<<20)*100) / 100
				ps.StoreWritten = int64(m.sum("reactord_store_records_written_total"))
				ps.StorePending = int64(m.value("reactord_store_pending_records"))
				ps.SpoolBytes = int64(m.value("reactord_store_spool_bytes"))
			}
		}
		smp.Procs = append(smp.Procs, ps)
	}
	s.record(smp)
	s.fmu.Lock()
	s.samples = append(s.samples, smp)
	s.fmu.Unlock()
}

// summary computes the last line from the ledger and the samples.
func (s *soak) summary(start time.Time) soakSummary {
	l := s.ledger
	lost, some := l.lost()
	dups, ooo := l.order()
	l.mu.Lock()
	sum := soakSummary{DurationS: math.Round(s.cfg.duration.Seconds()), Published: l.published, Acknowledged: l.acked,
		Reacted: l.reactedN, Duplicates: int64(dups), OutOfOrder: int64(ooo)}
	l.mu.Unlock()
	sum.Lost, sum.LostSample = lost, some
	s.fmu.Lock()
	defer s.fmu.Unlock()
	sum.Faults = map[string]int{}
	for k, v := range s.faults {
		sum.Faults[k] = v
	}
	sum.Seed, sum.Rate, sum.Minions, sum.Replicas, sum.Nodes, sum.Partitions = s.cfg.seed, s.cfg.rate, s.cfg.minions, s.cfg.replicas, s.cfg.nodes, s.cfg.partitions
	sum.Store = "sqlite"
	if s.cfg.store != "" {
		sum.Store, _, _ = strings.Cut(s.cfg.store, "://")
	}
	sum.NotDone = soakNotDone
	sum.StoreServer, sum.Overlap, sum.Bridged = s.cfg.storeServer, max(1, s.cfg.overlap), s.bridgedSummary()
	warm := s.cfg.warmup.Seconds()
	// Goroutines and descriptors are compared between the first sample
	// after the warm-up and the last (after the drain) with every process
	// up and answering its scrape (a node restarted has not yet).
	whole := func(sm *soakSample) bool {
		n := 0
		for _, p := range sm.Procs {
			if p.Goroutines > 0 {
				n++
			}
		}
		return n == len(s.procs())
	}
	var first, last *soakSample
	for i := range s.samples {
		if s.samples[i].T >= warm && first == nil && whole(&s.samples[i]) {
			first = &s.samples[i]
		}
		if whole(&s.samples[i]) {
			last = &s.samples[i]
		}
	}
	if first == nil {
		first = last
	}
	tot := func(sm *soakSample) (g, f int64) {
		if sm == nil {
			return 0, 0
		}
		for _, p := range sm.Procs {
			g += p.Goroutines
			f += int64(p.FDs)
		}
		return g, f
	}
	sum.GoroutinesIn, sum.FDsIn = tot(first)
	sum.GoroutinesOut, sum.FDsOut = tot(last)
	if n := len(s.samples); n > 0 {
		for _, p := range s.samples[n-1].Procs {
			sum.StorePendingEnd += p.StorePending
		}
	}
	g := growthOf(s.samples, warm)
	sum.RSSGrowthBy, sum.AnonGrowthBy, sum.FloorGrowthBy = g.RSSGrowthBy, g.AnonGrowthBy, g.FloorGrowthBy
	sum.AnonFloorGrowthBy = g.AnonFloorGrowthBy
	sum.LiveGrowthBy, sum.LiveFloorGrowthBy = g.LiveGrowthBy, g.LiveFloorGrowthBy
	sum.RSSGrowth, sum.RSSGrowthProc = largest(sum.RSSGrowthBy)
	sum.AnonGrowth, sum.AnonGrowthProc = largest(sum.AnonGrowthBy)
	sum.FloorGrowth, sum.FloorGrowthProc = largest(sum.FloorGrowthBy)
	l.mu.Lock()
	all := slices.Clone(l.allLat)
	l.mu.Unlock()
	slices.Sort(all)
	sum.P50ms, sum.P99ms = quantile(all, 0.5), quantile(all, 0.99)
	for _, sm := range s.samples {
		sum.StreamMsgsMax = max(sum.StreamMsgsMax, sm.StreamMsgs)
		sum.AuditRowsMax = max(sum.AuditRowsMax, sm.AuditRows)
		if sm.T >= warm {
			sum.AuditRowsWarm = max(sum.AuditRowsWarm, sm.AuditRows)
		}
	}
	return sum
}

// timelineGrowth is the growth figures of a run's processes after the
// warm-up: the summary's, and what --growth-of prints of an earlier run.
type timelineGrowth struct {
	WarmupS       float64            `json:"warmup_s"`
	RSSGrowthBy   map[string]float64 `json:"rss_growth_by_process"`
	AnonGrowthBy  map[string]float64 `json:"anon_growth_by_process"`
	FloorGrowthBy map[string]float64 `json:"rss_floor_growth_by_process"`
	// AnonFloorGrowthBy is the floor's slope of the RSS's anonymous part:
	// the floor without the binary's pages, which the kernel maps in and
	// drops as it likes.
	AnonFloorGrowthBy map[string]float64 `json:"anon_floor_growth_by_process"`
	// LiveGrowthBy and LiveFloorGrowthBy are the same two slopes of the
	// live heap (LiveMB), for the processes that export it.
	LiveGrowthBy      map[string]float64 `json:"heap_live_growth_by_process,omitempty"`
	LiveFloorGrowthBy map[string]float64 `json:"heap_live_floor_growth_by_process,omitempty"`
}

// growthOfTimeline reads the samples of a soak's timeline.jsonl (the
// faults' lines have no processes and are passed over) and computes the
// growth of its processes after warmup (0: a fifth of the run).
func growthOfTimeline(path string, warmup time.Duration) (timelineGrowth, error) {
	f, err := os.Open(path)
	if err != nil {
		return timelineGrowth{}, err
	}
	defer f.Close()
	var samples []soakSample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var sm soakSample
		if err := json.Unmarshal(sc.Bytes(), &sm); err != nil {
			return timelineGrowth{}, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(sm.Procs) > 0 {
			samples = append(samples, sm)
		}
	}
	if err := sc.Err(); err != nil {
		return timelineGrowth{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(samples) == 0 {
		return timelineGrowth{}, fmt.Errorf("%s holds no samples", path)
	}
	warm := warmup.Seconds()
	if warm == 0 {
		warm = samples[len(samples)-1].T / 5
	}
	return growthOf(samples, warm), nil
}

// growthOf computes the growth figures of samples after warm seconds.
func growthOf(samples []soakSample, warm float64) timelineGrowth {
	return timelineGrowth{WarmupS: warm, RSSGrowthBy: growthByProcess(samples, warm, rssOf),
		AnonGrowthBy: growthByProcess(samples, warm, anonOf), FloorGrowthBy: floorGrowthByProcess(samples, warm, rssOf),
		AnonFloorGrowthBy: floorGrowthByProcess(samples, warm, anonOf),
		LiveGrowthBy:      growthByProcess(samples, warm, liveOf), LiveFloorGrowthBy: floorGrowthByProcess(samples, warm, liveOf)}
}

// rssOf, anonOf and liveOf are the figures growthByProcess takes a slope
// of: a process's RSS, its anonymous part and its live heap (NaN where a
// sample has none: a process that exports none, a scrape that failed).
func rssOf(p soakProcSample) float64  { return p.RSSMB }
func anonOf(p soakProcSample) float64 { return p.AnonMB }
func liveOf(p soakProcSample) float64 {
	if p.LiveMB == 0 {
		return math.NaN()
	}
	return p.LiveMB
}

// largest is the largest value of by and its key ("" when by is empty).
func largest(by map[string]float64) (float64, string) {
	top, who := 0.0, ""
	for name, v := range by {
		if who == "" || v > top || v == top && name < who {
			top, who = v, name
		}
	}
	return top, who
}

// growthByProcess is the slope, in MB per hour, of value (RSS or its
// anonymous part) for each process over its life (longestLives).
func growthByProcess(samples []soakSample, warm float64, value func(soakProcSample) float64) map[string]float64 {
	out := map[string]float64{}
	for name, l := range longestLives(samples, warm, value) {
		out[name] = math.Round(slope(l.hours, l.mb)*100) / 100
	}
	return out
}

// floorWindow is the span over which floorGrowthByProcess takes a
// process's lowest figure: long enough to hold the ebb after a fault's
// burst (a replica holding the audit records of a store outage, which the
// Go runtime returns to the system within minutes).
const floorWindow = 600.0 // seconds

// floorGrowthByProcess is the slope, in MB per hour, of the lowest value
// in each floorWindow of each process's life (longestLives): the floor a
// leak raises, which the bursts a fault causes and the runtime gives back
// do not. A life of fewer than 3 windows is left out.
func floorGrowthByProcess(samples []soakSample, warm float64, value func(soakProcSample) float64) map[string]float64 {
	out := map[string]float64{}
	for name, l := range longestLives(samples, warm, value) {
		var xs, ys []float64
		for i := 0; i < len(l.hours); {
			end := l.hours[i] + floorWindow/3600
			lo, j := l.mb[i], i
			for ; j < len(l.hours) && l.hours[j] < end; j++ {
				lo = min(lo, l.mb[j])
			}
			if j < len(l.hours) || l.hours[j-1]-l.hours[i] >= 0.9*floorWindow/3600 { // whole windows only
				xs, ys = append(xs, l.hours[i]+floorWindow/7200), append(ys, lo)
			}
			i = j
		}
		if len(xs) >= 3 {
			out[name] = math.Round(slope(xs, ys)*100) / 100
		}
	}
	return out
}

// life is one incarnation's samples: hours since the run began, and MB.
type life struct{ hours, mb []float64 }

// longestLives returns, for each process, value over its samples after
// the warm-up, each incarnation (pid) apart, the one with the most
// samples; a process with fewer than 3 such samples is left out. A
// process restarted during the run warms up again (a NATS node refills
// its caches, a replica its lanes and pools): its samples count from
// warm seconds after its first. A NaN value is no sample.
func longestLives(samples []soakSample, warm float64, value func(soakProcSample) float64) map[string]life {
	type key struct {
		name string
		pid  int
	}
	born := map[key]float64{}
	start := 0.0
	if len(samples) > 0 {
		start = samples[0].T
	}
	lives := map[key]life{}
	for _, sm := range samples {
		for _, p := range sm.Procs {
			k := key{p.Name, p.PID}
			if _, ok := born[k]; !ok {
				born[k] = sm.T
			}
			if sm.T < warm || (born[k] > start && sm.T < born[k]+warm) || math.IsNaN(value(p)) {
				continue
			}
			l := lives[k]
			lives[k] = life{append(l.hours, sm.T/3600), append(l.mb, value(p))}
		}
	}
	best := map[string]key{}
	for k := range lives {
		if b, ok := best[k.name]; !ok || len(lives[k].hours) > len(lives[b].hours) {
			best[k.name] = k
		}
	}
	out := map[string]life{}
	for name, k := range best {
		if len(lives[k].hours) >= 3 {
			out[name] = lives[k]
		}
	}
	return out
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx, my = mx+x[i], my+y[i]
	}
	n := float64(len(x))
	mx, my = mx/n, my/n
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// lostKeys returns every acknowledged event no reaction was seen for,
// as minion/number.
func (l *soakLedger) lostKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for id, m := range l.minions {
		for i := range m.reacted {
			if (i < m.acked || i < len(m.stored) && m.stored[i]) && !m.reacted[i] {
				out[id+"/"+strconv.Itoa(i)] = true
			}
		}
	}
	return out
}

// recheckLost reads the reactions' stream again from its first message,
// with a consumer of its own, and counts the events the run counted lost
// whose reaction is there after all (the soak's reader missed it): a
// loss is reactord's only when the stream lacks the reaction too.
func (s *soak) recheckLost(ctx context.Context, start time.Time, sum *soakSummary, stderr io.Writer) {
	want := s.ledger.lostKeys()
	for k := range s.bledger.lostKeys() {
		want[k] = true
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := s.js.Stream(ctx, "SOAK_REACTIONS")
	if err != nil {
		fmt.Fprintf(stderr, "soak: reading the reactions again: %v\n", err)
		return
	}
	info, err := st.Info(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "soak: reading the reactions again: %v\n", err)
		return
	}
	found := map[string]uint64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && ctx.Err() == nil; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted, or aged out
		}
		minion, n, ok := soakReaction(m.Data)
		if !ok {
			continue
		}
		if k := minion + "/" + strconv.Itoa(n); want[k] && found[k] == 0 {
			found[k] = seq
		}
	}
	sum.LostInStream = int64(len(found))
	keys := slices.Sorted(maps.Keys(want))
	for _, k := range keys[:min(len(keys), 10)] {
		if at, ok := s.sentAt(k); ok {
			k = fmt.Sprintf("%s (published at %.3fs)", k, at.Sub(start).Seconds())
		}
		key := strings.Fields(k)[0]
		if seq := found[key]; seq > 0 {
			sum.LostDetail = append(sum.LostDetail, fmt.Sprintf("%s: in the reactions' stream at %d (the soak's reader missed it)", k, seq))
		} else {
			sum.LostDetail = append(sum.LostDetail, fmt.Sprintf("%s: not in the reactions' stream (%d..%d); audit store: %s", k, info.State.FirstSeq, info.State.LastSeq, s.auditTrail(ctx, key)))
		}
	}
}

// sentAt is when the soak first published event key (minion/number).
func (s *soak) sentAt(key string) (time.Time, bool) {
	id, ns, _ := strings.Cut(key, "/")
	n, err := strconv.Atoi(ns)
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range []*soakLedger{s.ledger, s.bledger} {
		l.mu.Lock()
		m := l.minions[id]
		ok := m != nil && n < len(m.sent) && m.sent[n] != 0
		var at time.Time
		if ok {
			at = time.Unix(0, m.sent[n])
		}
		l.mu.Unlock()
		if ok {
			return at, true
		}
	}
	return time.Time{}, false
}

// auditTrail says what the audit store holds of event key (minion/number):
// each copy archived, with its ledger's stages, or why it cannot tell.
func (s *soak) auditTrail(ctx context.Context, key string) string {
	if s.auditStore == nil {
		return "none in this run"
	}
	at, ok := s.sentAt(key)
	if !ok {
		return "never published"
	}
	id, ns, _ := strings.Cut(key, "/")
	evs, err := s.auditStore.Events(ctx, at.Add(-5*time.Second), "", 0)
	if err != nil {
		return "cannot read: " + err.Error()
	}
	var out []string
	for _, ev := range evs {
		var d struct {
			ID string `json:"id"`
			N  *int   `json:"n"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ID != id || d.N == nil || strconv.Itoa(*d.N) != ns {
			continue
		}
		stages := []string{}
		if ev.ID != "" {
			entries, err := s.auditStore.Trace(ctx, ev.ID)
			if err != nil {
				stages = append(stages, "trace: "+err.Error())
			}
			for _, e := range entries {
				stages = append(stages, e.Stage+" "+e.ReactionID+" "+e.Detail)
			}
		}
		out = append(out, fmt.Sprintf("event %s %s at %s: %v", ev.ID, ev.Tag, ev.Time.Format("15:04:05.000"), stages))
	}
	if len(out) == 0 {
		return "not archived"
	}
	return strings.Join(out, "; ")
}

// heapProfiles saves the heap profile of every process that serves Go's
// profiles (the replicas, the bridge, the NATS nodes), after a garbage collection, as
// DIR/heap/NAME-PID-WHEN.pb.gz: the profiles at the warm-up's end and at
// the run's end of one life tell what memory grew (go tool pprof
// -diff_base WARM END). A process that does not answer is reported and
// passed over.
func (s *soak) heapProfiles(when string, stderr io.Writer) {
	dir := filepath.Join(s.cfg.out, "heap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "soak: heap profiles: %v\n", err)
		return
	}
	saved := 0
	for _, p := range s.procs() {
		c := p.cur()
		if !p.http || c == nil || c.exited() != nil || c.httpAddr() == "" {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pb.gz", p.name, c.cmd.Process.Pid, when))
		if err := c.saveHeapProfile(path); err != nil {
			fmt.Fprintf(stderr, "soak: %s's heap profile (%s): %v\n", p.name, when, err)
			continue
		}
		saved++
	}
	fmt.Fprintf(stderr, "soak: %d heap profiles (%s) in %s\n", saved, when, dir)
}
