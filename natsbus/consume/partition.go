package consume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/kv"
)

// Per-key order across replicas.
//
// The publishers put a hash of each event's ordering key (its minion, else
// its tag) into its subject (natsbus.KeyedSubject), and the stream stores
// the event under its partition's subject (natsbus.PartitionTransform:
// the server's own partition() mapping of the hash). The stream is read
// through Partitions durable consumers, each filtered to its partition's
// subject, so that each receives only its own events, plus one consumer
// for the events published without a key (core NATS publishers, older
// bridges, other tools), whose subjects stay under the event prefix: the
// plain lane, kept whatever the number of partitions. Each of these
// consumers is owned by one replica at a time, through a lease in a key-value bucket
// (a key with a time to live, renewed and taken over by compare-and-set);
// the consumer's pinned-client priority group keeps a second puller out
// even if two replicas believed they held the lease. The owner hands the
// partition's events to the handler in stream order, and acknowledges
// (AckAll) the longest handled prefix. A new owner resets the consumer to
// its acknowledgement floor before pulling, so the events its predecessor
// left unacknowledged come again, in order, before any later one; the
// only events handled twice are those in flight at a death or a hand-over.
//
// Changing the number of partitions (every replica stopped, then started
// with the new number) drains the old number's partitions first: their
// consumers are leased, consumed and balanced as the others, and deleted
// once empty; the new partitions start when none is left, so that the
// events of one minion are still handled in stream order.

// requestTimeout bounds one JetStream API request of a partition's
// session start.
const requestTimeout = 2 * time.Second

// PartitionGroup is the priority group the partition consumers are pulled
// with.
const PartitionGroup = "reactord"

// PartitionOptions configure NewPartitioned.
type PartitionOptions struct {
	natsbus.StreamOptions
	// Partitions is the number of partitions (1 to 1024). Every replica
	// must use the same number: NewPartitioned refuses to start
	// while a replica with another number is alive.
	Partitions int
	// Replica names this process among the replicas (default
	// host-pid-time); it must be unique.
	Replica string
	// LeaseTTL is how long a partition stays with a replica that stopped
	// renewing its lease (a replica that died): default 4s, whole
	// seconds, at least 2s. The owner renews every quarter of it and
	// stops consuming a partition whose lease it could not renew for two
	// thirds of it.
	LeaseTTL time.Duration
	// Bucket is the key-value bucket of the leases and the replicas'
	// presence (default REACTORD_PARTITIONS).
	Bucket string
	// OnChange, when set, is called on every change of ownership:
	// "acquired", "released" (handed over), "lost" (the lease could not
	// be renewed or another replica holds it), "resync" (a delivery
	// was missed or an event refused: the partition was reset to its
	// acknowledgement floor) and "drained" (a former number's partition
	// emptied and deleted), with the unit: a partition 0 to N-1, the
	// plain lane N, a former number's partition from 10000.
	OnChange func(change string, partition int)
}

func (o *PartitionOptions) defaults() {
	o.StreamOptions.Defaults()
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 4 * time.Second
	}
	o.LeaseTTL = max(o.LeaseTTL.Round(time.Second), 2*time.Second)
	if o.Bucket == "" {
		o.Bucket = "REACTORD_PARTITIONS"
	}
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	o.Replica = keySafe(o.Replica)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// keySafe keeps the bytes a key-value key may hold and replaces the others
// with '_'.
func keySafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '=') {
			b[i] = '_'
		}
	}
	return string(b)
}

// unit is one consumer a replica may hold: a partition of this number,
// the plain lane, or a partition of another number being drained.
type unit struct {
	i      int    // its index: partitions 0 to N-1, the plain lane N, drained ones above
	name   string // its durable consumer
	lease  string // its lease key in the bucket
	filter string // its subject filter
	what   string // for logs and descriptions
	old    bool   // another number's partition: drained, then deleted
	plain  bool   // the plain lane: taken by whoever finds it free, beside the balanced partitions
	set    string // an old unit's set (Durable-M)
	floor  uint64 // an old unit's set's acknowledgement floor when found: the oldest set drains first
}

// oldBase numbers the units of another number of partitions being drained.
const oldBase = 10000

// Partitioned consumes the event stream by partitions (see
// NewPartitioned). Stop ends the pulling; Release, once the handler's
// events are settled, hands the partitions over.
type Partitioned struct {
	c       *natsbus.Conn
	o       PartitionOptions
	handler func(*natsbus.Message)
	log     *slog.Logger
	state   *kv.State
	prefix  string // consumer names: <Durable>-<N>-

	mu       sync.Mutex
	own      []*unit       // this number's partitions and the plain lane
	old      map[int]*unit // another number's partitions left to drain
	nextOld  int           // numbers the old units
	byLease  map[string]int
	owned    map[int]*partRun
	leases   map[int]string // from the bucket's watch: unit → owner
	members  map[string]int // live replicas → their number of partitions
	stopping bool
	release  *partRun // a hand-over under way
	warned   map[string]bool
	// readAt is when the leases were last read from the bucket; unowned
	// holds, for each partition without an owner at the last reading,
	// since when it has had none (see Health).
	readAt  time.Time
	unowned map[int]time.Time

	kick     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	relOnce  sync.Once
	cancel   context.CancelFunc

	resyncs, ignored, received atomic.Int64
}

// ErrPartitionsDiffer reports a replica started with another number of
// partitions than the running ones.
var ErrPartitionsDiffer = errors.New("replicas disagree on the number of partitions")

// NewPartitioned consumes the event stream so that the events of one key
// (an event's minion, else its tag, hashed into its subject by the
// publisher) are handed to handler one at a time, in stream order,
// whichever replica handles them: the stream is read through o.Partitions
// consumers and the plain lane's, each owned by one replica at a time and
// taken over, from its acknowledgement floor, when its owner dies or
// hands it over (the replicas balance the partitions among themselves).
// handler must Ack or Nak every message; a Nak makes the partition start
// again from its acknowledgement floor. Ownership changes are logged.
func NewPartitioned(ctx context.Context, c *natsbus.Conn, o PartitionOptions, handler func(*natsbus.Message)) (*Partitioned, error) {
	o.defaults()
	if o.Partitions < 1 || o.Partitions > 1024 {
		return nil, fmt.Errorf("partitions %d: want 1 to 1024", o.Partitions)
	}
	so := o.StreamOptions
	so.Partitions = o.Partitions // interest retention, and the subject transform to this number
	if err := retryTransient(ctx, func() error { return c.EnsureStream(ctx, so) }); err != nil {
		return nil, err
	}
	st, err := kv.Open(ctx, c, kv.StateOptions{Bucket: o.Bucket, Replicas: o.Replicas, Logger: o.Logger,
		Description: "reactord --partitions: which replica owns each partition of the event stream, and the live replicas"})
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	run, cancel := context.WithCancel(context.Background())
	p := &Partitioned{c: c, o: o, handler: handler, log: o.Logger, state: st, prefix: o.Durable + "-" + strconv.Itoa(o.Partitions) + "-",
		old: map[int]*unit{}, byLease: map[string]int{},
		owned: map[int]*partRun{}, leases: map[int]string{}, members: map[string]int{}, warned: map[string]bool{},
		readAt: time.Now(), unowned: map[int]time.Time{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	for i := range o.Partitions {
		p.addUnit(&unit{i: i, name: p.prefix + strconv.Itoa(i), lease: "lease." + strconv.Itoa(o.Partitions) + "." + strconv.Itoa(i),
			filter: natsbus.PartitionFilter(c.Prefix(), o.Partitions, i), what: fmt.Sprintf("partition %d of %d of the events", i, o.Partitions)})
	}
	p.addUnit(&unit{i: o.Partitions, name: o.Durable + plainSuffix, lease: "lease.plain", filter: c.Prefix() + ">", plain: true,
		what: "the events published without a partition key"})
	if err := st.Watch(ctx, run, p.apply); err != nil {
		cancel()
		return nil, fmt.Errorf("partitions: %w", err)
	}
	p.mu.Lock()
	for id, n := range p.members {
		if n != o.Partitions && id != o.Replica {
			p.mu.Unlock()
			cancel()
			return nil, fmt.Errorf("partitions: replica %s runs with %d partitions, this one with %d: %w (stop every replica to change the number)",
				id, n, o.Partitions, ErrPartitionsDiffer)
		}
	}
	p.mu.Unlock()
	if err := p.ensureConsumers(ctx); err != nil {
		cancel()
		return nil, err
	}
	// The consumers exist: the stream may store keyed events under this
	// number's subjects now.
	so.Logger = o.Logger
	if err := retryTransient(ctx, func() error { return c.SetPartitionTransform(ctx, so) }); err != nil {
		cancel()
		return nil, fmt.Errorf("partitions: %w", err)
	}
	p.heartbeat()
	p.log.Info("partitioned consumption: events of one minion are handled in order by one replica at a time",
		"partitions", o.Partitions, "replica", o.Replica, "lease_ttl", o.LeaseTTL.String(), "bucket", o.Bucket)
	go p.manage()
	return p, nil
}

// plainSuffix names the plain lane's consumer after the durable name.
const plainSuffix = "-plain"

// addUnit makes u one of the units (p.mu held, or before manage runs).
func (p *Partitioned) addUnit(u *unit) {
	if u.old {
		p.old[u.i] = u
	} else {
		p.own = append(p.own, u)
	}
	p.byLease[u.lease] = u.i
}

// unitLocked returns unit i, nil once it is gone (a drained one); p.mu held.
func (p *Partitioned) unitLocked(i int) *unit {
	if i >= oldBase {
		return p.old[i]
	}
	if i < len(p.own) {
		return p.own[i]
	}
	return nil
}

// active lists the units replicas hold now: while another number's
// partitions are left to drain, those of the set with the oldest events
// (the lowest acknowledgement floor), else this number's (p.mu held).
func (p *Partitioned) active() []*unit {
	if len(p.old) == 0 {
		return p.own
	}
	var first *unit
	for _, u := range p.old {
		if first == nil || u.floor < first.floor || u.floor == first.floor && u.set < first.set {
			first = u
		}
	}
	out := make([]*unit, 0, len(p.old))
	for _, u := range p.old {
		if u.set == first.set {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unit) int { return cmp.Compare(a.i, b.i) })
	return out
}

// consumerSet is a set of the reactor's consumers on the event stream:
// the shared durable consumer, or the consumers of one number of
// partitions.
type consumerSet struct {
	names    []string
	floor    uint64            // the lowest acknowledgement floor (stream sequence)
	last     time.Time         // the latest delivery or creation of any of them
	waiting  int               // pull requests waiting on them (someone consumes)
	filtered bool              // filtered to their subjects (partitions by subject); an earlier version's read the whole stream
	backlog  map[string]uint64 // per consumer: events not delivered or not acknowledged
}

// consumerSets lists the reactor's consumers on the event stream by set:
// the shared durable consumer under its name (Durable), the partition
// consumers under Durable-N.
func consumerSets(c *natsbus.Conn, ctx context.Context, stream, durable string) (map[string]*consumerSet, error) {
	s, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	sets := map[string]*consumerSet{}
	l := s.ListConsumers(ctx)
	for info := range l.Info() {
		name, set := info.Name, ""
		switch {
		case name == durable, name == durable+plainSuffix:
			set = name
		case strings.HasPrefix(name, durable+"-"):
			n, i, ok := strings.Cut(strings.TrimPrefix(name, durable+"-"), "-")
			if _, err := strconv.Atoi(i); !ok || err != nil {
				continue
			}
			if _, err := strconv.Atoi(n); err != nil {
				continue
			}
			set = durable + "-" + n
		default:
			continue
		}
		g := sets[set]
		if g == nil {
			g = &consumerSet{floor: info.AckFloor.Stream, filtered: true, backlog: map[string]uint64{}}
			sets[set] = g
		}
		g.names = append(g.names, name)
		g.filtered = g.filtered && (info.Config.FilterSubject != "" || len(info.Config.FilterSubjects) > 0)
		g.backlog[name] = info.NumPending + uint64(info.NumAckPending)
		g.floor = min(g.floor, info.AckFloor.Stream)
		if info.Delivered.Last != nil && info.Delivered.Last.After(g.last) {
			g.last = *info.Delivered.Last
		}
		if info.Created.After(g.last) {
			g.last = info.Created // a set just created by another replica is not stale
		}
		g.waiting += info.NumWaiting
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return sets, nil
}

// ensureConsumers puts this number of partitions' consumers and the plain
// lane's in place, removes the reactor's other consumers on the stream,
// and makes the partitions of another number that still hold events units
// to drain.
//
// New consumers start where the reactor left off: after the lowest
// acknowledgement floor of the set of consumers that delivered an event
// last (the shared durable consumer, or another number of partitions), so
// that switching to partitions, or to another number of them, neither runs
// the stream's history again nor skips what was not handled. This
// number's consumers left from an earlier run are stale when another set
// delivered since, and so are consumers that read the whole stream (made
// by a version before partitions by subject): they are created again from
// that set's floor. The plain lane's consumer is kept across numbers of
// partitions (its events are not partitioned); the shared consumer's
// delivering since makes it stale too.
//
// The other sets are then deleted once empty: with interest retention the
// stream keeps an event until every consumer acknowledged it, so a set
// nobody reads would hold every event until MaxAge. Replicas with another
// number of partitions were refused before; the shared consumer is kept
// (and reported) while a daemon still pulls from it.
func (p *Partitioned) ensureConsumers(ctx context.Context) error {
	own := strings.TrimSuffix(p.prefix, "-")
	plainName := p.o.Durable + plainSuffix
	var sets map[string]*consumerSet
	err := retryTransient(ctx, func() error {
		var err error
		sets, err = consumerSets(p.c, ctx, p.o.Stream, p.o.Durable)
		return err
	})
	if err != nil {
		return fmt.Errorf("listing the consumers of stream %s: %w", p.o.Stream, err)
	}
	plain := sets[plainName]
	delete(sets, plainName)
	var latest *consumerSet
	latestName := ""
	for name, g := range sets {
		if name != own && (latest == nil || g.last.After(latest.last)) {
			latest, latestName = g, name
		}
	}
	// Consumers that read every subject (the shared consumer, and an
	// earlier version's partition consumers) handled everything they
	// delivered: when they delivered last, a set kept from before them
	// would run their events again. A filtered set's events are its own
	// subjects' only: another number's partitions being drained do not
	// make this number's stale.
	coversAll := latest != nil && (latestName == p.o.Durable || !latest.filtered)
	mine := sets[own]
	usedLast := mine != nil && (latest == nil || !latest.last.After(mine.last))
	start := uint64(0)
	switch {
	case usedLast:
		// This number's consumers were used last: a missing one starts
		// after their floor.
		start = mine.floor + 1
	case latest != nil:
		start = latest.floor + 1
		p.log.Info("new partition consumers start after the acknowledgement floor of the consumers used last", "consumers", latestName, "from_seq", start)
	}
	staleMine := mine != nil && (!mine.filtered || (!usedLast && coversAll))
	stalePlain := plain != nil && coversAll && latest.last.After(plain.last)
	p.mu.Lock()
	units := slices.Clone(p.own)
	p.mu.Unlock()
	// The plain lane (the last unit) first: it takes the events the
	// consumers deleted below leave under the event prefix, before they
	// are deleted (an interest stream drops what no consumer wants).
	for _, u := range slices.Backward(units) {
		if u.plain && stalePlain {
			p.log.Warn("deleting the plain lane's consumer left from an earlier run: the shared consumer delivered events since", "consumer", plainName, "from_seq", start)
			if err := p.deleteConsumers(ctx, plain.names); err != nil {
				return err
			}
		}
		if !u.plain && staleMine {
			why := "deleting this number of partitions' consumers left from an earlier run: consumers reading every subject delivered events since"
			if !mine.filtered {
				why = "deleting this number of partitions' consumers made by an earlier version (each read the whole stream): made again, filtered to their partition"
			}
			p.log.Warn(why, "consumers", own, "count", len(mine.names), "from_seq", start)
			if err := p.deleteConsumers(ctx, mine.names); err != nil {
				return err
			}
			staleMine = false
		}
		if err := p.createConsumer(ctx, u, start); err != nil {
			return err
		}
	}
	for name, g := range sets {
		switch {
		case name == own:
			continue
		case name == p.o.Durable && g.waiting > 0:
			p.log.Warn("a daemon without partitions still reads the stream through the shared consumer: per-minion order does not hold between it and the partitions, and the stream keeps events until it acknowledged them", "consumer", name)
			continue
		case name != p.o.Durable && g.filtered:
			// Another number's partitions: drained (at once when
			// empty) and deleted once the transform sends nothing
			// more to their subjects, so that no event is dropped.
			p.drainLater(name, g)
			continue
		}
		for _, c := range g.names {
			if err := p.c.JetStream().DeleteConsumer(ctx, p.o.Stream, c); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				p.log.Warn("could not delete a consumer no replica uses; the stream keeps events for it until MaxAge (nats consumer rm)", "consumer", c, "err", err)
			}
		}
		p.log.Info("deleted the reactor's consumers that read every subject and no replica uses (the shared consumer, or an earlier version's partitions)", "consumers", name, "count", len(g.names))
	}
	return nil
}

// createConsumer creates u's durable consumer when it is missing, its new
// deliveries from stream sequence start (0: all).
func (p *Partitioned) createConsumer(ctx context.Context, u *unit, start uint64) error {
	cfg := jetstream.ConsumerConfig{Durable: u.name, AckPolicy: jetstream.AckAllPolicy, AckWait: p.o.AckWait, FilterSubject: u.filter,
		MaxAckPending: p.o.MaxAckPending, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: 2 * p.o.LeaseTTL,
		PriorityGroups: []string{PartitionGroup}, Description: "reactord: " + u.what}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	err := retryTransient(ctx, func() error {
		_, err := p.c.JetStream().Consumer(ctx, p.o.Stream, u.name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			_, err = p.c.JetStream().CreateConsumer(ctx, p.o.Stream, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				err = nil // another replica was faster
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("partition consumer %s: %w", u.name, err)
	}
	return nil
}

// deleteConsumers deletes the named consumers of the event stream.
func (p *Partitioned) deleteConsumers(ctx context.Context, names []string) error {
	for _, name := range names {
		if err := p.c.JetStream().DeleteConsumer(ctx, p.o.Stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("deleting stale partition consumer %s: %w", name, err)
		}
	}
	return nil
}

// drainLater makes the consumers of another number of partitions (set
// is Durable-M) units to drain before this number's partitions start:
// those of the set with the oldest events first, one set at a time.
func (p *Partitioned) drainLater(set string, g *consumerSet) {
	names := slices.Sorted(slices.Values(g.names))
	p.mu.Lock()
	defer p.mu.Unlock()
	var total uint64
	for _, name := range names {
		total += g.backlog[name]
		// Its lease key is the one the replicas of M used: lease.M.j.
		m, j, _ := strings.Cut(strings.TrimPrefix(name, p.o.Durable+"-"), "-")
		lease := "lease." + m + "." + j
		if _, known := p.byLease[lease]; known {
			continue
		}
		p.nextOld++
		p.addUnit(&unit{i: oldBase + p.nextOld, name: name, lease: lease, old: true, set: set, floor: g.floor,
			what: fmt.Sprintf("partition %s of %s (drained before the %d partitions start)", j, m, p.o.Partitions)})
	}
	p.log.Warn("another number of partitions' consumers are on the stream: they are drained first, in order, and deleted; this number's partitions start once none is left",
		"consumers", set, "count", len(names), "events", total, "partitions", p.o.Partitions)
}

// apply takes a change of the bucket: a replica's presence or a lease.
func (p *Partitioned) apply(e kv.StateEntry) {
	p.mu.Lock()
	switch {
	case strings.HasPrefix(e.Key, "member."):
		id := strings.TrimPrefix(e.Key, "member.")
		if n, err := strconv.Atoi(string(e.Value)); err == nil && !e.Deleted {
			p.members[id] = n
			if n != p.o.Partitions && !p.warned[id] {
				p.warned[id] = true
				p.log.Error("a replica runs with another number of partitions: per-minion order does not hold between the two (stop every replica to change the number)",
					"replica", id, "its_partitions", n, "partitions", p.o.Partitions)
			}
		} else {
			delete(p.members, id)
		}
	case strings.HasPrefix(e.Key, "lease."):
		i, ok := p.byLease[e.Key]
		if !ok {
			break
		}
		if e.Deleted || len(e.Value) == 0 {
			delete(p.leases, i)
		} else {
			p.leases[i] = string(e.Value)
		}
	}
	p.mu.Unlock()
	p.poke()
}

func (p *Partitioned) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// refresh reads the replicas present and the leases from the server: the
// bucket's watch makes changes known at once, but a watch can stall or end
// when a node of the cluster dies, and the balance must not rest on it.
func (p *Partitioned) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
	defer cancel()
	members, err := p.state.Scan(ctx, "member.")
	if err != nil {
		return
	}
	leases, err := p.state.Scan(ctx, "lease.")
	if err != nil {
		return
	}
	p.forgetDrained(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.members)
	for k, v := range members {
		if n, err := strconv.Atoi(string(v)); err == nil {
			p.members[strings.TrimPrefix(k, "member.")] = n
		}
	}
	clear(p.leases)
	for k, v := range leases {
		if i, ok := p.byLease[k]; ok && len(v) > 0 {
			p.leases[i] = string(v)
		}
	}
	for i, r := range p.owned { // a lease acquired since the scan began
		if p.leases[i] == "" && r != nil {
			p.leases[i] = p.o.Replica
		}
	}
	now := time.Now()
	p.readAt = now
	active := map[int]bool{}
	for _, u := range p.active() {
		active[u.i] = true
		if p.leases[u.i] != "" {
			delete(p.unowned, u.i)
		} else if _, ok := p.unowned[u.i]; !ok {
			p.unowned[u.i] = now
		}
	}
	for i := range p.unowned {
		if !active[i] {
			delete(p.unowned, i)
		}
	}
}

// Health reports what keeps this replica's partitioned consumption from
// working, for its /healthz: the leases could not be read from the
// bucket for two lease times (the replica can neither take nor keep
// partitions), or a partition has had no owner for three lease times (the
// events of its minions wait, and no replica takes it over). nil when
// neither holds; a replica that owns no partition (more replicas than
// partitions) is healthy.
func (p *Partitioned) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil
	}
	if d := time.Since(p.readAt); d > 2*p.o.LeaseTTL {
		return fmt.Errorf("the partition leases (bucket %s) could not be read for %s", p.o.Bucket, d.Round(time.Second))
	}
	worst, since := -1, time.Time{}
	for i, t := range p.unowned {
		if worst < 0 || t.Before(since) {
			worst, since = i, t
		}
	}
	if d := time.Since(since); worst >= 0 && d > 3*p.o.LeaseTTL {
		what := fmt.Sprintf("unit %d", worst)
		if u := p.unitLocked(worst); u != nil {
			what = u.what
		}
		return fmt.Errorf("%s has had no owner for %s (%d without one)", what, d.Round(time.Second), len(p.unowned))
	}
	return nil
}

// heartbeat writes this replica's presence, kept for a lease's time.
func (p *Partitioned) heartbeat() {
	p.state.Put("member."+p.o.Replica, []byte(strconv.Itoa(p.o.Partitions)), p.o.LeaseTTL)
}

// manage renews the leases, announces this replica, and balances the
// partitions: it takes free ones up to its share (the partitions divided
// by the live replicas, rounded up) and hands over one at a time those
// beyond it.
func (p *Partitioned) manage() {
	defer close(p.done)
	t := time.NewTicker(p.o.LeaseTTL / 4)
	defer t.Stop()
	lastBeat := time.Now()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		case <-p.kick:
		}
		p.mu.Lock()
		stopping := p.stopping
		p.mu.Unlock()
		if !stopping && time.Since(lastBeat) >= p.o.LeaseTTL/4 {
			p.heartbeat()
			lastBeat = time.Now()
			p.refresh()
		}
		p.renew()
		if !stopping {
			p.balance()
		}
	}
}

// renew renews the lease of every partition held, all at once, and stops
// consuming one whose lease is someone else's, expired, or could not be
// renewed for two thirds of its time (each partition's acknowledgement
// loop checks that too, so a slow renewal cannot keep a partition past
// it).
func (p *Partitioned) renew() {
	p.mu.Lock()
	runs := make([]*partRun, 0, len(p.owned))
	for _, r := range p.owned {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.overdue() {
			p.lose(r, "its lease could not be renewed in time")
			continue
		}
		if time.Since(r.renewedAt()) < p.o.LeaseTTL/8 {
			continue
		}
		wg.Go(func() {
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
			ok, err := p.state.Update(ctx, r.u.lease, p.o.LeaseTTL, func(old []byte) ([]byte, bool) {
				return []byte(p.o.Replica), string(old) == p.o.Replica
			})
			cancel()
			switch {
			case ok:
				r.renewed.Store(began.UnixNano())
			case err == nil:
				p.lose(r, "its lease expired or another replica holds it")
			case r.overdue():
				p.lose(r, "its lease could not be renewed: "+err.Error())
			}
		})
	}
	wg.Wait()
}

// share is how many of the active units (see active) this replica should
// hold (p.mu held).
func (p *Partitioned) share() int {
	live := 1
	for id, n := range p.members {
		if id != p.o.Replica && n == p.o.Partitions {
			live++
		}
	}
	n := 0
	for _, u := range p.active() {
		if !u.plain {
			n++
		}
	}
	return (n + live - 1) / live
}

// preference orders the active units for this replica (rendezvous
// hashing), so that each replica prefers different ones and keeps them
// (p.mu held).
func (p *Partitioned) preference() []*unit {
	units := slices.Clone(p.active())
	score := make(map[int]uint32, len(units))
	for _, u := range units {
		h := fnv.New32a()
		_, _ = h.Write([]byte(p.o.Replica + "/" + u.name))
		score[u.i] = h.Sum32()
	}
	slices.SortFunc(units, func(a, b *unit) int { return cmp.Compare(score[b.i], score[a.i]) })
	return units
}

// balance takes free partitions up to this replica's share, or hands one
// over when it holds more.
func (p *Partitioned) balance() {
	p.mu.Lock()
	share := p.share()
	pref := p.preference()
	held := 0
	for _, r := range p.owned {
		if !r.u.plain {
			held++
		}
	}
	if held > share && p.release == nil {
		for _, u := range slices.Backward(pref) {
			if r := p.owned[u.i]; r != nil && !u.plain {
				p.release = r
				go p.handOver(r, fmt.Sprintf("balancing: %d partitions to share, %d each at most", len(pref), share))
				break
			}
		}
	}
	var free []*unit
	for _, u := range pref {
		i := u.i
		// A lease held by a replica no longer present is tried
		// too: its expiry may not have reached this replica (a
		// watch cut by a node's death), and past twice its time a
		// lease the server failed to expire is stale.
		if owner := p.leases[i]; p.owned[i] == nil && (owner == "" || p.members[owner] == 0) && (u.plain || held < share) {
			free = append(free, u)
		}
	}
	p.mu.Unlock()
	for _, u := range free {
		i := u.i
		if held >= share && !u.plain {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.o.LeaseTTL/4)
		began := time.Now()
		var stale string
		ok, err := p.state.UpdateAt(ctx, u.lease, p.o.LeaseTTL, func(old []byte, written time.Time) ([]byte, bool) {
			stale = ""
			if len(old) > 0 && time.Since(written) > 2*p.o.LeaseTTL {
				stale = string(old)
			}
			return []byte(p.o.Replica), len(old) == 0 || stale != ""
		})
		cancel()
		if err != nil || !ok {
			continue
		}
		if stale != "" {
			p.log.Warn("partition lease of a replica gone was not expired by the server: taken over", "consumer", u.name, "holder", stale)
		}
		if !u.plain {
			held++
		}
		r := newPartRun(p, u)
		r.renewed.Store(began.UnixNano())
		p.mu.Lock()
		stopping := p.stopping
		if !stopping {
			p.owned[i] = r
			p.leases[i] = p.o.Replica
		}
		p.mu.Unlock()
		if stopping {
			p.writeFree(u)
			return
		}
		go r.start("acquired")
	}
}

// drained ends the drain of another number's partition r: its consumer is
// deleted, its lease freed, and this number's partitions start once none
// is left.
func (p *Partitioned) drained(r *partRun, why string) {
	r.halt()
	r.settle(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := p.c.JetStream().DeleteConsumer(ctx, p.o.Stream, r.u.name)
	cancel()
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		p.log.Warn("drained partition: deleting its consumer failed; retried by the next holder", "consumer", r.u.name, "err", err)
		p.lose(r, "its consumer could not be deleted")
		return
	}
	p.mu.Lock()
	if p.owned[r.i] == r {
		delete(p.owned, r.i)
	}
	delete(p.old, r.i)
	left := len(p.old)
	p.mu.Unlock()
	p.state.Delete(r.u.lease, time.Second)
	p.log.Info("partition of the former number drained: consumer deleted", "consumer", r.u.name, "reason", why, "left", left)
	if left == 0 {
		p.log.Info("the former number's partitions are drained: this number's partitions start", "partitions", p.o.Partitions)
	}
	p.changed("drained", r.i)
	p.poke()
}

// forgetDrained drops the units of another number whose consumer another
// replica deleted, once drained.
func (p *Partitioned) forgetDrained(ctx context.Context) {
	p.mu.Lock()
	var names []*unit
	for _, u := range p.old {
		if p.owned[u.i] == nil {
			names = append(names, u)
		}
	}
	p.mu.Unlock()
	for _, u := range names {
		_, err := p.c.JetStream().Consumer(ctx, p.o.Stream, u.name)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		p.mu.Lock()
		if p.owned[u.i] == nil {
			delete(p.old, u.i)
		}
		p.mu.Unlock()
		p.poke()
	}
}

// writeFree marks u's lease free, if this replica holds it.
func (p *Partitioned) writeFree(u *unit) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = p.state.Update(ctx, u.lease, time.Second, func(old []byte) ([]byte, bool) {
		return []byte{}, string(old) == p.o.Replica
	})
}

// lose stops consuming partition r at once: its lease is gone.
func (p *Partitioned) lose(r *partRun, why string) {
	p.mu.Lock()
	if p.owned[r.i] != r {
		p.mu.Unlock()
		return
	}
	delete(p.owned, r.i)
	p.mu.Unlock()
	r.lost.Store(true)
	r.halt()
	go r.settle(0) // acknowledge what was handled; the rest goes to the next owner
	p.log.Error("partition lost: stopped consuming it; its events not acknowledged go to the replica that takes it over",
		"consumer", r.u.name, "replica", p.o.Replica, "reason", why)
	p.changed("lost", r.i)
}

// handOver stops pulling partition r, waits (for up to AckWait) until the
// events handed to the handler are settled, acknowledges them and frees
// the lease for another replica.
func (p *Partitioned) handOver(r *partRun, why string) {
	r.halt()
	r.settle(p.o.AckWait)
	p.mu.Lock()
	mine := p.owned[r.i] == r
	if mine {
		delete(p.owned, r.i)
	}
	if p.release == r {
		p.release = nil
	}
	p.mu.Unlock()
	if !mine {
		return
	}
	p.writeFree(r.u)
	p.log.Info("partition handed over", "consumer", r.u.name, "replica", p.o.Replica, "reason", why)
	p.changed("released", r.i)
	p.poke()
}

func (p *Partitioned) changed(change string, i int) {
	if p.o.OnChange != nil {
		p.o.OnChange(change, i)
	}
}

// Owned returns the partitions this replica holds, in order: this
// number's (0 to N-1) and, while they are drained, another number's (from
// 10000); not the plain lane (see HoldsPlain).
func (p *Partitioned) Owned() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for i, r := range p.owned {
		if !r.u.plain {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// HoldsPlain reports whether this replica holds the plain lane (the events
// published without a partition key).
func (p *Partitioned) HoldsPlain() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.owned {
		if r.u.plain {
			return true
		}
	}
	return false
}

// Resyncs returns how many times a partition was reset to its
// acknowledgement floor while held (a missed delivery, a refused event).
func (p *Partitioned) Resyncs() int64 { return p.resyncs.Load() }

// Received returns how many deliveries this replica's consumers received,
// redeliveries included: with partitions by subject, about the events of
// the partitions it held, not every event of the stream.
func (p *Partitioned) Received() int64 { return p.received.Load() }

// Ignored returns how many redeliveries of events already taken were
// passed over.
func (p *Partitioned) Ignored() int64 { return p.ignored.Load() }

// Stop stops pulling events; the partitions stay this replica's (their
// leases renewed) until Release, so that the events handed to the
// handler finish here. It is safe to call twice.
func (p *Partitioned) Stop() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopping = true
		runs := make([]*partRun, 0, len(p.owned))
		for _, r := range p.owned {
			runs = append(runs, r)
		}
		p.mu.Unlock()
		for _, r := range runs {
			r.halt()
		}
	})
}

// Release (after Stop, once the handler's events are settled or ctx
// ends) acknowledges what was handled, frees the leases so that the other
// replicas take the partitions over at once, and withdraws this replica.
// It is safe to call twice.
func (p *Partitioned) Release(ctx context.Context) {
	p.Stop()
	p.relOnce.Do(func() {
		close(p.quit)
		<-p.done
		p.mu.Lock()
		runs := make([]*partRun, 0, len(p.owned))
		for _, r := range p.owned {
			runs = append(runs, r)
		}
		p.owned = map[int]*partRun{}
		p.mu.Unlock()
		wait := p.o.AckWait
		if dl, ok := ctx.Deadline(); ok {
			wait = time.Until(dl)
		}
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() {
				r.settle(wait)
				p.writeFree(r.u)
				p.changed("released", r.i)
			})
		}
		wg.Wait()
		p.state.Delete("member."+p.o.Replica, time.Second)
		_ = p.c.Flush(ctx)
		p.cancel()
		if len(runs) > 0 {
			p.log.Info("partitions handed over at stop", "partitions", len(runs), "replica", p.o.Replica)
		}
	})
}

// partRun is one held partition: its consumption session, the events
// taken from it in stream order, and their acknowledgement.
type partRun struct {
	p       *Partitioned
	u       *unit
	i       int          // u.i
	renewed atomic.Int64 // when the lease was last renewed (Unix ns, the renewal's start)
	lost    atomic.Bool  // the lease is gone: events taken are not to be handled here
	took    atomic.Int64 // when an event was last taken, or the session began (Unix ns): the stall check's progress

	mu       sync.Mutex
	cc       jetstream.ConsumeContext
	halted   bool // no more events: lost, handed over or stopping
	pausing  bool // a resync is under way: events are passed over
	session  int  // counts the sessions (resets)
	next     uint64
	lastDseq uint64
	taken    []*takenMsg // not acknowledged yet, in stream order
	inflight int         // handed to the handler, not settled
	floor    jetstream.Msg
	acked    jetstream.Msg
	backoff  time.Duration
	quit     chan struct{}
}

type takenMsg struct {
	m       jetstream.Msg
	seq     uint64
	session int
	since   time.Time
	done    bool
}

func newPartRun(p *Partitioned, u *unit) *partRun {
	return &partRun{p: p, u: u, i: u.i, quit: make(chan struct{})}
}

func (r *partRun) renewedAt() time.Time { return time.Unix(0, r.renewed.Load()) }

// overdue reports that the lease was last renewed two thirds of its time
// ago or more: another replica may take it a third of its time later.
func (r *partRun) overdue() bool { return time.Since(r.renewedAt()) >= r.p.o.LeaseTTL*2/3 }

// start begins a session on the partition: it takes the pin, resets the
// consumer to its acknowledgement floor and pulls. On failure it retries
// until the partition is halted.
func (r *partRun) start(change string) {
	p := r.p
	go r.acks()
	if !r.sessionRetrying("partition: starting its consumption failed; retrying") || r.isHalted() {
		return // halted, or a former number's partition found drained
	}
	p.log.Info("partition "+change+": consuming it from its acknowledgement floor", "consumer", r.u.name, "replica", p.o.Replica, "from_seq", r.nextSeq())
	p.changed(change, r.i)
}

// sessionRetrying starts a session (session0), retrying every 250 ms
// until one starts (true) or the partition is halted or quits (false);
// failures are logged as failed, the first and every twentieth.
func (r *partRun) sessionRetrying(failed string) bool {
	for attempt := 1; !r.isHalted(); attempt++ {
		err := r.session0()
		if err == nil {
			return true
		}
		if r.isHalted() {
			return false
		}
		if attempt == 1 || attempt%20 == 0 {
			r.p.log.Warn(failed, "consumer", r.u.name, "attempts", attempt, "err", err)
		}
		select {
		case <-r.quit:
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}

func (r *partRun) isHalted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.halted
}

func (r *partRun) nextSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// session0 unpins the consumer, resets it to its acknowledgement floor
// (dropping what the server thinks is pending elsewhere) and starts
// pulling with a fresh pin.
//
// Each request has a short timeout of its own: a request that reaches a
// consumer's former leader while a cluster elects a new one is never
// answered, and the caller retries at once.
func (r *partRun) session0() error {
	p := r.p
	name := r.u.name
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	s, err := p.c.JetStream().Stream(ctx, p.o.Stream)
	cancel()
	if err != nil {
		return fmt.Errorf("stream %s: %w", p.o.Stream, err)
	}
	if r.u.old {
		// Another replica may have drained and deleted it: resetting a
		// consumer that is gone is not answered.
		ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
		_, err := s.Consumer(ctx, name)
		cancel()
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			p.drained(r, "its consumer is gone (drained by another replica)")
			return nil
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	_ = s.UnpinConsumer(ctx, name, PartitionGroup) // none pinned: an error
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	res, err := s.ResetConsumer(ctx, name)
	cancel()
	if errors.Is(err, jetstream.ErrConsumerNotFound) && r.u.old {
		p.drained(r, "its consumer is gone")
		return nil
	}
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		if err = p.ensureConsumers(ctx); err == nil {
			res, err = s.ResetConsumer(ctx, name)
		}
		cancel()
	}
	if err != nil {
		return fmt.Errorf("resetting consumer %s to its acknowledgement floor: %w", name, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := s.Consumer(ctx, name) // a new handle: no pin id of a past session
	if err != nil {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	r.mu.Lock()
	if r.halted {
		r.mu.Unlock()
		return nil
	}
	r.session++
	r.took.Store(time.Now().UnixNano())
	r.next, r.lastDseq = res.ResetSeq, 0
	r.taken, r.floor, r.acked = nil, nil, nil
	r.pausing = false
	r.mu.Unlock()
	cc, err := cons.Consume(r.receive, jetstream.PullPriorityGroup(PartitionGroup), jetstream.PullMaxMessages(min(p.o.MaxAckPending, 1024)),
		jetstream.PullExpiry(p.o.LeaseTTL/2), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				r.resync("the consumer is gone: " + err.Error())
			}
		}))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", name, err)
	}
	r.mu.Lock()
	halted := r.halted
	if !halted {
		r.cc = cc
	}
	r.mu.Unlock()
	if halted {
		cc.Stop()
	}
	return nil
}

// receive takes one delivery: in order, it hands the partition's events
// to the handler and marks the others handled; a redelivery of an event
// already taken is passed over (acknowledged again if it is handled); a
// missed delivery (the consumer sequence jumps) resets the partition.
func (r *partRun) receive(m jetstream.Msg) {
	r.p.received.Add(1)
	md, err := m.Metadata()
	if err != nil {
		return
	}
	p := r.p
	r.mu.Lock()
	if r.halted || r.pausing {
		r.mu.Unlock()
		return // left pending: the next session or owner starts at the floor
	}
	if want := r.lastDseq + 1; md.Sequence.Consumer != want {
		r.mu.Unlock()
		r.resync(fmt.Sprintf("delivery %d came when %d was due", md.Sequence.Consumer, want))
		return
	}
	r.lastDseq = md.Sequence.Consumer
	if md.Sequence.Stream < r.next {
		// Taken already in this session: the acknowledgement wait ran
		// out while the handler held it, or the server lost the
		// acknowledgement (sent to a consumer leader that died). Once
		// handled it is acknowledged again: else the server keeps it
		// pending and, with MaxAckPending of them, sends only these
		// again, forever, and none of the later events.
		handled := len(r.taken) == 0 || md.Sequence.Stream < r.taken[0].seq
		r.mu.Unlock()
		p.ignored.Add(1)
		if handled {
			_ = m.Ack() // AckAll: this event and those before it, all handled
		}
		return
	}
	r.next = md.Sequence.Stream + 1
	r.took.Store(time.Now().UnixNano())
	t := &takenMsg{m: m, seq: md.Sequence.Stream, session: r.session, since: time.Now()}
	r.taken = append(r.taken, t)
	r.inflight++
	r.mu.Unlock()
	var once sync.Once
	ack := func() error {
		err := errors.New("message already acknowledged or refused")
		once.Do(func() { err = nil; r.settleOne(t, true) })
		return err
	}
	nak := func() error {
		err := errors.New("message already acknowledged or refused")
		once.Do(func() {
			err = nil
			r.settleOne(t, false)
			r.resync("the handler refused an event (it starts again from the acknowledgement floor)")
		})
		return err
	}
	msg := natsbus.NewMessage(m.Subject(), m.Data(), m.Headers(), t.since, t.seq, natsbus.Settlers{Ack: ack, Nak: nak, Moved: r.lost.Load})
	p.handler(msg)
}

// settleOne records t as handled (done) or refused, and moves the floor
// over the longest handled prefix.
func (r *partRun) settleOne(t *takenMsg, done bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	if t.session != r.session {
		return // a past session's: its events come again
	}
	t.done = done
	n := 0
	for n < len(r.taken) && r.taken[n].done {
		r.floor = r.taken[n].m
		n++
	}
	if n > 0 {
		clear(r.taken[:n])
		r.taken = r.taken[n:]
		r.backoff = 0
	}
}

// acks acknowledges the floor (AckAll: every event up to it) every 20ms
// when it moved, and sends progress acknowledgements for the events
// handed to the handler for half of AckWait or more, until the partition
// is halted and settled.
func (r *partRun) acks() {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	every := max(r.p.o.AckWait/4, 10*time.Millisecond)
	lastProgress, lastCheck, lastEmpty := time.Now(), time.Now(), time.Now()
	stalled := 0
	for {
		select {
		case <-r.quit:
			r.ackFloor()
			return
		case <-t.C:
		}
		r.ackFloor()
		if r.overdue() {
			r.p.lose(r, "its lease could not be renewed in time")
		}
		if r.u.old && time.Since(lastEmpty) >= 250*time.Millisecond {
			lastEmpty = time.Now()
			if r.empty() {
				r.p.drained(r, "every event handled and acknowledged")
				return
			}
		}
		if time.Since(lastCheck) >= r.p.o.CheckEvery {
			lastCheck = time.Now()
			if stalled = r.checkStall(stalled); stalled >= 2 {
				stalled = 0
				r.resync("stalled: events wait in the stream but no new one was delivered for two checks")
			}
		}
		if time.Since(lastProgress) < every {
			continue
		}
		lastProgress = time.Now()
		var due []jetstream.Msg
		r.mu.Lock()
		for _, tm := range r.taken {
			if !tm.done && time.Since(tm.since) >= r.p.o.AckWait/2 {
				tm.since = time.Now()
				due = append(due, tm.m)
			}
		}
		r.mu.Unlock()
		for _, m := range due {
			_ = m.InProgress()
		}
	}
}

// empty reports that a partition being drained has nothing left: nothing
// taken and not settled here, nothing pending or unacknowledged on the
// server.
func (r *partRun) empty() bool {
	r.mu.Lock()
	busy := r.halted || r.pausing || r.cc == nil || len(r.taken) > 0 || r.inflight > 0
	r.mu.Unlock()
	if busy {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	if err != nil {
		return false
	}
	info := cons.CachedInfo()
	return info.NumPending == 0 && info.NumAckPending == 0
}

// checkStall returns stalled+1 when the partition's consumer has events
// waiting for delivery but no new one was taken since the last check (a
// pull lost with a node, a consumer leader that does not deliver, or one
// that only sends events taken already again), else 0.
func (r *partRun) checkStall(stalled int) int {
	r.mu.Lock()
	busy := r.halted || r.pausing || r.cc == nil
	r.mu.Unlock()
	if busy || time.Since(time.Unix(0, r.took.Load())) < r.p.o.CheckEvery {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	if err != nil || cons.CachedInfo().NumPending == 0 {
		return 0
	}
	return stalled + 1
}

func (r *partRun) ackFloor() {
	r.mu.Lock()
	f := r.floor
	if f == nil || f == r.acked {
		r.mu.Unlock()
		return
	}
	r.acked = f
	r.mu.Unlock()
	_ = f.Ack()
}

// halt stops pulling for good.
func (r *partRun) halt() {
	r.mu.Lock()
	if r.halted {
		r.mu.Unlock()
		return
	}
	r.halted = true
	cc := r.cc
	r.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// waitSettled waits, for up to d, until every event handed to the
// handler is settled.
func (r *partRun) waitSettled(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := r.inflight
		r.mu.Unlock()
		if n <= 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits (for up to d) until every event handed to the handler is
// settled, acknowledges the floor and ends the acknowledgement loop.
func (r *partRun) settle(d time.Duration) {
	r.waitSettled(d)
	r.mu.Lock()
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	r.mu.Unlock()
	r.ackFloor()
	r.confirmFloor()
}

// confirmFloor waits, for up to a request's time, until the server
// recorded the acknowledgement floor: acknowledgements go out without
// waiting for a reply, and the next owner of the partition starts at the
// floor the server holds, so an event acknowledged here but not yet
// recorded there would run again (a hand-over between live replicas
// reacted twice to one event on a loaded machine).
func (r *partRun) confirmFloor() {
	r.mu.Lock()
	f := r.acked
	r.mu.Unlock()
	if f == nil {
		return
	}
	md, err := f.Metadata()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	// The lookup brings the consumer's info; Info refreshes it.
	cons, err := r.p.c.JetStream().Consumer(ctx, r.p.o.Stream, r.u.name)
	for err == nil && cons.CachedInfo().AckFloor.Stream < md.Sequence.Stream {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(5 * time.Millisecond):
			_, err = cons.Info(ctx)
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.p.log.Warn("the server did not confirm the partition's last acknowledgement: its next owner may handle those events again",
			"consumer", r.u.name, "replica", r.p.o.Replica, "stream_seq", md.Sequence.Stream, "error", err)
	}
}

// resync pauses the partition, waits until what was handed to the
// handler is settled, and starts a new session from the acknowledgement
// floor, so that nothing after a missed or refused event is handled
// before it.
func (r *partRun) resync(why string) {
	p := r.p
	r.mu.Lock()
	if r.halted || r.pausing {
		r.mu.Unlock()
		return
	}
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		r.mu.Unlock()
		return // the next owner starts at the floor
	}
	r.pausing = true
	cc := r.cc
	r.cc = nil
	r.backoff = min(max(2*r.backoff, 100*time.Millisecond), 5*time.Second)
	wait := r.backoff
	r.mu.Unlock()
	p.resyncs.Add(1)
	p.log.Warn("partition resync: consuming it again from its acknowledgement floor", "consumer", r.u.name, "reason", why, "after", wait.String())
	p.changed("resync", r.i)
	go func() {
		if cc != nil {
			cc.Stop()
		}
		r.waitSettled(p.o.AckWait)
		r.mu.Lock()
		r.acked = nil // send it again: the last one may have gone to a consumer leader that died
		r.mu.Unlock()
		r.ackFloor()
		select {
		case <-r.quit:
			return
		case <-time.After(wait):
		}
		if r.sessionRetrying("partition resync failed; retrying") {
			p.log.Info("partition resynced: consuming it from its acknowledgement floor", "consumer", r.u.name, "from_seq", r.nextSeq())
		}
	}()
}
